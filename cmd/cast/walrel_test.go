//go:build !windows

package main

// The CLI side of the WAL's damage handling, each as a real process: a damaged
// WAL is refused by `cast send` with the place named and is left as it
// was; `cast wal stat|verify|repair` find, show and take out the damage;
// `cast wal verify` of an unreadable directory says so; `cast replay
// serve` serves the good streams next to a damaged one; a full disk is
// reported by `cast send` while it runs, and a restart on it fails at once.

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walcast/walcast/wal"

	"github.com/walcast/walcast/internal/childproc"
	"github.com/walcast/walcast/internal/dirsnap"
)

// walFixture writes n 64-byte records of stream 1 in 32 KiB segments and
// closes the writer.
func walFixture(t *testing.T, n int) (root, dir string) {
	t.Helper()
	return writeWAL(t, 1, 32<<10, n)
}

// a UDP socket that takes whatever is sent to it (no ICMP refusals).
func sink(t *testing.T) string {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc.LocalAddr().String()
}

func TestCLISendRefusesDamagedWAL(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(files []wal.SegmentFile) string // returns a regexp the last line must match
	}{
		{"mid-segment corruption", func(files []wal.SegmentFile) string {
			sf := files[1]
			f, _ := os.OpenFile(sf.Path, os.O_RDWR, 0)
			f.WriteAt([]byte{0xee}, 80*5+40) // seq First+5 (80-byte frames)
			f.Close()
			return regexp.QuoteMeta(filepath.Base(sf.Path)) + ` offset 400, seq \d+: unreadable record: .*CRC`
		}},
		{"zero-length sealed segment", func(files []wal.SegmentFile) string {
			sf := files[2]
			os.Truncate(sf.Path, 0)
			return regexp.QuoteMeta(filepath.Base(sf.Path)) + ` offset 0, seqs \d+…\d+: the file ends after 0 bytes`
		}},
		{"missing middle segment", func(files []wal.SegmentFile) string {
			os.Remove(files[2].Path)
			return `no segment, seqs \d+…\d+: no segment holds these seqs`
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, dir := walFixture(t, 2000)
			files, _ := wal.ListSegments(dir, 1)
			if len(files) < 5 {
				t.Fatalf("fixture: %d segments", len(files))
			}
			want := tc.damage(files)
			before := dirsnap.Take(t, dir, ".lock")
			to := sink(t)
			c := runCast(t, "send", "-to", to, "-wal", root, "-n", "10", "-path", "udp", "-linger", "0s")
			c.expect(1, "stderr", `^cast send: wal: damaged log: `+want)
			if dirsnap.Take(t, dir, ".lock") != before {
				t.Fatal("cast send changed a damaged log it refused")
			}
			code, out, _ := runWalCmd(t, "stat", dir)
			if code != 0 || !strings.Contains(out, "DAMAGED") || !strings.Contains(out, "seqs 1…2000") {
				t.Fatalf("stat of the damaged log (the tip is 2000, past the damage): %d %q", code, out)
			}
			c = runCast(t, "send", "-to", to, "-wal", root, "-wal-repair", "-n", "10", "-path", "udp", "-linger", "0s")
			c.expect(0, "stdout", `^wal .*: durable through seq 2010$`)
			if !strings.Contains(c.Stderr.String(), "lost:") {
				t.Fatalf("-wal-repair printed no report:\n%s", c.Stderr.String())
			}
			if code, out, _ := runWalCmd(t, "verify", dir); code != 0 || !strings.Contains(out, "Skip markers") {
				t.Fatalf("verify after -wal-repair: %d %q", code, out)
			}
		})
	}
}

// `cast wal stat` does not take the damage point for the tip; verify lists
// every damaged place; repair writes the report and verify passes.
func TestCLIWalRepair(t *testing.T) {
	root, dir := walFixture(t, 1000)
	files, _ := wal.ListSegments(dir, 1)
	act := files[len(files)-1]
	f, _ := os.OpenFile(act.Path, os.O_RDWR, 0)
	f.WriteAt([]byte{0xee}, 80*3+40) // a record in the middle of the active segment
	f.Close()
	code, out, _ := runWalCmd(t, "stat", root)
	if code != 0 || !strings.Contains(out, "seqs 1…1000") || !strings.Contains(out, "DAMAGED in 1 places") || !strings.Contains(out, "DAMAGE: 1_active.wal offset 240") {
		t.Fatalf("stat: %d %q", code, out)
	}
	code, out, errs := runWalCmd(t, "verify", root)
	if code != 1 || !strings.Contains(errs, "1_active.wal offset 240") {
		t.Fatalf("verify: %d %q %q", code, out, errs)
	}
	code, out, _ = runWalCmd(t, "repair", root)
	if code != 0 || !strings.Contains(out, "1 seqs lost") || !strings.Contains(out, "quarantine") {
		t.Fatalf("repair: %d %q", code, out)
	}
	code, out, _ = runWalCmd(t, "verify", root)
	if code != 0 || !strings.Contains(out, "ok, 1000 records, seqs 1…1000") || !strings.Contains(out, "skip: seqs") {
		t.Fatalf("verify after repair: %d %q", code, out)
	}
}

// `cast wal verify` of a directory it cannot read says why, instead of
// "no WAL segments" (run as an unprivileged user: root reads anything).
func TestCLIWalVerifyUnreadable(t *testing.T) {
	root, dir := walFixture(t, 10)
	if err := os.Chmod(dir, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	os.Chmod(root, 0o755)
	os.Chmod(filepath.Dir(root), 0o755)
	bin := os.Args[0]
	if os.Geteuid() == 0 {
		// The test binary's own directory is private: copy it where the
		// unprivileged user may run it.
		bd := t.TempDir()
		os.Chmod(bd, 0o755)
		os.Chmod(filepath.Dir(bd), 0o755)
		b, err := os.ReadFile(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		bin = filepath.Join(bd, "cast.test")
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c := exec.Command(bin, "wal", "verify", root)
	c.Env = append(os.Environ(), childEnv+"=1")
	if os.Geteuid() == 0 {
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	out, err := c.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 || !strings.Contains(childproc.LastLine(string(out)), "permission denied") {
		t.Fatalf("verify of an unreadable stream directory: %v\n%s", err, out)
	}
}

// `cast replay serve` serves the other streams when one is damaged.
func TestCLIReplayServeWithADamagedStream(t *testing.T) {
	root := t.TempDir()
	for _, sid := range []uint32{1, 2} {
		c := wal.DefaultConfig(root)
		c.Stream = sid
		c.SegmentSize = 32 << 10
		c.BlockOnBackpressure = true // a loaded machine's flush lags: wait, never lose a record
		w, err := wal.Open(c)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 1500; i++ {
			if _, err := w.Append(100, make([]byte, 64)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	files, _ := wal.ListSegments(wal.StreamDir(root, 2), 2)
	os.Remove(files[len(files)-2].Path) // the last sealed segment: the tail reader meets the gap
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	srv := startCast(t, "", "replay", "serve", "-wal", root, "-listen", addr, "-plaintext")
	srv.waitOutput(`serving streams \[1 2\]`, hangBudget)
	if !strings.Contains(srv.Stderr.String(), "stream 2 is damaged") {
		t.Fatalf("serve did not say stream 2 is damaged:\n%s", srv.Stderr.String())
	}
	tail := runCast(t, "replay", "tail", "-endpoints", addr, "-stream", "1", "-from", "1", "-plaintext", "-caught-up")
	tail.expect(0, "stderr", `^1500 records, tip 1500$`)
	tail = runCast(t, "replay", "tail", "-endpoints", addr, "-stream", "2", "-from", "1", "-plaintext", "-caught-up")
	tail.expect(1, "stderr", `damaged`)
	srv.signal(syscall.SIGTERM)
	srv.wait(hangBudget)
}

// A full disk: `cast send -wal` says so while it runs (not only at exit),
// exits 1 naming it, and a restart while the disk is still full fails at
// once with the reason.
func TestCLISendFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounts a 512 KiB tmpfs: needs root")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	to := sink(t)
	c := startCast(t, "", "send", "-to", to, "-wal", mnt, "-wal-segment", "65536", "-n", "100000000", "-rate", "200000", "-path", "udp", "-linger", "0s")
	c.waitOutput(`cast send: WAL: .*no space left on device: sending paused`, hangBudget)
	c.signal(syscall.SIGINT)
	c.wait(hangBudget)
	c.expect(1, "stderr", `^cast send: WAL: .*no space left on device \(records appended after seq \d+ are not durable\)$`)
	start := time.Now()
	c = runCast(t, "send", "-to", to, "-wal", mnt, "-wal-segment", "65536", "-n", "10", "-path", "udp", "-linger", "0s")
	c.expect(1, "stderr", `no space left on device`)
	t.Logf("restart on the full disk failed after %v: %s", time.Since(start).Round(time.Millisecond), childproc.LastLine(c.Stderr.String()))
}
