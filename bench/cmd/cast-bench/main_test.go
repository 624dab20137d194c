package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	if os.Getenv("CAST_BENCH_CHILD") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Ctrl-C ends the suite after the running workload: the report of what
// was measured is written, the README block is not touched, exit 130.
func TestInterruptWritesPartialReport(t *testing.T) {
	dir := t.TempDir()
	readme := filepath.Join(dir, "README.md")
	const doc = "x\n<!-- bench:begin -->\nold\n<!-- bench:end -->\n"
	if err := os.WriteFile(readme, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	cmd := exec.Command(os.Args[0], "-quick", "-out", out, "-readme", readme, "oneway", "rtt", "throughput")
	cmd.Env = append(os.Environ(), "CAST_BENCH_CHILD=1")
	var stdout, stderr syncBuf
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	deadline := time.Now().Add(5 * time.Minute)
	for !strings.Contains(stderr.String(), "== oneway") {
		if time.Now().After(deadline) {
			t.Fatalf("no workload started:\n%s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		t.Fatalf("hung after Ctrl-C:\n%s", stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Fatalf("exit %d, want 130\nstderr:\n%s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "cast-bench: interrupted: rtt, throughput not run") {
		t.Fatalf("last line %q", last)
	}
	if b, _ := os.ReadFile(readme); string(b) != doc {
		t.Fatalf("README touched by a partial run:\n%s", b)
	}
	if b, err := os.ReadFile(filepath.Join(out, "report.md")); err != nil || !strings.Contains(string(b), "interrupted: not run: rtt, throughput") {
		t.Fatalf("report.md: %v\n%s", err, b)
	}
}
