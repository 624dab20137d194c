package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestUsageAndUnknown(t *testing.T) {
	var buf bytes.Buffer
	if code := run([]string{"-h"}, &buf); code != 0 || !strings.Contains(buf.String(), "version") {
		t.Fatalf("-h: code %d, out %q", code, buf.String())
	}
	buf.Reset()
	if code := run([]string{"nope"}, &buf); code != 2 || !strings.Contains(buf.String(), `unknown command "nope"`) {
		t.Fatalf("unknown: code %d, out %q", code, buf.String())
	}
	buf.Reset()
	if code := run(nil, &buf); code != 2 {
		t.Fatalf("no args: code %d", code)
	}
	// Every command's -h exits 0 (flag.ErrHelp).
	for name := range commands {
		if code := run([]string{name, "-h"}, &buf); code != 0 {
			t.Errorf("cast %s -h exited %d", name, code)
		}
	}
}
