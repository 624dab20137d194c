package wal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/walcast/walcast/internal/dirsnap"
	"github.com/walcast/walcast/internal/reflog"
	"github.com/walcast/walcast/wire"
)

// TestExportReadsCleanly: walcast's active segment is preallocated, so a
// strict sequential reader (the reference's) stops at its zeros with a
// malformed header; the copy Export writes has no zero tail and reads
// to a clean end, record for record, and the log exported is unchanged.
func TestExportReadsCleanly(t *testing.T) {
	c, dir := refLog(t)
	if _, err := Repair(dir, 1); err != nil {
		t.Fatal(err)
	}
	w, err := Open(c)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		if _, err := w.Append(100, bytes.Repeat([]byte{0xab}, 64)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n, _, _, err := reflog.ReadAll(c.Dir, 1); !errors.Is(err, reflog.ErrMalformed) || n != 100100 {
		t.Fatalf("strict reader of the live directory: %d records, %v (want all, then the zero tail as malformed)", n, err)
	}
	before := dirsnap.Take(t, dir)
	out := t.TempDir()
	rep, err := Export(dir, 1, out)
	if err != nil {
		t.Fatal(err)
	}
	if s := dirsnap.Take(t, dir); s != before {
		t.Fatal("Export changed the log it copied")
	}
	if rep.Records != 100100 || rep.First != 1 || rep.Last != 100100 || len(rep.Files) != 8 {
		t.Fatalf("export: %+v", rep)
	}
	n, first, last, err := reflog.ReadAll(out, 1)
	if err != nil || n != 100100 || first != 1 || last != 100100 {
		t.Fatalf("strict reader of the copy: %d records %d…%d, %v", n, first, last, err)
	}
	ents, _ := os.ReadDir(StreamDir(out, 1))
	var total int64
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(StreamDir(out, 1), e.Name()))
		if filepath.Ext(e.Name()) != ".wal" {
			t.Errorf("the copy holds %s", e.Name())
		}
		if len(b) >= wire.HeaderSize && bytes.Equal(b[len(b)-wire.HeaderSize:], make([]byte, wire.HeaderSize)) {
			t.Errorf("%s ends in zeros", e.Name())
		}
		total += int64(len(b))
	}
	if total != 100100*80 || rep.Bytes != total {
		t.Fatalf("the copy holds %d bytes (report %d), want %d: exactly the frames", total, rep.Bytes, 100100*80)
	}
	if _, err := Export(dir, 1, out); err == nil {
		t.Fatal("Export over an existing copy")
	}
}

// TestExportMislabelledAndDamaged: a mislabelled log exports under
// truthful names without being renamed itself; a damaged one is refused.
func TestExportMislabelledAndDamaged(t *testing.T) {
	_, dir := refLog(t)
	before := dirsnap.Take(t, dir)
	out := t.TempDir()
	if _, err := Export(dir, 1, out); err != nil {
		t.Fatal(err)
	}
	if dirsnap.Take(t, dir) != before {
		t.Fatal("Export renamed the log it copied")
	}
	if rep, err := Verify(StreamDir(out, 1), 1); err != nil || rep.Bad != nil || rep.Records != 100000 {
		t.Fatalf("verify of the copy: %v %v", err, rep.Bad)
	}
	if _, err := os.Stat(filepath.Join(StreamDir(out, 1), "1_13001_26000.wal")); err != nil {
		t.Fatal(err)
	}
	if n, _, _, err := reflog.ReadAll(out, 1); err != nil || n != 100000 {
		t.Fatalf("strict reader of the copy: %d, %v", n, err)
	}

	dc, files := damagedLog(t)
	writeAt(t, files[1].Path, frameOff(t, files[1].Path, files[1].First+1)+wire.HeaderSize+9, []byte{0x77})
	if _, err := Export(StreamDir(dc.Dir, dc.Stream), dc.Stream, t.TempDir()); !errors.Is(err, ErrDamaged) {
		t.Fatalf("export of a damaged log: %v", err)
	}
}
