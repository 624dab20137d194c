package protocol

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLayout keeps the core sans-I/O: no file of the package (tests
// aside) may import a package that opens a socket or a file, takes a
// lock or belongs to the runtime around the core, nor read a clock or
// wait. net/netip is allowed: addresses are plain values; so is time,
// for time.Duration in configs, but none of its functions that read the
// clock, sleep or start timers (the caller passes now in).
func TestLayout(t *testing.T) {
	forbidden := []string{
		"net", "os", "sync", "syscall", "crypto/tls",
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
		f, err := parser.ParseFile(token.NewFileSet(), name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, call := range clockCalls(f) {
			t.Errorf("%s calls time.%s: the protocol core takes now from its caller (docs/protocol.md)", name, call)
		}
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

// clockFuncs are the functions of package time that read the clock,
// sleep or start a timer.
var clockFuncs = map[string]bool{
	"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
	"AfterFunc": true, "Tick": true, "NewTimer": true, "NewTicker": true,
}

// clockCalls lists the clock functions of package time that f uses,
// under whatever name f imports time.
func clockCalls(f *ast.File) []string {
	pkg := ""
	for _, imp := range f.Imports {
		if path, _ := strconv.Unquote(imp.Path.Value); path == "time" {
			pkg = "time"
			if imp.Name != nil {
				pkg = imp.Name.Name
			}
		}
	}
	if pkg == "" {
		return nil
	}
	var found []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && id.Name == pkg && clockFuncs[sel.Sel.Name] {
			found = append(found, sel.Sel.Name)
		}
		return true
	})
	return found
}

// TestLayoutFindsClockCalls checks the check: a file that reads the
// clock under an alias is caught, one that only names time.Duration is not.
func TestLayoutFindsClockCalls(t *testing.T) {
	for src, want := range map[string]int{
		"package p\nimport \"time\"\nvar d time.Duration = time.Second":          0,
		"package p\nimport clock \"time\"\nvar n = clock.Now()":                  1,
		"package p\nimport \"time\"\nfunc f() { time.Sleep(1); _ = time.Since }": 2,
	} {
		f, err := parser.ParseFile(token.NewFileSet(), "x.go", src, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := clockCalls(f); len(got) != want {
			t.Errorf("%q: found %v, want %d", src, got, want)
		}
	}
}
