package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/walcast/walcast/counters"
	"github.com/walcast/walcast/internal/childproc"
)

// TestCLIStatNobody: a user who can only read the files (nobody, the
// files root's, mode 0644) lists the live and the stale process, and
// -clean says, once, that it may not remove the stale file.
func TestCLIStatNobody(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running cast stat as nobody needs root (CAP_SETUID, CAP_SETGID)")
	}
	base, err := os.MkdirTemp("", "walcast-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil { // os.TempDir itself is world-searchable
		t.Fatal(err)
	}
	dir := filepath.Join(base, "counters")
	f, err := counters.Acquire(counters.Config{Dir: dir})
	if err != nil || f.Err() != nil {
		t.Fatal(err, f.Err())
	}
	defer f.Release()
	c, _ := f.Counter(counters.KindCounter, `records_sent{stream="1",role="producer"}`)
	c.Store(42)
	f.Flush()
	b, err := os.ReadFile(f.Path())
	if err != nil {
		t.Fatal(err)
	}
	stalePID := fmt.Sprint(1 << 30) // above pid_max: no process has it
	putPID(b, 1<<30)
	stale := filepath.Join(dir, stalePID+counters.Suffix)
	if err := os.WriteFile(stale, b, 0o644); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(base, "cast.test") // the test binary, where nobody may run it
	if err := copyFile(os.Args[0], exe, 0o755); err != nil {
		t.Fatal(err)
	}
	nobody := func(args ...string) (code int, stdout, stderr string) {
		cmd := exec.Command(exe, args...)
		cmd.Dir = base
		cmd.Env = append(os.Environ(), childEnv+"=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		if err != nil && cmd.ProcessState == nil {
			t.Fatalf("run as nobody: %v", err)
		}
		return cmd.ProcessState.ExitCode(), o.String(), e.String()
	}
	code, out, errOut := nobody("stat", "-dir", dir)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("pid %d  live", os.Getpid())) || !strings.Contains(out, "pid "+stalePID+"  stale") ||
		!regexp.MustCompile(`(?m)^  1      producer  records_sent +42$`).MatchString(out) {
		t.Fatalf("stat as nobody: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = nobody("stat", "-clean", "-dir", dir)
	want := "cast stat: remove " + stale + ": permission denied"
	if code != exitFailed || childproc.LastLine(errOut) != want || strings.Count(errOut, "remove") != 1 {
		t.Fatalf("stat -clean as nobody: exit %d, stderr %q, want last line %q\n%s", code, errOut, want, out)
	}
	if _, err := os.Stat(stale); err != nil {
		t.Fatalf("the stale file went: %v", err)
	}
}

// putPID writes pid into a counters file's header (offset 16, u64 LE).
func putPID(b []byte, pid uint64) {
	for i := 0; i < 8; i++ {
		b[16+i] = byte(pid >> (8 * i))
	}
}

func copyFile(from, to string, mode os.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
