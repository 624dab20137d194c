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
	"github.com/walcast/walcast/wal"
)

// The link goes dark while the sender keeps sending 52 501 records; the
// consumer escalates (Reconnect), catches up over TLS from the WAL,
// resets its receiver and resumes UDP. Every record arrives exactly once,
// in order, through the one callback.
func TestConsumerOutage(t *testing.T) {
	r := newConsRig(t)
	var events []string
	var evMu sync.Mutex
	resumed := make(chan struct{}, 8)
	cfg := r.consumerConfig(filepath.Join(t.TempDir(), "c.tip"))
	cfg.OnEvent = func(e ConsumerEvent) {
		evMu.Lock()
		events = append(events, fmt.Sprintf("%v %v tip=%d records=%d in %v", e.Kind, e.Outcome.Kind, e.Tip, e.Records, e.Duration.Round(time.Millisecond)))
		evMu.Unlock()
		if e.Kind == EventLive {
			resumed <- struct{}{}
		}
	}
	app := &orderCheck{t: t, first: 1}
	c, stop := startConsumer(t, r, cfg, app)
	<-resumed // bootstrap on the empty stream
	last := r.send(1000)
	app.waitFor(t, last, 20*time.Second)

	r.dark()
	r.send(52501)
	r.light()
	last = r.send(1000)
	app.waitFor(t, last, 60*time.Second)
	select {
	case <-resumed:
	case <-time.After(30 * time.Second):
		t.Fatal("the consumer never resumed UDP")
	}
	udp := c.Stats().UDPRecords
	last = r.send(500) // live again over UDP
	app.waitFor(t, last, 20*time.Second)
	if c.Stats().UDPRecords == udp {
		t.Error("no record arrived over UDP after the catch-up")
	}
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v", err)
	}
	if app.err != nil {
		t.Fatal(app.err)
	}
	if n := app.n.Load(); n != last {
		t.Fatalf("delivered %d records, want %d", n, last)
	}
	st := c.Stats()
	t.Logf("stats: udp %d tcp %d escalations %d (faults %d reconnects %d) catch-ups %d, last recovery %v",
		st.UDPRecords, st.TCPRecords, st.Escalations, st.Faults, st.Reconnects, st.CatchUps, st.LastRecovery)
	t.Logf("events: %v", events)
	if st.Escalations == 0 || st.TCPRecords < 50000 || st.LastRecovery == 0 {
		t.Errorf("expected an escalation and a TCP catch-up of the gap: %+v", st)
	}
	if st.UDPRecords+st.TCPRecords != last {
		t.Errorf("udp %d + tcp %d != %d", st.UDPRecords, st.TCPRecords, last)
	}
	if tip, _ := replay.ReadTip(cfg.TipPath); tip != last {
		t.Errorf("tip file %d, want %d", tip, last)
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
	cfg.VerifyWait = 10 * time.Second // a loaded machine may flush late
	resumed := make(chan struct{}, 8)
	cfg.OnEvent = func(e ConsumerEvent) {
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
	hb := make([]byte, wal.ControlFrameSize)
	wal.PutHeartbeatFrame(hb, wal.Heartbeat{Highest: 400})
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
