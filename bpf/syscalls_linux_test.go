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
	requireXDP(t)
	if err := features.HaveProgramType(ebpf.RawTracepoint); errors.Is(err, ebpf.ErrNotSupported) {
		t.Skipf("kernel lacks a feature: %v", err)
	}
	s, err := NewSyscallCounter(4)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
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
