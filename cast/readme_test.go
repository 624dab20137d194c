package cast_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReadmeProgram builds and runs the README's library program as a
// user would: in a fresh module that requires walcast (through a replace
// directive pointing at this checkout), from the module cache only.
func TestReadmeProgram(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a separate module")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "<!-- library-example:begin -->\n```go\n")
	if !ok {
		t.Fatal("README has no library example block")
	}
	prog, _, ok := strings.Cut(block, "```\n<!-- library-example:end -->")
	if !ok {
		t.Fatal("library example block not closed")
	}
	dir := t.TempDir()
	gomod := "module example.com/readme\n\ngo 1.26.0\n\nrequire github.com/walcast/walcast v0.0.0\n\nreplace github.com/walcast/walcast => " + root + "\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"main.go": []byte(prog), "go.mod": []byte(gomod), "go.sum": sum} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("go run: %v\n%s", err, out.String())
	}
	if got := strings.TrimSpace(out.String()); got != "100000 records, error: <nil>" {
		t.Fatalf("the program printed %q", got)
	}
}
