package wal

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/walcast/walcast/wal/internal/unix"
	"github.com/walcast/walcast/wire"
)

// The fuzz targets run the scanners in memory (a bytes.Reader is the
// segment) and recovery on tmpfs with syncs turned off: each exec costs
// microseconds, not a directory, a file, an fdatasync and a megabyte of
// buffers (docs/wal.md gives the executions per run).

// seedSegment returns the bytes of a small valid active segment.
func seedSegment(f *testing.F) []byte {
	c := fuzzConfig(f.TempDir())
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

// noSync is the syscall seam without durability: recovery's logic is the
// same, fdatasync is skipped and preallocation is sparse.
var noSync = func() *sysOps {
	s := defaultSys
	s.datasync = func(int) error { return nil }
	s.prealloc = func(fd int, size int64) error { return unix.Ftruncate(fd, size) }
	return &s
}()

// fuzzConfig is the smallest, fastest Writer configuration.
func fuzzConfig(dir string) Config {
	c := DefaultConfig(dir)
	c.SegmentSize = MinSegmentSize
	c.BufferSize = MinBufferSize
	c.DisableDirectIO = true
	c.SeqReserve = MinSeqReserve
	c.sys = noSync
	return c
}

// fuzzDir is a fresh directory on tmpfs when there is one.
func fuzzDir(t *testing.T) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "walcast-fuzz-")
		if err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

// FuzzScanSegment feeds arbitrary bytes to the segment scanners and to
// Verify's checks, as a sealed and as an active segment: they must never
// panic, every record they accept must decode, and every index entry or
// damaged stretch must lie inside the data.
func FuzzScanSegment(f *testing.F) {
	f.Add(seedSegment(f))
	f.Add([]byte{1, 0, 100, 0, 255, 255, 0, 0, 1, 2, 3, 4})
	f.Add(make([]byte, 40))
	var sk [wire.SkipFrameSize]byte
	wire.PutSkipFrame(sk[:], wire.Skip{Seq: 5, From: 1, Reason: wire.SkipRepair})
	f.Add(sk[:])
	f.Fuzz(func(t *testing.T, data []byte) {
		src := bytes.NewReader(data)
		size := int64(len(data))
		scanRecords(src, "0_1_5.wal", size, nil, 0, func(r ScannedRecord) bool {
			if r.CRCOK {
				if _, _, _, err := wire.DecodeFrame(r.Frame); err != nil {
					t.Fatalf("accepted a frame that does not decode: %v", err)
				}
			}
			return true
		})
		a := analyzeSegment(src, "0_1_5.wal", size, 0, nil, 0)
		for _, r := range a.runs {
			if r.end > size || r.off > r.end {
				t.Fatalf("run %+v beyond the data", r)
			}
			for i := uint64(0); i < uint64(len(r.entries)/idxEntrySize); i++ {
				off, l := idxEntryAt(r.entries, i)
				if int64(off)+int64(l) > size {
					t.Fatalf("entry %d beyond the data", i)
				}
			}
		}
		for _, b := range a.bad {
			if b.off >= b.end || b.end > size {
				t.Fatalf("damaged stretch %+v outside the data", b)
			}
		}
		verifySource(src, size, SegmentFile{Path: "0_1_5.wal", First: 1, Last: 5}, 0, sidecarState{})
		verifySource(src, size, SegmentFile{Path: "0_active.wal", Active: true}, 3, sidecarState{})
	})
}

// FuzzRecoverActive opens a Writer on an arbitrary active segment: Open
// must not panic; when it succeeds the recovered log verifies and takes
// new records; when it fails, it is with a DamageError or an I/O error,
// never by changing the file.
func FuzzRecoverActive(f *testing.F) {
	f.Add(seedSegment(f))
	f.Add([]byte{1, 0, 100, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		c := fuzzConfig(fuzzDir(t))
		sd := StreamDir(c.Dir, 0)
		os.MkdirAll(sd, 0o755)
		ap := filepath.Join(sd, ActiveName(0))
		if err := os.WriteFile(ap, data, 0o644); err != nil {
			t.Fatal(err)
		}
		w, err := Open(c)
		if err != nil {
			if b, _ := os.ReadFile(ap); !bytes.Equal(b, data) {
				t.Fatalf("Open failed (%v) and changed the file", err)
			}
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
		if rep.Bad != nil {
			t.Fatalf("recovered log does not verify: %v", rep.Bad)
		}
	})
}

// FuzzRepair puts arbitrary bytes where the middle one of three sealed
// segments should be (seqs 21…25 by its name): Repair must not panic, and
// what it leaves must verify and open, with seqs 1…40 each readable as its
// record or inside a Skip marker.
func FuzzRepair(f *testing.F) {
	var segs [3][]byte
	{
		c := fuzzConfig(f.TempDir())
		w, err := Open(c)
		if err != nil {
			f.Fatal(err)
		}
		for i := 0; i < 40; i++ {
			w.Append(100, make([]byte, 8+i))
		}
		w.Close()
		b, _ := os.ReadFile(filepath.Join(StreamDir(c.Dir, 0), ActiveName(0)))
		off := int64(0)
		for i, n := range []int{20, 5, 15} {
			start := off
			for k := 0; k < n; k++ {
				h, _ := wire.ParseHeader(b[off:])
				off += wire.HeaderSize + int64(h.Len)
			}
			segs[i] = b[start:off]
		}
	}
	f.Add(segs[1])
	f.Add([]byte{})
	f.Add(segs[1][:len(segs[1])/2])
	f.Add(append(append([]byte{}, segs[1]...), 1, 2, 3))
	f.Fuzz(func(t *testing.T, data []byte) {
		root := fuzzDir(t)
		sd := StreamDir(root, 0)
		os.MkdirAll(sd, 0o755)
		os.WriteFile(filepath.Join(sd, SealedName(0, 1, 20)), segs[0], 0o644)
		os.WriteFile(filepath.Join(sd, SealedName(0, 21, 25)), data, 0o644)
		os.WriteFile(filepath.Join(sd, SealedName(0, 26, 40)), segs[2], 0o644)
		if _, err := Repair(sd, 0); err != nil {
			t.Fatalf("repair: %v", err)
		}
		rep, err := Verify(sd, 0)
		if err != nil || rep.Bad != nil || rep.Last != 40 {
			t.Fatalf("after repair: %v %v last %d", err, rep.Bad, rep.Last)
		}
		c := fuzzConfig(root)
		w, err := Open(c)
		if err != nil {
			t.Fatalf("open after repair: %v", err)
		}
		defer w.Close()
		if w.NextSeq() != 41 {
			t.Fatalf("NextSeq %d", w.NextSeq())
		}
		r, err := OpenReader(root, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		for seq := uint64(1); seq <= 40; {
			fr, err := r.Next()
			if err != nil {
				t.Fatalf("read at %d: %v", seq, err)
			}
			h, p, _, _ := wire.DecodeFrame(fr)
			if h.Type == wire.TypeSkip {
				sk, err := wire.ParseSkip(p)
				if err != nil || sk.From > seq || sk.Seq < seq {
					t.Fatalf("at %d: Skip %+v %v", seq, sk, err)
				}
				seq = sk.Seq + 1
				continue
			}
			if wire.Seq(p) != seq {
				t.Fatalf("at %d: record %d", seq, wire.Seq(p))
			}
			seq++
		}
	})
}
