package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walcast/walcast/wal"
)

// makeWAL writes n 64-byte records to stream 3 under a fresh root and
// returns the root and the stream directory.
func makeWAL(t *testing.T, n int) (root, dir string) {
	t.Helper()
	return writeWAL(t, 3, wal.MinSegmentSize, n)
}

// writeWAL writes n 64-byte records to stream in segments of seg bytes
// under a fresh root, closes the writer, and returns the root and the
// stream directory.
func writeWAL(t *testing.T, stream uint32, seg int64, n int) (root, dir string) {
	t.Helper()
	c := wal.DefaultConfig(t.TempDir())
	c.Stream = stream
	c.SegmentSize = seg
	c.BlockOnBackpressure = true // a loaded machine's flush lags: wait, never lose a record
	w, err := wal.Open(c)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if _, err := w.Append(100, make([]byte, 64)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return c.Dir, wal.StreamDir(c.Dir, c.Stream)
}

func runWalCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	old := walOut
	walOut = &out
	defer func() { walOut = old }()
	code := run(append([]string{"wal"}, args...), &errb)
	return code, out.String(), errb.String()
}

func TestWalCommands(t *testing.T) {
	root, dir := makeWAL(t, 300)
	for _, d := range []string{root, dir} { // a root and a stream directory both work
		code, out, errs := runWalCmd(t, "verify", d)
		if code != 0 || !strings.Contains(out, "ok, 300 records, seqs 1…300") {
			t.Fatalf("verify %s: code %d out %q err %q", d, code, out, errs)
		}
	}
	code, out, _ := runWalCmd(t, "stat", dir)
	if code != 0 || !strings.Contains(out, "records 300") || !strings.Contains(out, "active") || !strings.Contains(out, "index ok") {
		t.Fatalf("stat: %d %q", code, out)
	}
	code, out, _ = runWalCmd(t, "dump", dir)
	if code != 0 || strings.Count(out, "\n") != 300 || !strings.HasPrefix(out, "seq 1 type 100 len 64 crc ok") {
		t.Fatalf("dump: %d %q…", code, out[:min(200, len(out))])
	}
	code, out, _ = runWalCmd(t, "dump", "-json", dir)
	sc := bufio.NewScanner(strings.NewReader(out))
	var n int
	for sc.Scan() {
		var r dumpRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil || !r.CRCOK || r.Seq != uint64(n+1) || r.Len != 64 {
			t.Fatalf("json line %d: %q (%v)", n, sc.Text(), err)
		}
		n++
	}
	if code != 0 || n != 300 {
		t.Fatalf("dump -json: code %d, %d lines", code, n)
	}

	// Corrupt one payload byte of record 150 (80-byte frames): verify exits 1
	// and names the file and offset; dump marks the CRC.
	files, _ := wal.ListSegments(dir, 3)
	var target wal.SegmentFile
	for _, sf := range files {
		if !sf.Active && sf.First <= 150 && 150 <= sf.Last {
			target = sf
		}
	}
	off := int64(150-target.First) * 80
	f, err := os.OpenFile(target.Path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{0xff}, off+40)
	f.Close()
	code, out, errs := runWalCmd(t, "verify", dir)
	want := filepath.Base(target.Path)
	if code != 1 || !strings.Contains(errs, want) || !strings.Contains(errs, "offset "+itoa(off)) || !strings.Contains(errs, "CRC") {
		t.Fatalf("verify corrupt: code %d out %q err %q (want %s offset %d)", code, out, errs, want, off)
	}
	_, out, _ = runWalCmd(t, "dump", dir)
	if !strings.Contains(out, "seq 150 type 100 len 64 crc BAD") || !strings.Contains(out, "seq 151 type 100") {
		t.Fatalf("dump does not show the bad CRC and go on")
	}
	if code, _, _ := runWalCmd(t, "verify", t.TempDir()); code == 0 {
		t.Fatal("verify of an empty directory succeeded")
	}
	if code, _, _ := runWalCmd(t, "nope"); code != 2 {
		t.Fatal("unknown subcommand")
	}
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestBenchWALSmoke runs the workload at a tiny size: it must complete and
// produce every row (figures are not checked: no timing in tests).
func TestBenchWALSmoke(t *testing.T) {
	old := os.Stdout
	r, w, _ := os.Pipe()
	os.Stdout = w
	err := benchWAL([]string{"-dir", t.TempDir(), "-sizes", "100,200", "-reads", "10", "-batches", "5", "-flushes", "3", "-records", "3000"})
	w.Close()
	os.Stdout = old
	var out bytes.Buffer
	out.ReadFrom(r)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, row := range []string{"append", "flush-100", "readat@100", "raw-pread-4k@200", "sustained-append", "replay-warm"} {
		if !strings.Contains(out.String(), row) {
			t.Errorf("row %s missing:\n%s", row, out.String())
		}
	}
}
