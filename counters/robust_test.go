package counters

import (
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestTruncateUnderWriter: a reader that truncates the file of a running
// writer (as `truncate -s 0` does) takes nothing from the writer, whose
// stores go to its own memory: it goes on counting, and the file gets its
// size and contents back within a few sample intervals, with the event in
// its error log.
func TestTruncateUnderWriter(t *testing.T) {
	needFiles(t)
	f, _ := acquire(t)
	c, err := f.Counter(KindCounter, `records_sent{stream="1",role="producer"}`)
	if err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var n atomic.Uint64
	wg.Add(1)
	go func() { // the loop thread
		defer wg.Done()
		for i := uint64(1); !stop.Load(); i++ {
			c.Store(i)
			n.Store(i)
			if i%4096 == 0 {
				ref := f.OpenLoss(Loss{Stream: 1, Role: RoleConsumer, First: i, At: int64(i)})
				f.CloseLoss(ref, Loss{Stream: 1, Role: RoleConsumer, First: i, Count: 1, At: int64(i), Done: int64(i + 1), Repair: RepairUDP})
			}
		}
	}()
	defer func() { stop.Store(true); wg.Wait() }()
	f.Flush()
	for k, size := range []int64{0, HeaderSize + 100, lossOff + 10} {
		if err := os.Truncate(f.Path(), size); err != nil {
			t.Fatal(err)
		}
		before := n.Load()
		var s *Snapshot
		deadline := time.Now().Add(30 * time.Second)
		for {
			time.Sleep(SampleInterval)
			fi, err := os.Stat(f.Path())
			if err != nil {
				t.Fatal(err)
			}
			if fi.Size() == fileSize {
				if s, err = Read(f.Path()); err == nil {
					if v, _ := s.Find(`records_sent{stream="1",role="producer"}`); v > before && s.LossTotal > 0 && restored(s) > uint64(k) {
						break
					}
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("truncated to %d: file not restored (size %d, read %v, %+v)", size, fi.Size(), err, s)
			}
		}
		if n.Load() <= before {
			t.Fatalf("the writer stopped counting at %d", before)
		}
	}
}

// restored is how often the error log says the file was restored.
func restored(s *Snapshot) uint64 {
	for _, e := range s.Errors {
		if strings.Contains(e.Message, "cut short by another process: restored") {
			return e.Count
		}
	}
	return 0
}

// TestSnapshotInProcess: a process reads its own counters from memory,
// without the file.
func TestSnapshotInProcess(t *testing.T) {
	f, _ := acquire(t)
	c, _ := f.Counter(KindGauge, `delivered_seq{stream="2",role="consumer"}`)
	c.Store(42)
	s := f.Snapshot()
	if v, ok := s.Find(`delivered_seq{stream="2",role="consumer"}`); !ok || v != 42 || s.PID != os.Getpid() || s.State != Live {
		t.Fatalf("snapshot %+v", s)
	}
}

// TestSilentLoop: a KindHeartbeat slot older than SilentAfter makes the
// process Silent and names the slot.
func TestSilentLoop(t *testing.T) {
	f, _ := acquire(t)
	hb, _ := f.Counter(KindHeartbeat, `loop_heartbeat_unix_ns{loop="1"}`)
	now := time.Now()
	hb.Store(uint64(now.UnixNano()))
	s := f.Snapshot()
	if s.State != Live || len(s.SilentLoops) != 0 {
		t.Fatalf("fresh heartbeat: %s %v", s.State, s.SilentLoops)
	}
	s.judge(now.Add(SilentAfter+time.Second), true)
	if s.State != Silent || len(s.SilentLoops) != 1 || s.SilentLoops[0] != `loop_heartbeat_unix_ns{loop="1"}` {
		t.Fatalf("old heartbeat: %s %v", s.State, s.SilentLoops)
	}
}
