package cast

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/replay"
	"github.com/walcast/walcast/wire"
)

// outageRig is the outage tests' consumer: live over UDP with records
// 1..1000 delivered, recording its events; EventLive also goes to live.
type outageRig struct {
	r    *consRig
	c    *Consumer
	app  *orderCheck
	cfg  ConsumerConfig
	stop func() error
	live chan struct{}
	mu   sync.Mutex
	evs  []string
}

func newOutageRig(t *testing.T) *outageRig {
	o := &outageRig{r: newConsRig(t), live: make(chan struct{}, 8)}
	o.cfg = o.r.consumerConfig(filepath.Join(t.TempDir(), "c.tip"))
	o.cfg.OnEvent = func(e Event) {
		o.mu.Lock()
		o.evs = append(o.evs, fmt.Sprintf("%v %v tip=%d records=%d in %v", e.Kind, e.Outcome.Kind, e.Tip, e.Records, e.Duration.Round(time.Millisecond)))
		o.mu.Unlock()
		if e.Kind == EventLive {
			o.live <- struct{}{}
		}
	}
	o.app = &orderCheck{t: t, first: 1}
	o.c, o.stop = startConsumer(t, o.r, o.cfg, o.app)
	<-o.live // bootstrap on the empty stream
	o.app.waitFor(t, o.r.send(1000), 20*time.Second)
	return o
}

// waitProbe waits until the consumer heard a probe from the producer
// (an idle producer sends one every heartbeat interval once it heard the
// consumer's Status).
func (o *outageRig) waitProbe(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); o.c.Stats().Receiver.Probes == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("no probe from the producer: %s", o.app.diag())
		}
		time.Sleep(time.Millisecond)
	}
}

func (o *outageRig) events() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.evs...)
}

// finish sends 500 records, which must arrive over UDP, stops the
// consumer and checks that 1..last arrived exactly once, in order, and
// the tip file.
func (o *outageRig) finish(t *testing.T) ConsumerStats {
	t.Helper()
	udp := o.c.Stats().UDPRecords
	last := o.r.send(500) // live again over UDP
	o.app.waitFor(t, last, 20*time.Second)
	if o.c.Stats().UDPRecords == udp {
		t.Error("no record arrived over UDP after the recovery")
	}
	if err := o.stop(); !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v", err)
	}
	if o.app.err != nil {
		t.Fatal(o.app.err)
	}
	if n := o.app.n.Load(); n != last {
		t.Fatalf("delivered %d records, want %d", n, last)
	}
	st := o.c.Stats()
	t.Logf("stats: udp %d tcp %d escalations %d (faults %d reconnects %d) catch-ups %d, last recovery %v; receiver NAKs %d for %d seqs, duplicates %d",
		st.UDPRecords, st.TCPRecords, st.Escalations, st.Faults, st.Reconnects, st.CatchUps, st.LastRecovery, st.Receiver.NaksSent, st.Receiver.NakSeqs, st.Receiver.Duplicates)
	t.Logf("events: %v", o.events())
	if st.UDPRecords+st.TCPRecords != last {
		t.Errorf("udp %d + tcp %d != %d", st.UDPRecords, st.TCPRecords, last)
	}
	if tip, _ := replay.ReadTip(o.cfg.TipPath); tip != last {
		t.Errorf("tip file %d, want %d", tip, last)
	}
	return st
}

// The link goes dark while the sender keeps sending 52 501 records; it
// comes back with the next records, far past the consumer's window: the
// consumer escalates (Reconnect), catches up over TLS from the WAL,
// resets its receiver and resumes UDP. Every record arrives exactly once,
// in order, through the one callback.
//
// What the consumer hears first after the outage decides the path, so
// the test fixes it: the link returns with the first record after the
// gap (lightAfter), and the consumer reads the records sent after the
// outage in full batches (holdInput), so OverrunEvidence of them arrive
// back to back. (Were the link lit before the send, a heartbeat could
// get in first on a loaded machine and the consumer would repair the gap
// over UDP instead — the path of TestConsumerOutageHeardFirst.)
//
// Those datagrams are evidence only from a producer the consumer knows
// to speak probes (it honours the window, so running two windows ahead
// means it released this receiver); from any other, the overrun must
// last NakDebounce, and 1000 datagrams read back to back take less. So
// the consumer must have heard a probe before the outage: on a loaded
// machine the first 1000 records can all be delivered before the
// producer's first probe, and the consumer then rightly repairs the gap
// by NAK, never resuming after a catch-up (waitProbe).
func TestConsumerOutage(t *testing.T) {
	o := newOutageRig(t)
	r, c := o.r, o.c
	o.waitProbe(t)
	r.dark()
	gapEnd := r.send(52501)
	r.holdInput(true)
	r.lightAfter(gapEnd)
	last := r.send(1000)
	r.holdInput(false)
	o.app.waitFor(t, last, 60*time.Second)
	select {
	case <-o.live:
	case <-time.After(30 * time.Second):
		t.Fatalf("the consumer never resumed UDP: %s", o.app.diag())
	}
	st := o.finish(t)
	// One outage, one escalation: the catch-up goes to the highest seq
	// heard, and what follows it is within the window.
	if st.Reconnects != 1 || st.Escalations != 1 || st.TCPRecords < gapEnd-1000 || st.LastRecovery == 0 {
		t.Errorf("expected one Reconnect and a TCP catch-up of the gap (%d records): %+v", gapEnd-1000, st)
	}
	if oow := c.Stats().Receiver.OutOfWindow; oow < 64 {
		t.Errorf("Reconnect after %d datagrams past the window, want OverrunEvidence (64)", oow)
	}
}

// After an outage like TestConsumerOutage's (20 000 records, ten
// windows, to keep it short) the first thing the consumer hears is the
// producer's heartbeat announcing the gap, and the producer sends nothing
// new until the gap is repaired: the receiver NAKs the gap a window at a
// time and the producer answers from its WAL, so the gap is repaired over
// UDP, with no escalation unless a retry budget runs out on a loaded
// machine (then a TCP catch-up does the rest). Every record arrives
// exactly once, in order, and UDP goes on.
func TestConsumerOutageHeardFirst(t *testing.T) {
	o := newOutageRig(t)
	r, c := o.r, o.c
	r.dark()
	gapEnd := r.send(20000)
	hb := c.Stats().Receiver.Heartbeats
	r.light()
	for deadline := time.Now().Add(20 * time.Second); c.Stats().Receiver.Heartbeats == hb; {
		if time.Now().After(deadline) {
			t.Fatalf("no heartbeat after the outage: %s", o.app.diag())
		}
		time.Sleep(time.Millisecond)
	}
	o.app.waitFor(t, gapEnd, 60*time.Second)
	if st := o.finish(t); st.Escalations == 0 && st.TCPRecords != 0 {
		t.Errorf("records caught up over TCP without an escalation: %+v", st)
	}
}

// The producer (sender, WAL, replay server) goes away mid-stream with
// records lost on the link, and comes back: the WAL recovers and the
// sender continues the seqs. The consumer loses nothing and repeats
// nothing. Then the consumer itself is restarted from its tip file.
func TestConsumerSenderAndConsumerRestart(t *testing.T) {
	r := newConsRig(t)
	tipPath := filepath.Join(t.TempDir(), "c.tip")
	cfg := r.consumerConfig(tipPath)
	app := &orderCheck{t: t, first: 1}
	c, stop := startConsumer(t, r, cfg, app)
	app.waitFor(t, r.send(3000), 20*time.Second)

	// Records 3001..4500 are lost on the link, then the producer dies.
	r.dark()
	r.send(1500)
	r.stopProducer()
	r.light()
	time.Sleep(300 * time.Millisecond) // the consumer sees silence / fails to connect
	r.startProducer()
	if got := r.sent.Load(); got != 4500 {
		t.Fatalf("restarted sender continues after %d, want 4500", got)
	}
	last := r.send(2000)
	app.waitFor(t, last, 60*time.Second)
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v", err)
	}
	if app.err != nil || app.n.Load() != last {
		t.Fatalf("delivered %d records (want %d): %v", app.n.Load(), last, app.err)
	}
	st := c.Stats()
	t.Logf("across the producer restart: udp %d tcp %d escalations %d, receiver NAKs %d", st.UDPRecords, st.TCPRecords, st.Escalations, st.Receiver.NaksSent)

	// Consumer restart: resumes at tip+1 from its tip file.
	tip, _ := replay.ReadTip(tipPath)
	if tip != last {
		t.Fatalf("tip file %d, want %d", tip, last)
	}
	app2 := &orderCheck{t: t, first: tip + 1}
	_, stop2 := startConsumer(t, r, r.consumerConfig(tipPath), app2)
	last = r.send(500)
	app2.waitFor(t, last, 20*time.Second)
	stop2()
	if app2.err != nil || app2.n.Load() != 500 {
		t.Fatalf("restarted consumer delivered %d records: %v", app2.n.Load(), app2.err)
	}
}

// Heartbeats from before a catch-up (announcing a highest below the tip)
// that are not refuted (two in a row: one alone is only suspicious) raise
// SenderRestarted; the consumer checks with the producer that its tip
// record is still there, dismisses it and carries on.
func TestConsumerStaleHeartbeat(t *testing.T) {
	r := newConsRig(t)
	app := &orderCheck{t: t, first: 1}
	cfg := r.consumerConfig("")
	cfg.Advanced.VerifyWait = 10 * time.Second // a loaded machine may flush late
	resumed := make(chan struct{}, 8)
	cfg.OnEvent = func(e Event) {
		if e.Kind == EventLive {
			resumed <- struct{}{}
		}
	}
	c, stop := startConsumer(t, r, cfg, app)
	<-resumed // live on the empty stream, so the records below arrive over UDP
	app.waitFor(t, r.send(1000), 20*time.Second)
	if c.Stats().UDPRecords == 0 {
		t.Fatal("no record arrived over UDP")
	}
	time.Sleep(50 * time.Millisecond) // records durable
	hb := make([]byte, wire.ControlFrameSize)
	wire.PutHeartbeatFrame(hb, wire.Heartbeat{Highest: 400})
	// The same heartbeat from a stranger is dropped: only the producer's
	// data and heartbeats reach the receiver.
	inj, err := r.net.Listen(netip.MustParseAddrPort("10.0.0.9:9"), mem.AddrB)
	if err != nil {
		t.Fatal(err)
	}
	out := batch.New(1, 128)
	out.Append(hb, mem.AddrB)
	inj.Send(out)
	for deadline := time.Now().Add(20 * time.Second); c.Stats().Loop.Foreign == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the stranger's heartbeat was not seen")
		}
		time.Sleep(time.Millisecond)
	}
	if c.Stats().Escalations != 0 {
		t.Fatal("a stranger's heartbeat escalated")
	}
	// Re-inject until it is seen: a heartbeat that lands while the
	// receiver holds another sticky outcome (a loaded machine can stall
	// the loop past the NAK budget) is dropped with everything else.
	deadline := time.Now().Add(20 * time.Second)
	for c.Stats().StaleRestarts == 0 && time.Now().Before(deadline) {
		r.inject <- hb // two in a row: the sender's next heartbeat would refute one
		r.inject <- hb
		for end := time.Now().Add(200 * time.Millisecond); c.Stats().StaleRestarts == 0 && time.Now().Before(end); {
			time.Sleep(time.Millisecond)
		}
	}
	last := r.send(500)
	app.waitFor(t, last, 20*time.Second)
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	if st := c.Stats(); st.StaleRestarts < 1 || st.Receiver.Restarts != st.StaleRestarts {
		t.Errorf("stale restarts %d, receiver restarts %d; want equal and ≥ 1", st.StaleRestarts, st.Receiver.Restarts)
	}
	if app.err != nil || app.n.Load() != last {
		t.Fatalf("delivered %d (want %d): %v", app.n.Load(), last, app.err)
	}
}

// A consumer whose callback fails stops with that error, without
// applying the record.
func TestConsumerCallbackError(t *testing.T) {
	r := newConsRig(t)
	cfg := r.consumerConfig("")
	boom := errors.New("boom")
	end, _ := r.net.Listen(mem.AddrB, mem.AddrA)
	cfg.Path = end
	c, err := NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- c.Run(context.Background(), func(rec Record) error {
			if rec.Seq == 50 {
				return boom
			}
			return nil
		})
	}()
	r.send(100)
	select {
	case err := <-done:
		if !errors.Is(err, boom) || c.Tip() != 49 {
			t.Fatalf("Run = %v, tip %d; want boom, 49", err, c.Tip())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop")
	}
}
