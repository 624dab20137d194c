package counterstest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestIsolated: the test binary of every package that links package cast
// (and so may run a loop, which writes a counters file) has a TestMain
// that calls Main. It reads the two modules' test dependencies with `go
// list`.
func TestIsolated(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool in PATH: cannot list the test binaries' dependencies")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, mod := range []string{root, filepath.Join(root, "bench")} {
		cmd := exec.Command(goTool, "list", "-test", "-f", "{{.ImportPath}}|{{.Dir}}|{{join .Deps \" \"}}", "./...")
		cmd.Dir = mod
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list in %s: %v\n%s", mod, err, stderr.String())
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.SplitN(line, "|", 3)
			if len(f) != 3 || !strings.Contains(f[0], ".test]") {
				continue // not a test binary's package
			}
			links := strings.Contains(" "+f[2]+" ", " github.com/walcast/walcast/cast ") ||
				strings.HasPrefix(f[0], "github.com/walcast/walcast/cast [")
			if !links {
				continue
			}
			checked++
			if !callsMain(t, f[1]) {
				t.Errorf("%s: its tests link package cast but no TestMain in %s calls counterstest.Main", f[0], f[1])
			}
		}
	}
	if checked == 0 {
		t.Fatal("no test binary links package cast: the listing is wrong")
	}
}

// callsMain reports whether a _test.go file of dir calls counterstest.Main.
func callsMain(t *testing.T, dir string) bool {
	names, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("counterstest.Main(")) {
			return true
		}
	}
	return false
}
