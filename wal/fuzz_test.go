package wal

import (
	"os"
	"path/filepath"
	"testing"
)

// seedSegment returns the bytes of a small valid active segment.
func seedSegment(f *testing.F) []byte {
	c := DefaultConfig(f.TempDir())
	c.SegmentSize = MinSegmentSize
	w, err := Open(c)
	if err != nil {
		f.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		w.Append(100, make([]byte, 8+i*5))
	}
	w.Close()
	b, err := os.ReadFile(filepath.Join(StreamDir(c.Dir, 0), ActiveName(0)))
	if err != nil {
		f.Fatal(err)
	}
	return b[:2000]
}

// FuzzScanSegment feeds arbitrary file contents to the segment scanners
// and Verify: they must never panic, and every record they accept must
// decode.
func FuzzScanSegment(f *testing.F) {
	f.Add(seedSegment(f))
	f.Add([]byte{1, 0, 100, 0, 255, 255, 0, 0, 1, 2, 3, 4})
	f.Add(make([]byte, 40))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "0_1_5.wal")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		ScanSegment(path, func(r ScannedRecord) bool {
			if r.CRCOK {
				if _, _, _, err := DecodeFrame(r.Frame); err != nil {
					t.Fatalf("accepted a frame that does not decode: %v", err)
				}
			}
			return true
		})
		fh, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer fh.Close()
		a := analyzeSegment(fh, path, int64(len(data)), 0, nil, 0)
		for _, r := range a.runs {
			for i := uint64(0); i < uint64(len(r.entries)/idxEntrySize); i++ {
				off, l := idxEntryAt(r.entries, i)
				if int64(off)+int64(l) > int64(len(data)) {
					t.Fatalf("entry %d beyond the data", i)
				}
			}
		}
		Verify(dir, 0)
	})
}

// FuzzRecoverActive opens a Writer on an arbitrary active segment: Open
// must not panic; when it succeeds the recovered log verifies and takes
// new records.
func FuzzRecoverActive(f *testing.F) {
	f.Add(seedSegment(f))
	f.Add([]byte{1, 0, 100, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		c := DefaultConfig(t.TempDir())
		c.SegmentSize = MinSegmentSize
		sd := StreamDir(c.Dir, 0)
		os.MkdirAll(sd, 0o755)
		if err := os.WriteFile(filepath.Join(sd, ActiveName(0)), data, 0o644); err != nil {
			t.Fatal(err)
		}
		w, err := Open(c)
		if err != nil {
			return
		}
		if _, err := w.Append(100, make([]byte, 16)); err != nil {
			t.Fatalf("append after recovery: %v", err)
		}
		if err := w.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		rep, err := Verify(sd, 0)
		if err != nil {
			t.Fatal(err)
		}
		// Damaged records in the middle are kept (and reported); anything
		// else must verify.
		if rep.Bad != nil {
			t.Fatalf("recovered log does not verify: %v", rep.Bad)
		}
	})
}
