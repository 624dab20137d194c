package wal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/walcast/walcast/wire"
)

func activePath(c Config) string {
	return filepath.Join(StreamDir(c.Dir, c.Stream), ActiveName(c.Stream))
}

// TestTornTailIsCut: a bad last record the sidecar does not list (the
// writer died before it was durable) is a torn tail: cut, and the log
// continues. The same bytes on a record the sidecar lists (it was durable)
// are damage: Open refuses the log.
func TestTornTailIsCut(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tear    func(t *testing.T, path string, end int64)
		durable bool // the torn bytes hold a record the index lists
	}{
		{"garbage after the last record", func(t *testing.T, path string, end int64) {
			writeAt(t, path, end, []byte{1, 0, 100, 0, 0xff, 0x7f, 0, 0, 1, 2, 3, 4, 0, 0, 0, 0, 9, 9, 9})
		}, false},
		{"last record's CRC broken", func(t *testing.T, path string, end int64) {
			writeAt(t, path, end-1, []byte{0x5a})
		}, true},
		{"last record's version broken", func(t *testing.T, path string, end int64) {
			writeAt(t, path, lastFrameOff(t, path), []byte{7})
		}, true},
	} {
		for _, indexed := range []bool{false, true} {
			if indexed && !tc.durable {
				continue
			}
			t.Run(fmt.Sprintf("%s/indexed=%v", tc.name, indexed), func(t *testing.T) {
				c := testConfig(t)
				c.SegmentSize = 1 << 20
				w := openT(t, c)
				appendN(t, w, 100)
				if err := w.Flush(); err != nil {
					t.Fatal(err)
				}
				end := w.actEnd
				w.Close()
				tc.tear(t, activePath(c), end)
				ipath := idxName(activePath(c))
				if tc.durable && !indexed {
					// The writer died after writing the record, before
					// indexing it.
					fi, err := os.Stat(ipath)
					if err != nil {
						t.Fatal(err)
					}
					if err := os.Truncate(ipath, fi.Size()-idxEntrySize); err != nil {
						t.Fatal(err)
					}
				}
				if indexed {
					_, err := Open(c)
					var de *DamageError
					if !errors.As(err, &de) || de.Seq != 100 || de.File != activePath(c) {
						t.Fatalf("Open of a log whose indexed last record is damaged: %v", err)
					}
					return
				}
				w2 := openT(t, c)
				rec := w2.Stats().Recovery
				if rec.TornAt < 0 {
					t.Fatalf("no torn tail found: %+v", rec)
				}
				last := w2.NextSeq() - 1
				// A cut durable record (the index lost its entry too) is
				// covered by a Skip: its seq may have been sent.
				if last != 100 && last != 99 && (last != 101 || rec.Skip == nil || rec.Skip.From != 100) {
					t.Fatalf("recovered up to %d, skip %+v", last, rec.Skip)
				}
				appendN(t, w2, 50)
				if err := w2.Flush(); err != nil {
					t.Fatal(err)
				}
				w2.Close()
				// Everything after the new last record is zero again and the
				// whole log reads back.
				w3 := openT(t, c)
				if r := w3.Stats().Recovery; r.TornAt >= 0 {
					t.Fatalf("torn again after repair: %+v", r)
				}
				w3.Close()
				verifyDir(t, c, last+50)
			})
		}
	}
}

func writeAt(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func lastFrameOff(t *testing.T, path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res := scanSegment(f, 0, 0)
	_ = res
	off, _ := idxEntryAt(res.entries, uint64(len(res.entries)/idxEntrySize-1))
	return int64(off)
}

func TestIndexMissingOrStaleIsRebuilt(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(t *testing.T, dir string)
	}{
		{"all sidecars deleted", func(t *testing.T, dir string) {
			m, _ := filepath.Glob(filepath.Join(dir, "*.idx"))
			for _, p := range m {
				os.Remove(p)
			}
		}},
		{"sidecars truncated", func(t *testing.T, dir string) {
			m, _ := filepath.Glob(filepath.Join(dir, "*.idx"))
			for _, p := range m {
				os.Truncate(p, 100)
			}
		}},
		{"sidecars overwritten with wrong offsets", func(t *testing.T, dir string) {
			m, _ := filepath.Glob(filepath.Join(dir, "*.idx"))
			for _, p := range m {
				writeAt(t, p, idxHeaderSize+8, []byte{3, 0, 0, 0, 40, 0, 0, 0})
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig(t)
			w := openT(t, c)
			appendN(t, w, 1500)
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			w.Close()
			tc.mod(t, StreamDir(c.Dir, c.Stream))
			w2 := openT(t, c)
			if w2.NextSeq() != 1501 {
				t.Fatalf("NextSeq %d", w2.NextSeq())
			}
			if w2.Stats().Recovery.IndexRebuilt == 0 {
				t.Fatalf("no index rebuilt: %+v", w2.Stats().Recovery)
			}
			buf := make([]byte, 1<<16)
			for seq := uint64(1); seq <= 1500; seq++ {
				n, err := w2.ReadAt(seq, buf)
				if err != nil {
					t.Fatalf("ReadAt(%d): %v", seq, err)
				}
				checkFrame(t, seq, buf[:n])
			}
			w2.Close()
			verifyDir(t, c, 1500)
		})
	}
}

func TestRotationBoundariesAreFindable(t *testing.T) {
	c := testConfig(t)
	c.SegmentSize = MinSegmentSize
	w := openT(t, c)
	buf := make([]byte, 1<<16)
	for batch := 0; batch < 60; batch++ {
		appendN(t, w, 1+batch%9)
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	last := w.NextSeq() - 1
	files, _ := ListSegments(StreamDir(c.Dir, c.Stream), c.Stream)
	if len(files) < 4 {
		t.Fatalf("only %d segments", len(files))
	}
	for _, sf := range files {
		if sf.Active {
			continue
		}
		for _, seq := range []uint64{sf.First, sf.Last, sf.Last + 1} {
			n, err := w.ReadAt(seq, buf)
			if err != nil {
				t.Fatalf("boundary seq %d of %s: %v", seq, filepath.Base(sf.Path), err)
			}
			checkFrame(t, seq, buf[:n])
		}
	}
	w.Close()
	verifyDir(t, c, last)
}

func TestRetentionPrunesOldSegments(t *testing.T) {
	c := testConfig(t)
	c.SegmentSize = MinSegmentSize
	c.Retention = time.Hour
	w := openT(t, c)
	appendN(t, w, 400)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	dir := StreamDir(c.Dir, c.Stream)
	files, _ := ListSegments(dir, c.Stream)
	old := time.Now().Add(-5 * time.Hour)
	var backdated []SegmentFile
	for _, sf := range files[:2] {
		os.Chtimes(sf.Path, old, old)
		backdated = append(backdated, sf)
	}
	appendN(t, w, 200) // rotates at least once more
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, sf := range backdated {
		if _, err := os.Stat(sf.Path); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s survived retention: %v", sf.Path, err)
		}
	}
	if _, err := os.Stat(activePath(c)); err != nil {
		t.Fatal("active segment deleted")
	}
	oldest, _ := w.Bounds()
	if oldest != backdated[1].Last+1 {
		t.Fatalf("oldest %d, want %d", oldest, backdated[1].Last+1)
	}
	if _, err := w.ReadAt(1, make([]byte, 1<<16)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("pruned seq: %v", err)
	}
	if _, err := OpenReader(c.Dir, c.Stream, 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("reader at a pruned seq: %v", err)
	}
	if w.Stats().Pruned != 2 {
		t.Fatalf("pruned %d", w.Stats().Pruned)
	}
}

// TestCorruptRecordInTheMiddle: a payload byte flipped in a sealed and in
// the active segment. The open writer's reads report each damaged record
// and serve the rest; a reopen refuses the log with an error naming file,
// offset and seq (the sealed damage only when the sealed segment is read:
// VerifySealed, or its sidecar gone); Repair (or Open with Repair)
// quarantines the two records, puts a Skip marker in each place and the
// log verifies and takes new records.
func TestCorruptRecordInTheMiddle(t *testing.T) {
	c := testConfig(t)
	c.SegmentSize = 32 << 10
	w := openT(t, c)
	appendN(t, w, 1000)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	dir := StreamDir(c.Dir, c.Stream)
	files, _ := ListSegments(dir, c.Stream)
	sealed := files[1]
	x := (sealed.First + sealed.Last) / 2
	y := w.act.first + w.act.count()/2 // in the active segment
	offOf := func(seq uint64) (string, int64) {
		w.mu.RLock()
		defer w.mu.RUnlock()
		s := w.findSeg(seq)
		o, _ := idxEntryAt(s.idx, seq-s.first)
		return s.path, int64(o)
	}
	px, ox := offOf(x)
	py, oy := offOf(y)
	writeAt(t, px, ox+wire.HeaderSize+9, []byte{0xa5}) // a payload byte: CRC mismatch
	writeAt(t, py, oy+wire.HeaderSize+9, []byte{0xa5})
	buf := make([]byte, 1<<17)
	for _, bad := range []uint64{x, y} {
		_, err := w.ReadAt(bad, buf)
		var fe *FrameError
		if !errors.As(err, &fe) || fe.Err != wire.ErrCRC {
			t.Fatalf("ReadAt(%d) of a damaged record: %v", bad, err)
		}
	}
	for seq := uint64(1); seq <= 1000; seq++ {
		if seq == x || seq == y {
			continue
		}
		n, err := w.ReadAt(seq, buf)
		if err != nil {
			t.Fatalf("ReadAt(%d): %v", seq, err)
		}
		checkFrame(t, seq, buf[:n])
	}
	// A range over the damage returns the good prefix, then the error.
	if k, _, err := w.ReadRange(x-3, 10, buf); err != nil || k != 3 {
		t.Fatalf("ReadRange up to the damage: %d frames, %v", k, err)
	}
	w.Close()

	refused := func(c Config, file string, off int64, seq uint64) {
		t.Helper()
		w, err := Open(c)
		if err == nil {
			w.Close()
			t.Fatal("Open extended a damaged log")
		}
		var de *DamageError
		if !errors.As(err, &de) || !errors.Is(err, ErrDamaged) || !errors.Is(err, wire.ErrCRC) || de.File != file || de.Off != off || de.Seq != seq {
			t.Fatalf("Open: %v; want damage at %s offset %d seq %d", err, file, off, seq)
		}
		for _, want := range []string{filepath.Base(file), fmt.Sprint(off), fmt.Sprint(seq)} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("Open's error %q does not name %s", err, want)
			}
		}
	}
	refused(c, py, oy, y) // the sealed segment's sidecar vouches for it
	cv := c
	cv.VerifySealed = true
	refused(cv, px, ox, x)
	rep, err := Verify(dir, c.Stream)
	if err != nil || len(rep.Damage) != 2 || rep.Last != 1000 {
		t.Fatalf("verify: %v, damage %+v, last %d", err, rep.Damage, rep.Last)
	}
	var de *DamageError
	if !errors.As(rep.Bad, &de) || de.File != px || de.Off != ox || de.Seq != x {
		t.Fatalf("verify: first problem %v; want %s offset %d", rep.Bad, px, ox)
	}

	cr := c
	cr.Repair = true
	w2 := openT(t, cr)
	r := w2.Stats().Recovery.Repaired
	if r == nil || len(r.Damage) != 2 || len(r.Markers) != 2 || r.Lost != 2 || r.Quarantine == "" {
		t.Fatalf("repair report: %+v", r)
	}
	if w2.NextSeq() != 1001 {
		t.Fatalf("after repair: NextSeq %d", w2.NextSeq())
	}
	for seq := uint64(1); seq <= 1000; seq++ {
		n, err := w2.ReadAt(seq, buf)
		if err != nil {
			t.Fatalf("after repair: ReadAt(%d): %v", seq, err)
		}
		if seq == x || seq == y {
			h, p, _, err := wire.DecodeFrame(buf[:n])
			sk, serr := wire.ParseSkip(p)
			if err != nil || h.Type != wire.TypeSkip || serr != nil || sk != (wire.Skip{Seq: seq, From: seq, Reason: wire.SkipRepair}) {
				t.Fatalf("after repair: seq %d is %v %+v %v", seq, h, sk, serr)
			}
			continue
		}
		checkFrame(t, seq, buf[:n])
	}
	appendN(t, w2, 10)
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err = Verify(dir, c.Stream)
	if err != nil || rep.Bad != nil || rep.Last != 1010 || len(rep.Skips) != 2 {
		t.Fatalf("verify after repair: %v %v last %d skips %+v", err, rep.Bad, rep.Last, rep.Skips)
	}
	// The quarantine keeps the originals, the damaged bytes and a report.
	for _, name := range []string{filepath.Base(px), filepath.Base(py), "report.json", "report.txt"} {
		if _, err := os.Stat(filepath.Join(r.Quarantine, name)); err != nil {
			t.Fatalf("quarantine: %v", err)
		}
	}
	side, _ := filepath.Glob(filepath.Join(r.Quarantine, "*.damaged-*"))
	if len(side) != 2 {
		t.Fatalf("side files %v", side)
	}
}

// TestReaderSurvivesAStaleSidecar: a sidecar whose entries point into the
// middle of frames makes the Reader scan the file instead of failing.
func TestReaderSurvivesAStaleSidecar(t *testing.T) {
	c := testConfig(t)
	c.SegmentSize = 1 << 20
	w := openT(t, c)
	appendN(t, w, 300)
	w.Close()
	ip := filepath.Join(StreamDir(c.Dir, c.Stream), idxName(ActiveName(c.Stream)))
	b, err := os.ReadFile(ip)
	if err != nil {
		t.Fatal(err)
	}
	for i := idxHeaderSize; i+idxEntrySize <= len(b); i += idxEntrySize {
		b[i] += 3 // every offset now lands inside a frame
	}
	if err := os.WriteFile(ip, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, from := range []uint64{1, 150, 300} {
		r, err := OpenReader(c.Dir, c.Stream, from)
		if err != nil {
			t.Fatal(err)
		}
		for seq := from; seq <= 300; seq++ {
			fr, err := r.Next()
			if err != nil {
				t.Fatalf("from %d at %d: %v", from, seq, err)
			}
			checkFrame(t, seq, fr)
		}
		r.Close()
	}
}
