// Package childproc runs a test binary again as a child process — the
// command under test, dispatched from TestMain by an environment variable
// — and watches it: output buffers the test may read while the child
// writes, waits bounded by a budget (a hang fails the test instead of
// blocking the run), output matching, signals. Tests only.
package childproc

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// Buffer is a bytes.Buffer that the exec package's copier and the test
// may use at once.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Child is one running child process.
type Child struct {
	T              testing.TB
	Args           []string
	Cmd            *exec.Cmd
	Stdout, Stderr Buffer
	done           chan struct{}
	code           int
}

// Start runs the test binary (os.Args[0]) with args, env added to the
// environment (the variable TestMain dispatches on), in dir (empty: a
// temporary directory). The child is killed when the test ends, and by
// the kernel if the test process dies first (Linux).
func Start(t testing.TB, env, dir string, args ...string) *Child {
	t.Helper()
	return StartWrapped(t, env, dir, nil, args...)
}

// StartWrapped is Start under a wrapper command: `wrap... test-binary
// args...` (e.g. wrap = ip netns exec NS).
func StartWrapped(t testing.TB, env, dir string, wrap []string, args ...string) *Child {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	c := &Child{T: t, Args: args, done: make(chan struct{})}
	argv := append(append(append([]string(nil), wrap...), os.Args[0]), args...)
	c.Cmd = exec.Command(argv[0], argv[1:]...)
	c.Cmd.Dir = dir
	c.Cmd.Env = append(os.Environ(), env)
	c.Cmd.Stdout, c.Cmd.Stderr = &c.Stdout, &c.Stderr
	dieWithParent(c.Cmd)
	if err := c.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		c.Cmd.Wait()
		c.code = c.Cmd.ProcessState.ExitCode()
		close(c.done)
	}()
	t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			c.Cmd.Process.Kill()
			<-c.done
		}
	})
	return c
}

func (c *Child) name() string { return strings.Join(c.Args, " ") }

// Dump is the child's output, for failure messages.
func (c *Child) Dump() string {
	return "stdout:\n" + c.Stdout.String() + "\nstderr:\n" + c.Stderr.String()
}

// Wait returns the exit status (-1: killed by a signal), failing the
// test if the child still runs after budget (it is killed then).
func (c *Child) Wait(budget time.Duration) int {
	c.T.Helper()
	select {
	case <-c.done:
		return c.code
	case <-time.After(budget):
		c.Cmd.Process.Kill()
		<-c.done
		c.T.Fatalf("%s hung (> %v)\n%s", c.name(), budget, c.Dump())
		return -1
	}
}

// Done is closed when the child has exited.
func (c *Child) Done() <-chan struct{} { return c.done }

// Code is the exit status once the child has exited.
func (c *Child) Code() int { return c.code }

// WaitOutput waits until stderr or stdout matches re and returns the last
// submatch (or the match); it fails the test if the child exits first or
// budget passes.
func (c *Child) WaitOutput(re string, budget time.Duration) string {
	c.T.Helper()
	rx := regexp.MustCompile(re)
	end := time.Now().Add(budget)
	for time.Now().Before(end) {
		for _, s := range []string{c.Stderr.String(), c.Stdout.String()} {
			if m := rx.FindStringSubmatch(s); m != nil {
				return m[len(m)-1]
			}
		}
		select {
		case <-c.done:
			c.T.Fatalf("%s exited %d before printing %q\n%s", c.name(), c.code, re, c.Dump())
		case <-time.After(20 * time.Millisecond):
		}
	}
	c.T.Fatalf("%s: no %q within %v\n%s", c.name(), re, budget, c.Dump())
	return ""
}

// Signal sends sig to the child. A child that has already ended is left
// as it is (on a loaded machine it may finish before the test stops it):
// its exit status tells what happened.
func (c *Child) Signal(sig os.Signal) {
	c.T.Helper()
	if err := c.Cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		c.T.Fatal(err)
	}
}

// LastLine is s's last non-empty line.
func LastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
