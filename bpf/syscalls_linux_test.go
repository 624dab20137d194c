package bpf

import (
	"errors"
	"runtime"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"
	"golang.org/x/sys/unix"
)

// TestSyscallCounter counts this thread's calls of getppid(2): at least
// the ones made, and not wildly more (the runtime may add a few on this
// thread); another thread's calls are not counted.
func TestSyscallCounter(t *testing.T) {
	s := newTestCounter(t, 4)
	done := make(chan [2]uint64)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tid := unix.Gettid()
		if err := s.Watch(tid); err != nil {
			t.Error(err)
			close(done)
			return
		}
		before, _ := s.Count(tid)
		for range 1000 {
			unix.RawSyscall(unix.SYS_GETPPID, 0, 0, 0)
		}
		after, err := s.Count(tid)
		if err != nil {
			t.Error(err)
		}
		done <- [2]uint64{before, after}
	}()
	r, ok := <-done
	if !ok {
		return
	}
	if got := r[1] - r[0]; got < 1000 || got > 1100 {
		t.Fatalf("counted %d system calls for 1000 getppid calls", got)
	}
	if _, err := s.Count(unix.Gettid() + 1_000_000); err == nil {
		t.Fatal("an unwatched thread has a count")
	}
}

// TestSyscallCounterUnwatch: the counter holds maxThreads threads; one
// more is refused until one is unwatched (a bench that watches each short-
// lived loop thread in turn must unwatch it, or its later rows read n/a).
func TestSyscallCounterUnwatch(t *testing.T) {
	s := newTestCounter(t, 4)
	base := unix.Gettid() + 1_000_000 // ids no thread has: only the map is exercised
	for i := range 4 {
		if err := s.Watch(base + i); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Watch(base + 4); err == nil {
		t.Fatal("a fifth thread was watched in a counter for four")
	}
	for i := range 100 {
		if err := s.Unwatch(base + i%4); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Count(base + i%4); err == nil {
			t.Fatal("an unwatched thread still has a count")
		}
		if err := s.Watch(base + i%4); err != nil {
			t.Fatalf("watch after unwatch %d: %v", i, err)
		}
	}
}

// newTestCounter is a SyscallCounter for maxThreads threads, closed when
// the test ends; the test is skipped where the kernel lacks raw tracepoint
// programs.
func newTestCounter(t *testing.T, maxThreads int) *SyscallCounter {
	t.Helper()
	requireXDP(t)
	if err := features.HaveProgramType(ebpf.RawTracepoint); errors.Is(err, ebpf.ErrNotSupported) {
		t.Skipf("kernel lacks a feature: %v", err)
	}
	s, err := NewSyscallCounter(maxThreads)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
