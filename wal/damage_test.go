package wal

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/walcast/walcast/internal/dirsnap"
	"github.com/walcast/walcast/wire"
)

// damagedLog writes 1000 records in 32 KiB segments and closes the
// writer; it returns the config and the sealed segments.
func damagedLog(t *testing.T) (Config, []SegmentFile) {
	t.Helper()
	c := testConfig(t)
	c.SegmentSize = 32 << 10
	w := openT(t, c)
	appendN(t, w, 1000)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	files, err := ListSegments(StreamDir(c.Dir, c.Stream), c.Stream)
	if err != nil || len(files) < 5 {
		t.Fatalf("segments %v %v", files, err)
	}
	return c, files
}

// TestDamageRefusedNamedAndRepaired: each kind of damage (a torn or
// flipped record, a missing segment, a bad index): Open refuses to extend the log with an error naming the
// segment, offset and seq, and changes nothing on disk; Verify lists it
// and sees past it; Repair takes it out (Skip markers for the lost seqs,
// originals in the quarantine) and the log verifies, reads back and takes
// new records.
func TestDamageRefusedNamedAndRepaired(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, files []SegmentFile) (file string, off int64, seq uint64)
		verify bool     // seen only with VerifySealed (the sealed sidecar vouches otherwise)
		lost   []uint64 // seqs the repair cannot keep
	}{
		{"byte flipped in a sealed segment", func(t *testing.T, files []SegmentFile) (string, int64, uint64) {
			sf := files[1]
			seq := sf.First + 3
			off := frameOff(t, sf.Path, seq)
			writeAt(t, sf.Path, off+wire.HeaderSize+20, []byte{0x5a})
			return sf.Path, off, seq
		}, true, []uint64{0}},
		{"byte flipped mid-active segment", func(t *testing.T, files []SegmentFile) (string, int64, uint64) {
			sf := files[len(files)-1]
			first := firstSeq(t, sf.Path)
			seq := first + 5
			off := frameOff(t, sf.Path, seq)
			writeAt(t, sf.Path, off+wire.HeaderSize+20, []byte{0x5a})
			return sf.Path, off, seq
		}, false, []uint64{0}},
		{"zero-length sealed segment", func(t *testing.T, files []SegmentFile) (string, int64, uint64) {
			sf := files[2]
			if err := os.Truncate(sf.Path, 0); err != nil {
				t.Fatal(err)
			}
			return sf.Path, 0, sf.First
		}, false, []uint64{0}},
		{"missing middle segment", func(t *testing.T, files []SegmentFile) (string, int64, uint64) {
			sf := files[2]
			os.Remove(sf.Path)
			os.Remove(idxName(sf.Path))
			return "", -1, sf.First
		}, false, []uint64{0}},
		{"truncated sealed segment", func(t *testing.T, files []SegmentFile) (string, int64, uint64) {
			sf := files[1]
			off := frameOff(t, sf.Path, sf.Last-2)
			if err := os.Truncate(sf.Path, off+10); err != nil {
				t.Fatal(err)
			}
			return sf.Path, off, sf.Last - 2
		}, false, []uint64{0}},
		{"header of a sealed record broken", func(t *testing.T, files []SegmentFile) (string, int64, uint64) {
			sf := files[1]
			seq := sf.First + 7
			off := frameOff(t, sf.Path, seq)
			writeAt(t, sf.Path, off, []byte{9, 9, 9, 9}) // version and type: no length to trust
			os.Remove(idxName(sf.Path))                  // nor an index: a byte scan finds the next record
			return sf.Path, off, seq
		}, false, []uint64{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, files := damagedLog(t)
			dir := StreamDir(c.Dir, c.Stream)
			wantFile, wantOff, wantSeq := tc.damage(t, files)
			before := dirsnap.Take(t, dir, ".lock")
			cv := c
			cv.VerifySealed = tc.verify
			_, err := Open(cv)
			var de *DamageError
			if !errors.As(err, &de) || !errors.Is(err, ErrDamaged) {
				t.Fatalf("Open of a damaged log: %v", err)
			}
			if de.File != wantFile || (wantOff >= 0 && de.Off != wantOff) || de.Seq != wantSeq {
				t.Fatalf("Open: %v; want file %q offset %d seq %d", err, wantFile, wantOff, wantSeq)
			}
			if wantFile != "" && !strings.Contains(err.Error(), filepath.Base(wantFile)) {
				t.Fatalf("error %q does not name the segment", err)
			}
			if dirsnap.Take(t, dir, ".lock") != before {
				t.Fatal("a refused Open changed the log")
			}
			rep, err := Verify(dir, c.Stream)
			if err != nil || len(rep.Damage) == 0 || rep.Bad == nil || rep.Last != 1000 {
				t.Fatalf("verify: %v, damage %+v, last %d (want 1000: damage must not hide the tip)", err, rep.Damage, rep.Last)
			}
			rr, err := Repair(dir, c.Stream)
			if err != nil || rr.Quarantine == "" || len(rr.Markers) == 0 || rr.Lost == 0 {
				t.Fatalf("repair: %v %+v", err, rr)
			}
			if text, err := os.ReadFile(filepath.Join(rr.Quarantine, "report.txt")); err != nil || !strings.Contains(string(text), "lost:") {
				t.Fatalf("report: %v %q", err, text)
			}
			rep, err = Verify(dir, c.Stream)
			if err != nil || rep.Bad != nil || rep.Last != 1000 {
				t.Fatalf("verify after repair: %v %v last %d", err, rep.Bad, rep.Last)
			}
			w := openT(t, c)
			if w.NextSeq() != 1001 {
				t.Fatalf("after repair NextSeq %d", w.NextSeq())
			}
			appendN(t, w, 20)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			// Every seq reads back: the record, or a marker standing for it.
			r, err := OpenReader(c.Dir, c.Stream, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			var lost uint64
			for seq := uint64(1); seq <= 1020; {
				fr, err := r.Next()
				if err != nil {
					t.Fatalf("read at %d: %v", seq, err)
				}
				next := checkRecord(t, seq, fr)
				if h, _ := wire.ParseHeader(fr); h.Type == wire.TypeSkip {
					lost += next - seq
				}
				seq = next
			}
			if _, err := r.Next(); err != io.EOF {
				t.Fatalf("after 1020: %v", err)
			}
			if lost != rr.Lost {
				t.Fatalf("markers stand for %d seqs, the report says %d", lost, rr.Lost)
			}
			if again, err := Repair(dir, c.Stream); err != nil || again.Quarantine != "" {
				t.Fatalf("a second repair: %v %+v", err, again)
			}
		})
	}
}

func frameOff(t *testing.T, path string, seq uint64) int64 {
	t.Helper()
	var off int64 = -1
	ScanSegment(path, func(r ScannedRecord) bool {
		if r.Seq == seq {
			off = r.Off
			return false
		}
		return true
	})
	if off < 0 {
		t.Fatalf("seq %d not in %s", seq, path)
	}
	return off
}

func firstSeq(t *testing.T, path string) uint64 {
	t.Helper()
	var first uint64
	ScanSegment(path, func(r ScannedRecord) bool { first = r.Seq; return false })
	return first
}

// TestDirectoryTidiness: an index left without its
// segment (a kill during pruning) is removed by Open and reported; *.wal
// files that are not this stream's segments are reported by Open and by
// Verify; pruning removes the index before the segment.
func TestDirectoryTidiness(t *testing.T) {
	c, files := damagedLog(t)
	dir := StreamDir(c.Dir, c.Stream)
	orphan := filepath.Join(dir, idxName(SealedName(c.Stream, 1, 1)))
	os.WriteFile(orphan, []byte("WALIDX01"), 0o644)
	for _, n := range []string{"7_foo.wal", "8_1_5.wal", "7_1.wal"} {
		os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o644)
	}
	rep, err := Verify(dir, c.Stream)
	if err != nil || len(rep.Unknown) != 3 || len(rep.OrphanIndexes) != 1 || rep.Bad == nil {
		t.Fatalf("verify: %v unknown %v orphans %v bad %v", err, rep.Unknown, rep.OrphanIndexes, rep.Bad)
	}
	w := openT(t, c)
	rec := w.Stats().Recovery
	if len(rec.Unknown) != 3 || !slices.Equal(rec.OrphanIndexes, []string{orphan}) {
		t.Fatalf("recovery: unknown %v orphans %v", rec.Unknown, rec.OrphanIndexes)
	}
	if _, err := os.Stat(orphan); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("orphan index still there: %v", err)
	}
	w.Close()
	// Retention removes index and segment, leaving no orphan.
	old := files[0]
	longAgo := time.Now().Add(-24 * time.Hour)
	for _, p := range []string{old.Path, idxName(old.Path)} {
		os.Chtimes(p, longAgo, longAgo)
	}
	c.Retention = time.Hour
	w = openT(t, c)
	appendN(t, w, 400) // rotations prune
	w.Close()
	if _, err := os.Stat(idxName(old.Path)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("pruned segment's index: %v", err)
	}
	if _, orphans := tidyDir(dir, c.Stream, false); len(orphans) != 0 {
		t.Fatalf("orphans after pruning: %v", orphans)
	}
}

// TestReaderStopsAtDamage: a Reader following a log hands
// over every record before a damaged one and then reports the damage with
// its seq — in a sealed segment and in the active one, where a bad frame
// the writer has indexed is damage, not a record still being written.
func TestReaderStopsAtDamage(t *testing.T) {
	c := testConfig(t)
	c.SegmentSize = 32 << 10
	w := openT(t, c)
	appendN(t, w, 600)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	files, _ := ListSegments(StreamDir(c.Dir, c.Stream), c.Stream)
	act := files[len(files)-1]
	seq := firstSeq(t, act.Path) + 4
	writeAt(t, act.Path, frameOff(t, act.Path, seq)+wire.HeaderSize+9, []byte{0xa5})
	r, err := OpenReader(c.Dir, c.Stream, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for s := uint64(1); s < seq; s++ {
		fr, err := r.Next()
		if err != nil {
			t.Fatalf("Next at %d: %v", s, err)
		}
		checkFrame(t, s, fr)
	}
	_, err = r.Next()
	var de *DamageError
	if !errors.As(err, &de) || de.Seq != seq || de.File != act.Path || !errors.Is(err, wire.ErrCRC) {
		t.Fatalf("at the damaged record: %v; want damage at seq %d in %s", err, seq, act.Path)
	}
}
