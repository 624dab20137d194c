package openmetrics

import (
	"bytes"
	"io"
	"testing"

	"github.com/walcast/walcast/counters"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

func snapPath(t testing.TB, dir string) string {
	s, _, err := counters.List(dir)
	if err != nil || len(s) != 1 {
		t.Fatalf("List: %v, %d files", err, len(s))
	}
	return s[0].Path
}
