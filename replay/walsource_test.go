package replay

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/walcast/walcast/wal"
	"github.com/walcast/walcast/wire"
)

// openWAL opens a writer on a fresh directory with small segments so the
// tests cross rotations.
func openWAL(t testing.TB, dir string, seg int64) *wal.Writer {
	t.Helper()
	cfg := wal.DefaultConfig(dir)
	cfg.Stream = 1
	if seg > 0 {
		cfg.SegmentSize = seg
	}
	w, err := wal.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// appendN appends n records whose payload bytes match dataFrame(seq, size)
// (the writer stamps the seq) and returns the last seq.
func appendN(t testing.TB, w *wal.Writer, n, size int) uint64 {
	t.Helper()
	var last uint64
	for range n {
		seq := w.NextSeq()
		f := appendRetry(t, w, 100, dataFrame(seq, size)[wire.HeaderSize:])
		last = wire.Seq(f[wire.HeaderSize:])
	}
	return last
}

// The catch-up protocol end to end on real WAL files, served both by a
// writer in the same process and by a directory follower (the server in
// another process than the writer): from 40 on 1..100 → 40..100,
// CaughtUp, then live records, each exactly once, across segment
// rotations.
func TestWALCatchUpThenLive(t *testing.T) {
	for _, mode := range []string{"writer", "dir"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			w := openWAL(t, dir, 64<<10)
			appendN(t, w, 100, 200)
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			var src Source = NewWriterSource(w, dir, 1)
			if mode == "dir" {
				ds, err := OpenDirSource(dir, 1, time.Hour) // inotify only: the poll never fires
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { ds.Close() })
				src = ds
			}
			if o, d := src.Bounds(); o != 1 || d != 100 {
				t.Fatalf("Bounds = %d, %d; want 1, 100", o, d)
			}
			_, addr := startServer(t, nil, src)
			cfg := testClientConfig(t, addr)
			cfg.StartTip = 39
			caught := make(chan wire.CaughtUp, 1)
			cfg.OnEvent = func(e Event) {
				if e.Kind == EventCaughtUp {
					caught <- e.CaughtUp
				}
			}
			cl, err := NewClient(cfg)
			if err != nil {
				t.Fatal(err)
			}
			col := newCollector(t)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- cl.Run(ctx, col.handle) }()
			select {
			case cu := <-caught:
				if cu.LiveSeq != 100 {
					t.Errorf("live_seq = %d", cu.LiveSeq)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no CaughtUp")
			}
			checkRange(t, col.snapshot(), 40, 100)
			// Live: 2000 records of 200 B cross several 64 KiB segments.
			for range 20 {
				appendN(t, w, 100, 200)
				time.Sleep(time.Millisecond)
			}
			col.waitFor(t, 2100, 20*time.Second)
			cancel()
			<-done
			checkRange(t, col.snapshot(), 40, 2100)
			if ds, ok := src.(*DirSource); ok && ds.Wakeups() == 0 {
				t.Error("directory follower never woke on inotify")
			}
			segs, _ := wal.ListSegments(wal.StreamDir(dir, 1), 1)
			if len(segs) < 4 {
				t.Errorf("only %d segments: the test did not cross rotations", len(segs))
			}
		})
	}
}

// A consumer far behind on a WAL of many segments catches up from the
// middle: the server seeks, so the records before from are never sent.
func TestWALSeekFromMiddle(t *testing.T) {
	dir := t.TempDir()
	w := openWAL(t, dir, 64<<10)
	appendN(t, w, 5000, 100)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	srv, addr := startServer(t, nil, NewWriterSource(w, dir, 1))
	for _, from := range []uint64{1, 2, 777, 4999, 5000} {
		t.Run(fmt.Sprint(from), func(t *testing.T) {
			cfg := testClientConfig(t, addr)
			cfg.StartTip = from - 1
			cl, _ := NewClient(cfg)
			col := newCollector(t)
			before := srv.Stats().Records
			tip, err := cl.CatchUp(context.Background(), col.handle)
			if err != nil || tip != 5000 {
				t.Fatalf("CatchUp = %d, %v", tip, err)
			}
			checkRange(t, col.snapshot(), from, 5000)
			if sent := srv.Stats().Records - before; sent != 5001-from {
				t.Errorf("server sent %d records, want %d", sent, 5001-from)
			}
		})
	}
	// Above the highest: servable, waits for the record.
	cfg := testClientConfig(t, addr)
	cfg.StartTip = 5009
	cl, _ := NewClient(cfg)
	col := newCollector(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cl.Run(ctx, col.handle) }()
	appendN(t, w, 20, 100)
	col.waitFor(t, 5020, 10*time.Second)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v", err)
	}
	checkRange(t, col.snapshot(), 5010, 5020)
}

// appendRetry appends one record, retrying while the writer applies
// backpressure. (Not BlockOnBackpressure: with it, an Append can wait for
// a wake-up that never comes — a lost wake-up in wal.Writer seen under
// -race with small segments, reported to the wal owner.)
func appendRetry(t testing.TB, w *wal.Writer, typ uint16, p []byte) []byte {
	for {
		f, err := w.Append(typ, p)
		if errors.Is(err, wal.ErrBackpressure) {
			time.Sleep(100 * time.Microsecond)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
}
