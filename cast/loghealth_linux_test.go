package cast

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/walcast/walcast/cast/protocol"
)

// failingLog is a Log whose Err the test switches (a disk that fills and
// empties).
type failingLog struct {
	refusingLog
	err error
}

func (f *failingLog) Err() error { return f.err }

// A log that fails: the loop reports it once, at once,
// withholds heartbeats while it lasts, reports the recovery, and its
// iterations allocate nothing meanwhile.
func TestLoopReportsAFailingLog(t *testing.T) {
	pa, _ := openPair(t, "udp", false)
	log := &failingLog{}
	sc := protocol.DefaultSenderConfig()
	sc.HeartbeatInterval = time.Millisecond
	snd, err := protocol.NewSender(sc, log)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultLoopConfig()
	cfg.Path, cfg.Sender, cfg.Cold = pa, snd, log
	cfg.TickInterval = time.Microsecond
	l, err := NewLoop(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	next := func() Event {
		t.Helper()
		for i := 0; i < 100000; i++ {
			l.iterate()
			select {
			case e := <-l.Events():
				return e
			default:
			}
		}
		t.Fatal("no event")
		return Event{}
	}
	full := &wrapped{syscall.ENOSPC}
	log.err = full
	if e := next(); e.Kind != EventLogError || !errors.Is(e.Err, syscall.ENOSPC) {
		t.Fatalf("event %v %v", e.Kind, e.Err)
	}
	if a := testing.AllocsPerRun(200, func() { l.iterate() }); a != 0 {
		t.Fatalf("%.1f allocations per iteration while the log fails", a)
	}
	hb := l.snd.Stats().Heartbeats
	time.Sleep(5 * time.Millisecond)
	for i := 0; i < 200; i++ {
		l.iterate()
	}
	if st := l.snd.Stats(); st.Heartbeats != hb || st.HeartbeatsWithheld == 0 {
		t.Fatalf("heartbeats %d→%d, withheld %d while the log fails", hb, st.Heartbeats, st.HeartbeatsWithheld)
	}
	log.err = nil
	if e := next(); e.Kind != EventLogRecovered {
		t.Fatalf("event %v", e.Kind)
	}
}

type wrapped struct{ err error }

func (w *wrapped) Error() string { return "wal: flush failed: " + w.err.Error() }
func (w *wrapped) Unwrap() error { return w.err }

var _ protocol.LogHealth = (*failingLog)(nil)
