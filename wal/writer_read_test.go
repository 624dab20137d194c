package wal

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/walcast/walcast/wire"
)

// TestConcurrentReadsWhileAppending: ReadAt and ReadRange from other
// goroutines, racing appends, flushes, ring release and rotations, always
// find every appended record intact (in the buffer or on disk).
func TestConcurrentReadsWhileAppending(t *testing.T) {
	c := testConfig(t)
	c.SegmentSize = 32 << 10
	c.BufferSize = MinBufferSize
	c.FlushInterval = time.Millisecond
	c.FlushRecords = 20
	w := openT(t, c)
	const total = 6000
	done := make(chan struct{})
	errs := make(chan error, 3)
	var wg sync.WaitGroup
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			buf := make([]byte, 1<<17)
			rng := uint64(g + 1)
			for {
				select {
				case <-done:
					return
				default:
				}
				hi := w.NextSeq() - 1
				if hi == 0 {
					continue
				}
				rng = rng*6364136223846793005 + 1442695040888963407
				seq := 1 + (rng>>33)%hi
				if g == 0 {
					n, err := w.ReadAt(seq, buf)
					if err != nil {
						errs <- fmt.Errorf("ReadAt(%d) with highest %d: %w", seq, hi, err)
						return
					}
					if got := wire.Seq(buf[wire.HeaderSize:n]); got != seq {
						errs <- fmt.Errorf("ReadAt(%d) returned seq %d", seq, got)
						return
					}
					continue
				}
				k, b, err := w.ReadRange(seq, 50, buf)
				if err != nil || k == 0 {
					errs <- fmt.Errorf("ReadRange(%d) with highest %d: %d frames, %w", seq, hi, k, err)
					return
				}
				p := buf[:b]
				for i := 0; i < k; i++ {
					_, pl, size, err := wire.DecodeFrame(p)
					if err != nil || wire.Seq(pl) != seq+uint64(i) {
						errs <- fmt.Errorf("ReadRange(%d) frame %d: %v seq %d", seq, i, err, wire.Seq(pl))
						return
					}
					p = p[size:]
				}
			}
		}(g)
	}
	appendN(t, w, total)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	close(done)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	if w.Stats().Rotations == 0 {
		t.Fatal("no rotation happened")
	}
}

// TestReadAtAllocs: the NAK service's cold path allocates nothing, from
// the buffer or from disk.
func TestReadAtAllocs(t *testing.T) {
	c := testConfig(t)
	c.FlushInterval = time.Hour
	c.FlushRecords = 1 << 30
	c.FlushBytes = 1 << 30
	w := openT(t, c)
	appendN(t, w, 100)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	appendN(t, w, 100) // 101…200 stay in the buffer
	buf := make([]byte, 1<<17)
	for _, tc := range []struct {
		name string
		seq  uint64
	}{{"disk", 50}, {"buffer", 150}} {
		if _, err := w.ReadAt(tc.seq, buf); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(200, func() {
			if _, err := w.ReadAt(tc.seq, buf); err != nil {
				t.Fatal(err)
			}
			if _, _, err := w.ReadRange(tc.seq, 20, buf); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("%s: ReadAt+ReadRange allocate %v per call", tc.name, n)
		}
	}
}
