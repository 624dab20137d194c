package wal

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mountTmpfs mounts a tmpfs of the given size (mount -o size= syntax) on a
// fresh directory and unmounts it when the test ends.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("disk-full test mounts a tmpfs and needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fullDiskConfig is a writer on a fresh 512 KiB tmpfs that fills in a
// few hundred records.
func fullDiskConfig(t *testing.T, stream uint32) Config {
	c := DefaultConfig(mountTmpfs(t, "512k"))
	c.Stream = stream
	c.SegmentSize = 64 << 10
	c.BufferSize = MinBufferSize
	c.FlushInterval = time.Millisecond
	c.MaxFlushLag = 20 * time.Millisecond
	return c
}

func TestDiskFull(t *testing.T) {
	c := fullDiskConfig(t, 4)
	mnt := c.Dir
	w, err := Open(c)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	t.Logf("tmpfs: %+v", w.Stats().DirectNote)
	// Append until the writer reports the full disk through Append.
	deadline := time.Now().Add(20 * time.Second)
	var appendErr error
	for time.Now().Before(deadline) {
		seq := w.NextSeq()
		_, err := w.Append(100, payloadFor(seq, sizeFor(seq)))
		if err == nil {
			continue
		}
		if !errors.Is(err, ErrBackpressure) {
			t.Fatalf("Append: %v", err)
		}
		if errors.Is(err, syscall.ENOSPC) {
			appendErr = err
			break
		}
		time.Sleep(time.Millisecond)
	}
	if appendErr == nil {
		t.Fatal("Append never reported the full disk")
	}
	if err := w.Flush(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Flush on a full disk: %v", err)
	}
	// Err says so at once, for a loop's tick (heartbeats are withheld).
	if err := w.Err(); !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, ErrBackpressure) {
		t.Fatalf("Err on a full disk: %v", err)
	}
	published := w.NextSeq() - 1
	durable := w.Durable()
	if durable == 0 || durable >= published {
		t.Fatalf("durable %d, published %d", durable, published)
	}
	st := w.Stats()
	if !strings.Contains(st.LastError, "no space") || st.FlushErrors == 0 {
		t.Fatalf("stats: %+v", st)
	}
	// Nothing durable is damaged; buffered records are still readable.
	buf := make([]byte, 1<<17)
	for seq := uint64(1); seq <= published; seq++ {
		n, err := w.ReadAt(seq, buf)
		if err != nil {
			t.Fatalf("ReadAt(%d) on a full disk: %v", seq, err)
		}
		checkFrame(t, seq, buf[:n])
	}
	if rep, err := Verify(StreamDir(mnt, c.Stream), c.Stream); err != nil || rep.Bad != nil || rep.Last < durable {
		t.Fatalf("verify on a full disk: %v %v last %d", err, rep.Bad, rep.Last)
	}
	// Space returns: the writer catches up by itself.
	if out, err := exec.Command("mount", "-o", "remount,size=16m", mnt).CombinedOutput(); err != nil {
		t.Fatalf("remount: %v: %s", err, out)
	}
	if err := w.Flush(); err != nil {
		t.Fatalf("Flush after space returned: %v", err)
	}
	if w.Durable() != published {
		t.Fatalf("durable %d, want %d", w.Durable(), published)
	}
	appendN(t, w, 500)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	// Err clears with the next flush that succeeds: checked after one
	// that surely ran since the remount (an attempt started before it may
	// still fail after the first Flush returned, its records already
	// durable, e.g. on preallocating the next segment).
	if err := w.Err(); err != nil {
		t.Fatalf("Err after space returned and a flush succeeded: %v", err)
	}
	last := w.NextSeq() - 1
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w2, err := Open(c)
	if err != nil {
		t.Fatal(err)
	}
	if w2.NextSeq() != last+1 {
		t.Fatalf("reopen: NextSeq %d want %d", w2.NextSeq(), last+1)
	}
	w2.Close()
	verifyDir(t, c, last)
}

// TestDiskFullRestart: a writer killed (here: closed while its flushes
// fail) on a full disk cannot be opened again while the disk is full —
// Open says so at once instead of a sender that stalls silently — and
// once there is space it opens with a Skip marker for the records that
// never became durable.
func TestDiskFullRestart(t *testing.T) {
	c := fullDiskConfig(t, 5)
	mnt := c.Dir
	w, err := Open(c)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && !errors.Is(w.Err(), syscall.ENOSPC) {
		seq := w.NextSeq()
		if _, err := w.Append(100, payloadFor(seq, sizeFor(seq))); err != nil {
			time.Sleep(time.Millisecond)
		}
	}
	if !errors.Is(w.Err(), syscall.ENOSPC) {
		t.Fatal("the disk never filled")
	}
	published, durable := w.NextSeq()-1, w.Durable()
	if err := w.Close(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Close on a full disk: %v", err)
	}
	if w2, err := Open(c); !errors.Is(err, syscall.ENOSPC) {
		if err == nil {
			w2.Close()
		}
		t.Fatalf("Open on a still full disk: %v", err)
	}
	if out, err := exec.Command("mount", "-o", "remount,size=16m", mnt).CombinedOutput(); err != nil {
		t.Fatalf("remount: %v: %s", err, out)
	}
	w3, err := Open(c)
	if err != nil {
		t.Fatal(err)
	}
	defer w3.Close()
	sk := w3.Stats().Recovery.Skip
	if sk == nil || sk.From <= durable || sk.From > published+1 || sk.Seq <= published {
		t.Fatalf("reopen after space returned: Skip %+v, durable %d, published %d", sk, durable, published)
	}
}
