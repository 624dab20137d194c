package protocol

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLayout keeps the core sans-I/O: no file of the package (tests
// aside) may import a package that reads a clock, opens a socket or a
// file, takes a lock or belongs to the runtime around the core.
// net/netip is allowed: addresses are plain values.
func TestLayout(t *testing.T) {
	forbidden := []string{
		"net", "os", "time", "sync", "syscall", "crypto/tls",
		"golang.org/x/sys/unix",
		"github.com/walcast/walcast/cast",
		"github.com/walcast/walcast/replay",
		"github.com/walcast/walcast/affinity",
		"github.com/walcast/walcast/datapath",
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if path == "net/netip" {
				continue
			}
			for _, bad := range forbidden {
				if path == bad || strings.HasPrefix(path, bad+"/") {
					t.Errorf("%s imports %q: the protocol core must stay sans-I/O (docs/protocol.md)", name, path)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no source files found")
	}
}
