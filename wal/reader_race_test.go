package wal

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// readAll reads from r until io.EOF, checking that the records are
// from, from+1, … in order, and returns the next seq it wants.
func readAll(t *testing.T, r *Reader, from uint64) uint64 {
	t.Helper()
	seq := from
	for {
		fr, err := r.Next()
		if err == io.EOF {
			return seq
		}
		if err != nil {
			t.Fatalf("at %d: %v", seq, err)
		}
		checkFrame(t, seq, fr)
		seq++
	}
}

// openRacing opens a reader of c's stream at from with hook run once
// between its directory listing and its open of the file picked.
func openRacing(t *testing.T, c Config, from uint64, hook func()) *Reader {
	t.Helper()
	fired := false
	testHookListed = func() {
		if !fired {
			fired = true
			hook()
		}
	}
	t.Cleanup(func() { testHookListed = nil })
	r, err := OpenReader(c.Dir, c.Stream, from)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if !fired {
		t.Fatal("the hook did not run")
	}
	return r
}

// The writer seals the active segment and starts the next one between the
// reader's directory listing and its open of "the active file": the file
// opened starts after the seq the reader wants. The reader lists again and
// reads the sealed segment first instead of reporting a missing one.
func TestReaderActiveRotatedAfterListing(t *testing.T) {
	c := testConfig(t)
	w := openT(t, c)
	appendN(t, w, 10)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	r := openRacing(t, c, 5, func() {
		appendN(t, w, 2000) // several 64 KiB segments
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	})
	if got := readAll(t, r, 5); got != 2011 {
		t.Fatalf("read through %d, want 2010", got-1)
	}
}

// The same race where the new active file is still empty when opened (the
// writer renamed it into place and wrote nothing yet): the reader cannot
// tell it from the segment it listed until its first record lands, and
// then must go back for the sealed one instead of calling the record
// damage ("unexpected seq" at offset 0: the flake of TestReaderSeeksAndTails).
func TestReaderEmptyActiveRotatedAfterListing(t *testing.T) {
	c := testConfig(t)
	w := openT(t, c)
	appendN(t, w, 10)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	dir := StreamDir(c.Dir, c.Stream)
	act := filepath.Join(dir, ActiveName(c.Stream))
	r := openRacing(t, c, 5, func() {
		// What rotate does: truncate the active file to its records and
		// seal it, then put an empty active file in its place.
		f, err := os.OpenFile(act, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		res := scanSegment(f, 0, 1)
		if res.last != 10 || res.bad != nil {
			t.Fatalf("active file holds through %d (%v), want 10", res.last, res.bad)
		}
		if err := f.Truncate(res.end); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if err := os.Rename(act, filepath.Join(dir, SealedName(c.Stream, 1, 10))); err != nil {
			t.Fatal(err)
		}
		os.Remove(filepath.Join(dir, idxName(ActiveName(c.Stream))))
		if err := os.WriteFile(act, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	})
	if r.f == nil || !r.unverified {
		t.Fatal("the reader did not open the empty active file")
	}
	w2 := openT(t, c) // continues at 11 in the active file
	if got := w2.NextSeq(); got != 11 {
		t.Fatalf("reopened writer continues at %d, want 11", got)
	}
	appendN(t, w2, 20)
	if err := w2.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, r, 5); got != 31 {
		t.Fatalf("read through %d, want 30", got-1)
	}
}
