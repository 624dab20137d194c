package wal

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walcast/walcast/wal/internal/unix"
)

// withSys swaps the syscall seam for the writers opened inside the test.
func withSys(t *testing.T, mod func(*sysOps)) {
	old := defaultSys
	mod(&defaultSys)
	t.Cleanup(func() { defaultSys = old })
}

// TestIOIsAligned asserts our own alignment on every write and cold read:
// tmpfs on 6.18 accepts misaligned O_DIRECT, so the kernel cannot be
// trusted to catch a mistake.
func TestIOIsAligned(t *testing.T) {
	var bad atomic.Value
	var writes, reads atomic.Int64
	check := func(op string, p []byte, off int64) {
		if off%pageSize != 0 || len(p)%pageSize != 0 || !isAligned(p, pageSize) {
			bad.Store(fmt.Sprintf("%s of %d bytes at %d (buffer aligned: %v)", op, len(p), off, isAligned(p, pageSize)))
		}
	}
	withSys(t, func(s *sysOps) {
		pw, pr := s.pwrite, s.pread
		s.pwrite = func(fd int, p []byte, off int64) (int, error) {
			writes.Add(1)
			check("pwrite", p, off)
			return pw(fd, p, off)
		}
		s.pread = func(fd int, p []byte, off int64) (int, error) {
			reads.Add(1)
			check("pread", p, off)
			return pr(fd, p, off)
		}
	})
	c := testConfig(t)
	w := openT(t, c)
	st := w.Stats()
	t.Logf("direct=%v align=%d note=%q", st.Direct, st.Align, st.DirectNote)
	for i := 0; i < 30; i++ {
		appendN(t, w, 1+i*7)
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 1<<20)
	last := w.NextSeq() - 1
	for seq := uint64(1); seq <= last; seq += 3 {
		n, err := w.ReadAt(seq, buf)
		if err != nil {
			t.Fatal(err)
		}
		checkFrame(t, seq, buf[:n])
	}
	frames, _, err := w.ReadRange(1, int(last), buf)
	if err != nil || frames == 0 {
		t.Fatalf("ReadRange: %d frames, %v", frames, err)
	}
	if v := bad.Load(); v != nil {
		t.Fatalf("misaligned I/O: %v", v)
	}
	if writes.Load() == 0 || reads.Load() == 0 {
		t.Fatalf("seam not exercised: %d writes %d reads", writes.Load(), reads.Load())
	}
}

// TestFlushWritesOnlyWhenThereIsData: the active file exists right after
// Open, Append alone does not touch the disk, an empty Flush writes
// nothing, a Flush after an Append does.
func TestFlushWritesOnlyWhenThereIsData(t *testing.T) {
	var writes atomic.Int64
	withSys(t, func(s *sysOps) {
		pw := s.pwrite
		s.pwrite = func(fd int, p []byte, off int64) (int, error) {
			writes.Add(1)
			return pw(fd, p, off)
		}
	})
	c := testConfig(t)
	c.FlushInterval = time.Hour
	w := openT(t, c)
	if _, err := os.Stat(activePath(c)); err != nil {
		t.Fatalf("no active file after Open: %v", err)
	}
	if err := w.Flush(); err != nil || writes.Load() != 0 {
		t.Fatalf("empty flush: %v, %d writes", err, writes.Load())
	}
	if _, err := w.Append(100, make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	if writes.Load() != 0 {
		t.Fatal("Append wrote to disk")
	}
	if err := w.Flush(); err != nil || writes.Load() == 0 || w.Durable() != 1 {
		t.Fatalf("flush: %v, %d writes, durable %d", err, writes.Load(), w.Durable())
	}
	n := writes.Load()
	if err := w.Flush(); err != nil || writes.Load() != n {
		t.Fatalf("second empty flush wrote: %d → %d", n, writes.Load())
	}
}

// TestDirectIOFallback: a filesystem that refuses an O_DIRECT write
// (EINVAL) makes the writer reopen the segment buffered and say so in
// Stats; DisableDirectIO does the same from the start. Data is intact
// either way.
func TestDirectIOFallback(t *testing.T) {
	var refused atomic.Bool
	withSys(t, func(s *sysOps) {
		pw := s.pwrite
		s.pwrite = func(fd int, p []byte, off int64) (int, error) {
			if !refused.Load() {
				refused.Store(true)
				return 0, unix.EINVAL
			}
			return pw(fd, p, off)
		}
	})
	c := testConfig(t)
	w := openT(t, c)
	if !w.Stats().Direct {
		t.Skipf("O_DIRECT not available here: %s", w.Stats().DirectNote)
	}
	appendN(t, w, 100)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	if st.Direct || !strings.Contains(st.DirectNote, "refused") {
		t.Fatalf("after EINVAL: direct %v note %q", st.Direct, st.DirectNote)
	}
	appendN(t, w, 2000) // across rotations, buffered
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	verifyDir(t, c, 2100)

	c2 := testConfig(t)
	c2.DisableDirectIO = true
	w2 := openT(t, c2)
	if st := w2.Stats(); st.Direct || !strings.Contains(st.DirectNote, "disabled") {
		t.Fatalf("DisableDirectIO: %+v", st)
	}
	appendN(t, w2, 500)
	w2.Close()
	verifyDir(t, c2, 500)
}

// TestBlockingBackpressureOnSlowDisk: with fdatasync slower than
// MaxFlushLag, a blocking Append waits for flushes and always wakes up
// again (regression: a wake-up could be lost when the flush finished
// between the refusal and the wait).
func TestBlockingBackpressureOnSlowDisk(t *testing.T) {
	withSys(t, func(s *sysOps) {
		ds := s.datasync
		s.datasync = func(fd int) error {
			time.Sleep(5 * time.Millisecond)
			return ds(fd)
		}
	})
	c := testConfig(t)
	c.BlockOnBackpressure = true
	c.MaxFlushLag = time.Millisecond
	c.FlushInterval = time.Millisecond
	c.FlushRecords = 10
	w := openT(t, c)
	done := make(chan error, 1)
	go func() {
		p := make([]byte, 64)
		for i := 0; i < 30000; i++ {
			if _, err := w.Append(100, p); err != nil {
				done <- err
				return
			}
		}
		done <- w.Flush()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("blocking Append hung: durable %d, next %d, %+v", w.Durable(), w.NextSeq(), w.Stats())
	}
	if w.Durable() != 30000 || w.Stats().Backpressure == 0 {
		t.Fatalf("durable %d, backpressure %d", w.Durable(), w.Stats().Backpressure)
	}
}
