package main

import (
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestMain runs the test binary as burn itself when BURN_CHILD is set, so
// the tests below can start it as a separate process.
func TestMain(m *testing.M) {
	if os.Getenv("BURN_CHILD") != "" {
		os.Args = append([]string{"burn"}, strings.Fields(os.Getenv("BURN_CHILD"))...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// syncBuilder is a strings.Builder the exec package's copier may write
// to while the test reads it.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func start(t *testing.T, args string) (*exec.Cmd, *syncBuilder) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "BURN_CHILD="+args)
	stderr := &syncBuilder{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, stderr
}

// TestBurnStops: burn ends by itself after -for, and at once on SIGTERM,
// saying why; it is never left running.
func TestBurnStops(t *testing.T) {
	t.Run("after -for", func(t *testing.T) {
		cmd, stderr := start(t, "-n 1 -for 300ms")
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%v: %s", err, stderr)
		}
		if !strings.Contains(stderr.String(), "-for elapsed") {
			t.Fatalf("stderr %q", stderr)
		}
	})
	t.Run("on SIGTERM", func(t *testing.T) {
		cmd, stderr := start(t, "-n 1 -for 1h")
		// Signal once burn has said it started (its handler is set by then).
		for !strings.Contains(stderr.String(), "started") {
			time.Sleep(10 * time.Millisecond)
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%v: %s", err, stderr)
		}
		if !strings.Contains(stderr.String(), "terminated") {
			t.Fatalf("stderr %q", stderr)
		}
	})
}
