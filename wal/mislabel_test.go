package wal

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/walcast/walcast/internal/dirsnap"
	"github.com/walcast/walcast/internal/reflog"
	"github.com/walcast/walcast/wire"
)

// refConfig is the config of the reference-style fixture's stream 1 under
// root.
func refConfig(root string) Config {
	c := DefaultConfig(root)
	c.Stream = 1
	c.SegmentSize = 1 << 20
	c.BlockOnBackpressure = true
	return c
}

// refLog writes the reference-style fixture: 100 000 records of 64 bytes
// in 1 MiB segments, each rotated segment named one flush batch (1000
// records) further than it holds.
func refLog(t *testing.T) (Config, string) {
	t.Helper()
	root := t.TempDir()
	names, err := reflog.Write(root, 1, reflog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"1_1_14000.wal", "1_14001_27000.wal", "1_27001_40000.wal", "1_40001_53000.wal", "1_53001_66000.wal", "1_66001_79000.wal", "1_79001_92000.wal"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("fixture names %v, want %v", names, want)
	}
	return refConfig(root), StreamDir(root, 1)
}

// readEvery reads the stream from seq 1 to io.EOF and checks that seqs run
// 1, 2, … without a gap; it returns the count.
func readEvery(t *testing.T, root string, stream uint32) uint64 {
	t.Helper()
	r, err := OpenReader(root, stream, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var n uint64
	for {
		fr, err := r.Next()
		if err == io.EOF {
			return n
		}
		if err != nil {
			t.Fatalf("after %d records: %v", n, err)
		}
		if s := wire.Seq(fr[wire.HeaderSize:]); s != n+1 {
			t.Fatalf("record %d has seq %d", n+1, s)
		}
		n++
	}
}

// TestMislabelledReferenceLog: a rotated reference log whose segment names
// each count one flush batch more than the segment holds is recognised as
// mislabelled, not damaged; Open refuses it without writing anything;
// Repair renames the segments (nothing quarantined, an undo record kept);
// then it verifies, opens at the next seq and every record reads back by
// ReadAt and by a Reader.
func TestMislabelledReferenceLog(t *testing.T) {
	c, dir := refLog(t)
	before := dirsnap.Take(t, dir)

	rep, err := Verify(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(rep.Bad, ErrMislabelled) || len(rep.Damage) != 0 || len(rep.Mislabelled) != 7 {
		t.Fatalf("verify: bad %v, %d damaged, %d mislabelled", rep.Bad, len(rep.Damage), len(rep.Mislabelled))
	}
	if rep.Records != 100000 || rep.First != 1 || rep.Last != 100000 {
		t.Fatalf("verify counts %d records, seqs %d…%d; want 100000, 1…100000", rep.Records, rep.First, rep.Last)
	}
	if m := rep.Mislabelled[1]; filepath.Base(m.File) != "1_14001_27000.wal" || m.First != 13001 || m.Last != 26000 || m.Truthful != "1_13001_26000.wal" {
		t.Fatalf("second mislabel: %+v", m)
	}
	if rep.Segments[0].Truthful != "1_1_13000.wal" || rep.Segments[0].Records != 13000 {
		t.Fatalf("first segment report: %+v", rep.Segments[0])
	}

	// Open refuses with the mislabel (not damage) and writes nothing.
	if _, err := Open(c); !errors.Is(err, ErrMislabelled) || errors.Is(err, ErrDamaged) {
		t.Fatalf("Open: %v, want ErrMislabelled", err)
	}
	if s := dirsnap.Take(t, dir); s != before {
		t.Fatalf("a refused Open changed the directory:\nbefore\n%s\nafter\n%s", before, s)
	}
	// A Reader goes by the records, not the names: all of them, in order.
	if n := readEvery(t, c.Dir, 1); n != 100000 {
		t.Fatalf("reader of the mislabelled log read %d records", n)
	}

	rr, err := Repair(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(rr.Renamed) != 7 || rr.Quarantine != "" || rr.Lost != 0 || len(rr.Damage) != 0 || rr.Relabel == "" {
		t.Fatalf("repair: %+v", rr)
	}
	for _, f := range []string{"undo.json", "undo.sh", "report.txt", "plan.json", "done"} {
		if _, err := os.Stat(filepath.Join(rr.Relabel, f)); err != nil {
			t.Errorf("undo record: %v", err)
		}
	}
	files, _ := ListSegments(dir, 1)
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f.Path))
	}
	want := "1_1_13000.wal 1_13001_26000.wal 1_26001_39000.wal 1_39001_52000.wal 1_52001_65000.wal 1_65001_78000.wal 1_78001_91000.wal 1_active.wal"
	if strings.Join(names, " ") != want {
		t.Fatalf("after repair: %v", names)
	}
	if rep, err := Verify(dir, 1); err != nil || rep.Bad != nil || rep.Records != 100000 || len(rep.Mislabelled) != 0 {
		t.Fatalf("verify after repair: %v %v, %d records", err, rep.Bad, rep.Records)
	}
	if rr, err := Repair(dir, 1); err != nil || len(rr.Renamed) != 0 || rr.Quarantine != "" {
		t.Fatalf("second repair: %+v %v", rr, err)
	}

	w, err := Open(c)
	if err != nil {
		t.Fatal(err)
	}
	if w.NextSeq() != 100001 || w.Stats().Recovery.Skip != nil {
		t.Fatalf("NextSeq %d, skip %v", w.NextSeq(), w.Stats().Recovery.Skip)
	}
	for i := 0; i < 100; i++ {
		if _, err := w.Append(100, make([]byte, 64)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for seq := uint64(1); seq <= 100100; seq++ {
		n, err := w.ReadAt(seq, buf)
		if err != nil || n != 80 || wire.Seq(buf[wire.HeaderSize:]) != seq {
			t.Fatalf("ReadAt(%d): %d bytes, %v", seq, n, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n := readEvery(t, c.Dir, 1); n != 100100 {
		t.Fatalf("reader after repair read %d records", n)
	}
}

// TestMislabelIsNotDamageInDisguise: a segment truncated at a record
// boundary holds whole records too, but the seqs its name claims are held
// by no segment: that stays damage, not a wrong name.
func TestMislabelIsNotDamageInDisguise(t *testing.T) {
	c, files := damagedLog(t)
	sf := files[1]
	if err := os.Truncate(sf.Path, frameOff(t, sf.Path, sf.Last-2)); err != nil {
		t.Fatal(err)
	}
	os.Remove(idxName(sf.Path))
	rep, err := Verify(StreamDir(c.Dir, c.Stream), c.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Mislabelled) != 0 || !errors.Is(rep.Bad, ErrDamaged) {
		t.Fatalf("truncated segment: mislabelled %v, bad %v", rep.Mislabelled, rep.Bad)
	}
	if _, err := Open(c); !errors.Is(err, ErrDamaged) || errors.Is(err, ErrMislabelled) {
		t.Fatalf("Open: %v", err)
	}
}

// TestRefusalsWriteNothing: every way Open or Repair can refuse a log —
// mislabelled, damaged (with no lock or reservation file yet, as the
// reference leaves it; with an interrupted rotation's leftovers),
// overlapping names, locked by a writer — leaves the directory
// byte-identical (every name, size and hash, lock files included), and
// so do Verify, ListSegments and a Repair that finds nothing to do.
func TestRefusalsWriteNothing(t *testing.T) {
	check := func(t *testing.T, dir, what string, f func()) {
		t.Helper()
		before := dirsnap.Take(t, dir)
		f()
		if s := dirsnap.Take(t, dir); s != before {
			t.Fatalf("%s changed the directory:\nbefore\n%s\nafter\n%s", what, before, s)
		}
	}
	inspect := func(t *testing.T, dir string, stream uint32) {
		check(t, dir, "Verify", func() { Verify(dir, stream) })
		check(t, dir, "ListSegments+ScanSegment", func() {
			files, _ := ListSegments(dir, stream)
			for _, f := range files {
				ScanSegment(f.Path, func(ScannedRecord) bool { return true })
			}
		})
	}
	t.Run("mislabelled reference log", func(t *testing.T) {
		c, dir := refLog(t)
		check(t, dir, "Open", func() {
			if _, err := Open(c); !errors.Is(err, ErrMislabelled) {
				t.Fatalf("Open: %v", err)
			}
		})
		inspect(t, dir, 1)
	})
	t.Run("damaged reference log with leftovers", func(t *testing.T) {
		root := t.TempDir()
		// A batch that fills a segment exactly: every rotation is
		// post-write, so the names are true.
		if _, err := reflog.Write(root, 1, reflog.Options{Records: 5000, SegmentSize: 80 * 1000, Batch: 1000}); err != nil {
			t.Fatal(err)
		}
		dir := StreamDir(root, 1)
		files, _ := ListSegments(dir, 1)
		writeAt(t, files[1].Path, 80*3+40, []byte{0xee})
		for _, n := range []string{"1_next.tmp", "1_probe.tmp"} {
			os.WriteFile(filepath.Join(dir, n), []byte("left by a crash"), 0o644)
		}
		check(t, dir, "Open", func() {
			if _, err := Open(refConfig(root)); !errors.Is(err, ErrDamaged) {
				t.Fatalf("Open: %v", err)
			}
		})
		inspect(t, dir, 1)
	})
	t.Run("overlapping names", func(t *testing.T) {
		c, files := damagedLog(t)
		dir := StreamDir(c.Dir, c.Stream)
		// A copy of a segment under a name one seq later: its records
		// repeat seqs the segment before holds (a real overlap, not a
		// wrong name).
		sf := files[1]
		b, _ := os.ReadFile(sf.Path)
		os.WriteFile(filepath.Join(dir, SealedName(c.Stream, sf.First+1, sf.Last+1)), b, 0o644)
		check(t, dir, "Open", func() {
			if _, err := Open(c); err == nil {
				t.Fatal("Open accepted overlapping segments")
			}
		})
		check(t, dir, "Repair", func() {
			if _, err := Repair(dir, c.Stream); err == nil {
				t.Fatal("Repair accepted overlapping segments")
			}
		})
		inspect(t, dir, c.Stream)
	})
	t.Run("a clean reference log, nothing to repair", func(t *testing.T) {
		root := t.TempDir()
		// One batch per segment's worth: every rotation is post-write, so
		// the names are true.
		if _, err := reflog.Write(root, 1, reflog.Options{Records: 3000, SegmentSize: 80 * 1000, Batch: 1000}); err != nil {
			t.Fatal(err)
		}
		dir := StreamDir(root, 1)
		check(t, dir, "Repair", func() {
			if rr, err := Repair(dir, 1); err != nil || len(rr.Renamed) != 0 || rr.Quarantine != "" {
				t.Fatalf("Repair: %+v %v", rr, err)
			}
		})
		inspect(t, dir, 1)
		if rep, _ := Verify(dir, 1); rep.Bad != nil || rep.Records != 3000 {
			t.Fatalf("verify: %v, %d records", rep.Bad, rep.Records)
		}
	})
	t.Run("locked by a writer", func(t *testing.T) {
		c := testConfig(t)
		w := openT(t, c)
		appendN(t, w, 10)
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		dir := StreamDir(c.Dir, c.Stream)
		// Flush returns once the records are durable; the writer's I/O
		// goroutine writes the active index sidecar just after (commit
		// wakes waiters first). Wait for the writer's own last write, so
		// the snapshots compare only what the refused calls did.
		sidecar := filepath.Join(dir, idxName(ActiveName(c.Stream)))
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
			if fi, err := os.Stat(sidecar); err == nil && fi.Size() == idxHeaderSize+10*idxEntrySize {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the writer's index sidecar never held its 10 entries")
			}
		}
		check(t, dir, "a second Open", func() {
			if _, err := Open(c); !errors.Is(err, ErrLocked) {
				t.Fatalf("second Open: %v", err)
			}
		})
		check(t, dir, "Repair", func() {
			if _, err := Repair(dir, c.Stream); !errors.Is(err, ErrLocked) {
				t.Fatalf("Repair: %v", err)
			}
		})
	})
	t.Run("a root that does not exist yet", func(t *testing.T) {
		parent := t.TempDir()
		c := refConfig(filepath.Join(parent, "a", "b"))
		c.SegmentSize = 1 // refused by Validate
		check(t, parent, "Open", func() { Open(c) })
	})
}

// TestOpenRepairRenamesMislabelled: Config.Repair (what `cast send
// -wal-repair` sets) opens a mislabelled reference log by renaming its
// segments, as Repair does: nothing quarantined, nothing lost, the
// renames in the recovery report; the writer continues at the next seq
// and every record reads back by ReadAt.
func TestOpenRepairRenamesMislabelled(t *testing.T) {
	root := t.TempDir()
	// Two batches never fit a segment: every rotation is pre-write, so
	// every sealed name claims one batch more than its segment holds.
	names, err := reflog.Write(root, 1, reflog.Options{Records: 5000, SegmentSize: 80 * 1500, Batch: 1000})
	if err != nil {
		t.Fatal(err)
	}
	dir := StreamDir(root, 1)
	if rep, err := Verify(dir, 1); err != nil || !errors.Is(rep.Bad, ErrMislabelled) || len(rep.Mislabelled) != len(names) || len(names) == 0 {
		t.Fatalf("fixture: %v %v, %d mislabelled of %v", err, rep.Bad, len(rep.Mislabelled), names)
	}
	c := refConfig(root)
	c.Repair = true
	w, err := Open(c)
	if err != nil {
		t.Fatal(err)
	}
	rr := w.Stats().Recovery.Repaired
	if rr == nil || len(rr.Renamed) != len(names) || rr.Quarantine != "" || rr.Lost != 0 || len(rr.Damage) != 0 || rr.Relabel == "" {
		t.Fatalf("recovery report: %+v", rr)
	}
	if w.NextSeq() != 5001 {
		t.Fatalf("NextSeq %d, want 5001", w.NextSeq())
	}
	appendN(t, w, 10)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for seq := uint64(1); seq <= 5010; seq++ {
		if n, err := w.ReadAt(seq, buf); err != nil || wire.Seq(buf[wire.HeaderSize:n]) != seq {
			t.Fatalf("ReadAt(%d): %d bytes, %v", seq, n, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if rep, err := Verify(dir, 1); err != nil || rep.Bad != nil || rep.Records != 5010 || len(rep.Mislabelled) != 0 {
		t.Fatalf("verify after: %v %v, %d records", err, rep.Bad, rep.Records)
	}
}
