package cast

import (
	"go/build"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestImportsNoExposition: what a user of the transport imports (cast,
// and through it the core, the WAL, replay and the datapaths) reaches
// neither the /metrics exposition (counters/metrics, net/http) nor
// Prometheus's libraries (docs/operate.md: package cast does not import
// it). The exposition is for cmd/cast and for a program that mounts
// metrics.Handler itself. Only this host's build is walked.
func TestImportsNoExposition(t *testing.T) {
	const mod = "github.com/walcast/walcast"
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var ext []string
	var walk func(path string)
	walk = func(path string) {
		if seen[path] {
			return
		}
		seen[path] = true
		if path != mod && !strings.HasPrefix(path, mod+"/") {
			if strings.Contains(strings.SplitN(path, "/", 2)[0], ".") {
				ext = append(ext, path)
			}
			return
		}
		p, err := build.ImportDir(filepath.Join(root, strings.TrimPrefix(path, mod)), 0)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, imp := range p.Imports {
			walk(imp)
		}
	}
	walk(mod + "/cast")
	for _, bad := range []string{mod + "/counters/metrics", "net/http"} {
		if seen[bad] {
			t.Errorf("package cast reaches %s", bad)
		}
	}
	sort.Strings(ext)
	for _, e := range ext {
		if strings.Contains(e, "prometheus") {
			t.Errorf("package cast reaches %s", e)
		}
	}
	t.Logf("outside the module: %v", ext)
}
