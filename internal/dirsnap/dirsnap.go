// Package dirsnap lists a directory tree for tests that must show an
// operation left it as it was (a refused open, a read-only command): two
// equal listings mean no file or directory was created, removed or
// changed.
package dirsnap

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Take lists every directory and file under dir, one a line, each file
// with its size and SHA-256. Files whose names end in one of skip (".lock":
// a lock file comes and goes with any opener) are left out. A directory
// it cannot walk or a file it cannot read fails t.
func Take(t testing.TB, dir string, skip ...string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			fmt.Fprintf(&b, "%s/\n", rel)
			return nil
		}
		for _, s := range skip {
			if strings.HasSuffix(p, s) {
				return nil
			}
		}
		c, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %d %x\n", rel, len(c), sha256.Sum256(c))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
