//go:build !windows

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/walcast/walcast/internal/dirsnap"
	"github.com/walcast/walcast/internal/reflog"
	"github.com/walcast/walcast/wal"
)

// statDumpCounts runs `cast wal stat` and `cast wal dump -json` on dir
// and returns stat's record count and the number of records dump shows
// with a good CRC.
func statDumpCounts(t *testing.T, dir string) (stat, dump int) {
	t.Helper()
	code, out, errs := runWalCmd(t, "stat", dir)
	m := regexp.MustCompile(`records (\d+)  seqs`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("stat: %d %q %q", code, out, errs)
	}
	stat, _ = strconv.Atoi(m[1])
	code, out, errs = runWalCmd(t, "dump", "-json", dir)
	if code != 0 {
		t.Fatalf("dump: %d %q", code, errs)
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var r dumpRecord
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.CRCOK {
			dump++
		}
	}
	return stat, dump
}

// The reference's mislabelled rotation (each rotated segment named one
// flush batch further than it holds): verify says "mislabelled" and exits
// 4; stat and dump count the same 100 000 records; cast send refuses it
// without writing a byte; repair renames and keeps an undo record; then
// verify exits 0 and cast send continues at the next seq.
func TestCLIWalMislabelledReferenceLog(t *testing.T) {
	root := t.TempDir()
	if _, err := reflog.Write(root, 1, reflog.Options{}); err != nil {
		t.Fatal(err)
	}
	dir := wal.StreamDir(root, 1)
	before := dirsnap.Take(t, dir)
	code, out, errs := runWalCmd(t, "verify", root)
	if code != exitMislabelled || !strings.Contains(out, "stream 1: mislabelled: 100000 records, seqs 1…100000 in 8 segments, none damaged; 7 segment names") ||
		!strings.Contains(out, "mislabelled: 1_14001_27000.wal holds seqs 13001…26000") || !strings.Contains(errs, "mislabelled") || strings.Contains(out, "DAMAGE") {
		t.Fatalf("verify: exit %d\n%s\n%s", code, out, errs)
	}
	if s, d := statDumpCounts(t, dir); s != 100000 || d != 100000 {
		t.Fatalf("stat counts %d records, dump %d; want 100000 both", s, d)
	}
	_, out, _ = runWalCmd(t, "stat", dir)
	if !strings.Contains(out, "MISLABELLED: holds seqs 1…13000, truthful name 1_1_13000.wal") {
		t.Fatalf("stat: %q", out)
	}
	for _, args := range [][]string{{"verify", root}, {"stat", root}, {"dump", root}} {
		runWalCmd(t, args...)
	}
	if dirsnap.Take(t, dir) != before {
		t.Fatal("verify, stat or dump changed the log")
	}
	// Replay serves it by its records, before any repair.
	serveAndTail(t, root, `^100000 records, tip 100000$`)
	if dirsnap.Take(t, dir) != before {
		t.Fatal("cast replay serve changed the log")
	}
	to := sink(t)
	c := runCast(t, "send", "-to", to, "-wal", root, "-n", "10", "-path", "udp", "-linger", "0s")
	c.expect(1, "stderr", `mislabelled .*cast wal repair`)
	if s := dirsnap.Take(t, dir); s != before {
		t.Fatalf("a refused cast send -wal wrote into the log:\nbefore\n%s\nafter\n%s", before, s)
	}

	code, out, _ = runWalCmd(t, "repair", root)
	if code != 0 || !strings.Contains(out, "7 mislabelled segments renamed (no record moved or lost; undo: ") ||
		!strings.Contains(out, "renamed 1_1_14000.wal -> 1_1_13000.wal (holds seqs 1…13000)") || strings.Contains(out, "quarantine") {
		t.Fatalf("repair: %d %q", code, out)
	}
	code, out, _ = runWalCmd(t, "verify", root)
	if code != 0 || !strings.Contains(out, "ok, 100000 records, seqs 1…100000 in 8 segments") {
		t.Fatalf("verify after repair: %d %q", code, out)
	}
	c = runCast(t, "send", "-to", to, "-wal", root, "-n", "10", "-path", "udp", "-linger", "0s")
	c.expect(0, "stdout", `^wal .*: durable through seq 100010$`)
	if s, d := statDumpCounts(t, dir); s != 100010 || d != 100010 {
		t.Fatalf("after send: stat %d, dump %d", s, d)
	}
	serveAndTail(t, root, `^100010 records, tip 100010$`)

	// export: a copy a strict sequential reader reads to a clean end.
	out2 := t.TempDir()
	code, out, errs = runWalCmd(t, "export", root, out2)
	if code != 0 || !strings.Contains(out, "exported 100010 records, seqs 1…100010") {
		t.Fatalf("export: %d %q %q", code, out, errs)
	}
	if n, _, last, err := reflog.ReadAll(out2, 1); err != nil || n != 100010 || last != 100010 {
		t.Fatalf("strict reader of the export: %d records to %d, %v", n, last, err)
	}
	if code, _, errs := runWalCmd(t, "export", root, out2); code != 1 || !strings.Contains(errs, "already holds a log") {
		t.Fatalf("export over a copy: %d %q", code, errs)
	}
}

// stat and dump count the same good records on every kind of log: clean,
// with a bad CRC, with a broken header (no length to trust), truncated,
// repaired.
func TestCLIWalStatAgreesWithDump(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(files []wal.SegmentFile)
		want  int
	}{
		{"clean", func([]wal.SegmentFile) {}, 2000},
		{"bad CRC", func(files []wal.SegmentFile) {
			f, _ := os.OpenFile(files[1].Path, os.O_RDWR, 0)
			f.WriteAt([]byte{0xee}, 80*5+40)
			f.Close()
		}, 1999},
		{"broken header", func(files []wal.SegmentFile) {
			f, _ := os.OpenFile(files[1].Path, os.O_RDWR, 0)
			f.WriteAt([]byte{9, 9, 9, 9}, 80*5)
			f.Close()
		}, 1999},
		{"broken header, no index", func(files []wal.SegmentFile) {
			f, _ := os.OpenFile(files[2].Path, os.O_RDWR, 0)
			f.WriteAt([]byte{9, 9, 9, 9, 9, 9}, 80*7)
			f.Close()
			os.Remove(strings.TrimSuffix(files[2].Path, ".wal") + ".idx")
		}, 1999},
		{"truncated mid-record", func(files []wal.SegmentFile) {
			fi, _ := os.Stat(files[1].Path)
			os.Truncate(files[1].Path, fi.Size()-100)
		}, 1998},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, dir := walFixture(t, 2000)
			files, _ := wal.ListSegments(dir, 1)
			tc.spoil(files)
			if s, d := statDumpCounts(t, dir); s != tc.want || d != tc.want {
				t.Fatalf("stat %d, dump %d; want %d", s, d, tc.want)
			}
			if tc.want == 2000 {
				return
			}
			if code, out, _ := runWalCmd(t, "repair", dir); code != 0 {
				t.Fatalf("repair: %d %q", code, out)
			}
			if s, d := statDumpCounts(t, dir); s != d {
				t.Fatalf("after repair: stat %d, dump %d", s, d)
			}
		})
	}
}

// serveAndTail serves root with `cast replay serve` and reads stream 1 from
// seq 1 to the caught-up marker with `cast replay tail`; the tail's last
// line must match want.
func serveAndTail(t *testing.T, root, want string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	srv := startCast(t, "", "replay", "serve", "-wal", root, "-listen", addr, "-plaintext")
	srv.waitOutput(`serving streams \[1\]`, hangBudget)
	tail := runCast(t, "replay", "tail", "-endpoints", addr, "-stream", "1", "-from", "1", "-plaintext", "-caught-up")
	tail.expect(0, "stderr", want)
	srv.signal(syscall.SIGTERM)
	srv.wait(hangBudget)
}

// TestCLISendWalRepairMislabelled: `cast send -wal -wal-repair` over a
// mislabelled reference log renames its segments (the report on stderr,
// nothing quarantined) and continues at the next seq; the log then
// verifies.
func TestCLISendWalRepairMislabelled(t *testing.T) {
	root := t.TempDir()
	// Two batches never fit a segment: every sealed name claims one batch
	// more than its segment holds.
	names, err := reflog.Write(root, 1, reflog.Options{Records: 5000, SegmentSize: 80 * 1500, Batch: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if code, out, _ := runWalCmd(t, "verify", root); code != exitMislabelled {
		t.Fatalf("fixture: verify %d %q", code, out)
	}
	c := runCast(t, "send", "-to", sink(t), "-wal", root, "-wal-repair", "-n", "10", "-path", "udp", "-linger", "0s")
	c.expect(0, "stdout", `^wal .*: durable through seq 5010$`)
	if want := fmt.Sprintf("stream 1: %d mislabelled segments renamed (no record moved or lost; undo: ", len(names)); !strings.Contains(c.Stderr.String(), want) ||
		strings.Contains(c.Stderr.String(), "quarantine") {
		t.Fatalf("-wal-repair report, want %q:\n%s", want, c.Stderr.String())
	}
	if code, out, _ := runWalCmd(t, "verify", root); code != 0 || !strings.Contains(out, "ok, 5010 records, seqs 1…5010") {
		t.Fatalf("verify after -wal-repair: %d %q", code, out)
	}
}
