package cast

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/replay"
	"github.com/walcast/walcast/wal"
)

// monoClock is a real monotonic clock for datapath/mem, so the consumer,
// the sender loop and the TCP catch-up all run in real time.
type monoClock struct{ start time.Time }

func (c monoClock) Now() int64 { return int64(time.Since(c.start)) + 1 }

// consRig is a producer (WAL + Sender loop on end A + TLS replay server
// on loopback) and a network to a consumer on end B.
type consRig struct {
	t     testing.TB
	clock monoClock
	net   *mem.Network
	dir   string
	pki   *replay.DevPKI
	addr  string // replay server

	mu     sync.Mutex
	w      *wal.Writer
	srv    *replay.Server
	stop   context.CancelFunc
	done   chan struct{}
	toSend chan int
	sent   atomic.Uint64 // highest seq sent

	prefill int // records written to a fresh WAL before the sender starts
}

func newConsRig(t testing.TB) *consRig { return newConsRigPrefill(t, 0) }

func newConsRigPrefill(t testing.TB, prefill int) *consRig {
	t.Helper()
	pki, err := replay.NewDevPKI(nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	r := &consRig{t: t, clock: monoClock{time.Now()}, dir: t.TempDir(), pki: pki, prefill: prefill}
	r.net = mem.NewNetwork(r.clock)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	ln.Close()
	r.startProducer()
	t.Cleanup(r.stopProducer)
	return r
}

// startProducer opens the WAL (recovering it: seqs continue), starts the
// replay server on the rig's address and the sender loop on end A.
func (r *consRig) startProducer() {
	t := r.t
	cfg := wal.DefaultConfig(r.dir)
	cfg.Stream = 1
	cfg.SegmentSize = 4 << 20
	w, err := wal.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.prefill > 0 && w.NextSeq() == 1 {
		p := make([]byte, 64)
		for range r.prefill {
			appendRetry(t, w, 100, p)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	scfg := replay.DefaultServerConfig()
	scfg.TLS, _ = r.pki.ServerTLS(false)
	srv, err := replay.NewServer(scfg, replay.NewWriterSource(w, r.dir, 1))
	if err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	for i := 0; ; i++ {
		if ln, err = net.Listen("tcp", r.addr); err == nil {
			break
		}
		if i > 100 {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	go srv.Serve(ln)
	end, err := r.net.Listen(mem.AddrA, mem.AddrB)
	if err != nil {
		t.Fatal(err)
	}
	scfgS := protocol.DefaultSenderConfig()
	scfgS.Dest = mem.AddrB
	s, err := protocol.NewSender(scfgS, w)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.mu.Lock()
	r.w, r.srv, r.stop, r.done, r.toSend = w, srv, cancel, make(chan struct{}), make(chan int, 16)
	r.sent.Store(w.NextSeq() - 1)
	done, toSend := r.done, r.toSend
	r.mu.Unlock()
	go r.senderLoop(ctx, s, w, end, toSend, done)
}

// stopProducer stops the sender loop, the replay server and the WAL — a
// producer that went away with everything it sent durable.
func (r *consRig) stopProducer() {
	r.mu.Lock()
	stop, done, srv, w := r.stop, r.done, r.srv, r.w
	r.stop = nil
	r.mu.Unlock()
	if stop == nil {
		return
	}
	stop()
	<-done
	srv.Close()
	if err := w.Close(); err != nil {
		r.t.Error(err)
	}
}

// send asks the sender loop to send n records and waits until it has.
func (r *consRig) send(n int) uint64 {
	r.mu.Lock()
	ch := r.toSend
	r.mu.Unlock()
	target := r.sent.Load() + uint64(n)
	ch <- n
	for r.sent.Load() < target {
		time.Sleep(time.Millisecond)
	}
	return target
}

// senderLoop is the producer's loop: sends requested records, serves NAKs
// (hot ring, else WAL cold reads inline), heartbeats when idle.
func (r *consRig) senderLoop(ctx context.Context, s *protocol.Sender, w *wal.Writer, end *mem.End, toSend <-chan int, done chan struct{}) {
	defer close(done)
	defer end.Close()
	out := batch.New(64, 2048)
	in := batch.New(64, 2048)
	cold := make([]protocol.ColdRequest, 8)
	coldBuf := make([]byte, protocol.DefaultMaxColdRecords*protocol.DefaultMaxFrame)
	payload := make([]byte, 64)
	flush := func() { end.Send(out); out.Reset() }
	pending := 0
	for ctx.Err() == nil {
		now := r.clock.Now()
		select {
		case n := <-toSend:
			pending += n
		default:
		}
		for i := 0; i < 256 && pending > 0; i++ {
			seq, err := s.Send(100, payload, now, out)
			if errors.Is(err, protocol.ErrBatchFull) {
				flush()
				i--
				continue
			}
			if errors.Is(err, wal.ErrBackpressure) {
				flush()
				time.Sleep(100 * time.Microsecond)
				i--
				continue
			}
			if err != nil {
				r.t.Errorf("send: %v", err)
				return
			}
			pending--
			r.sent.Store(seq)
		}
		flush()
		n, _ := end.Recv(in)
		for i := 0; i < n; i++ {
			b, from := in.Msg(i)
			if out.Full() {
				flush()
			}
			s.Handle(b, from, now, out)
		}
		k := s.ColdRequests(cold)
		for _, req := range cold[:k] {
			_, nb, err := w.ReadRange(req.From, req.Count, coldBuf)
			if errors.Is(err, wal.ErrNotFound) {
				s.ColdDone(req, nil, now, out)
				continue
			}
			if err != nil {
				s.ColdFailed(req)
				continue
			}
			for rest := s.ColdDone(req, coldBuf[:nb], now, out); len(rest) > 0; rest = s.ColdDone(req, rest, now, out) {
				flush()
			}
		}
		s.Tick(now, out)
		flush()
		if pending == 0 && n == 0 {
			time.Sleep(50 * time.Microsecond)
		}
	}
}

func (r *consRig) dark() {
	r.net.Impair(mem.AddrA, mem.AddrB, mem.Impairment{Blackouts: []mem.Window{{From: 0, To: math.MaxInt64}}})
}
func (r *consRig) light() { r.net.Impair(mem.AddrA, mem.AddrB, mem.Impairment{}) }

func (r *consRig) consumerConfig(tipPath string) ConsumerConfig {
	cfg := DefaultConsumerConfig()
	cfg.Receiver.Sender = mem.AddrA
	cfg.Replay.Endpoints = []string{r.addr}
	cfg.Replay.Stream = 1
	cfg.Replay.TLS, _ = r.pki.ClientTLS()
	cfg.Replay.TipPath = tipPath
	cfg.Replay.Backoff = []time.Duration{20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond}
	cfg.Replay.RetryBudget = 100
	cfg.Clock = r.clock.Now
	return cfg
}

// orderCheck is the application: it fails on any seq that is not the
// previous one plus one.
type orderCheck struct {
	t     testing.TB
	first uint64
	last  atomic.Uint64
	n     atomic.Uint64
	err   error
	diag  func() string

	mark   atomic.Uint64 // seq whose delivery time is recorded
	markNs atomic.Int64
}

func (o *orderCheck) markAt(seq uint64) { o.markNs.Store(0); o.mark.Store(seq) }

func (o *orderCheck) marked() time.Time { return time.Unix(0, o.markNs.Load()) }

func (o *orderCheck) deliver(h wal.Header, p []byte) error {
	seq := wal.Seq(p)
	last := o.last.Load()
	if o.n.Load() == 0 {
		if o.first != 0 && seq != o.first {
			o.err = fmt.Errorf("first record %d, want %d", seq, o.first)
		}
	} else if seq != last+1 && o.err == nil {
		o.err = fmt.Errorf("record %d after %d", seq, last)
	}
	if h.Type != 100 || len(p) != 64 {
		o.err = fmt.Errorf("record %d: type %d, %d bytes", seq, h.Type, len(p))
	}
	o.last.Store(seq)
	o.n.Add(1)
	if seq == o.mark.Load() {
		o.markNs.Store(time.Now().UnixNano())
	}
	return nil
}

func (o *orderCheck) waitFor(t testing.TB, seq uint64, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for o.last.Load() < seq {
		if time.Now().After(deadline) {
			d := ""
			if o.diag != nil {
				d = o.diag()
			}
			t.Fatalf("timed out at %d waiting for %d: %s", o.last.Load(), seq, d)
		}
		time.Sleep(time.Millisecond)
	}
}

func startConsumer(t testing.TB, r *consRig, cfg ConsumerConfig, app *orderCheck) (*Consumer, func() error) {
	t.Helper()
	end, err := r.net.Listen(mem.AddrB, mem.AddrA)
	if err != nil {
		t.Fatal(err)
	}
	var evs2 []string
	var evMu sync.Mutex
	userEv := cfg.OnEvent
	cfg.OnEvent = func(e ConsumerEvent) {
		evMu.Lock()
		evs2 = append(evs2, fmt.Sprintf("%v %v tip=%d rec=%d", e.Kind, e.Outcome.Kind, e.Tip, e.Records))
		evMu.Unlock()
		if userEv != nil {
			userEv(e)
		}
	}
	c, err := NewConsumer(cfg, end)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, app.deliver) }()
	app.diag = func() string {
		evMu.Lock()
		defer evMu.Unlock()
		return fmt.Sprintf("consumer %+v; events %v; sent %d", c.Stats(), evs2, r.sent.Load())
	}
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			runErr = <-done
			end.Close()
		})
		return runErr
	}
	t.Cleanup(func() { stop() })
	return c, stop
}

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
		if e.Kind == EventResumed {
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
	if tip, _ := replay.ReadTip(cfg.Replay.TipPath); tip != last {
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

// A heartbeat from before a catch-up (announcing a highest below the tip)
// raises SenderRestarted; the consumer checks with the producer that its
// tip record is still there, dismisses it and carries on.
func TestConsumerStaleHeartbeat(t *testing.T) {
	r := newConsRig(t)
	app := &orderCheck{t: t, first: 1}
	cfg := r.consumerConfig("")
	cfg.VerifyWait = 10 * time.Second // a loaded machine may flush late
	resumed := make(chan struct{}, 8)
	cfg.OnEvent = func(e ConsumerEvent) {
		if e.Kind == EventResumed {
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
	inj, err := r.net.Listen(netip.MustParseAddrPort("10.0.0.9:9"), mem.AddrB)
	if err != nil {
		t.Fatal(err)
	}
	out := batch.New(1, 128)
	// Re-inject until it is seen: a heartbeat that lands while the
	// receiver holds another sticky outcome (a loaded machine can stall
	// the loop past the NAK budget) is dropped with everything else.
	deadline := time.Now().Add(20 * time.Second)
	for c.Stats().StaleRestarts == 0 && time.Now().Before(deadline) {
		out.Reset()
		wal.PutHeartbeatFrame(out.Next(), wal.Heartbeat{Highest: 400})
		out.Commit(wal.ControlFrameSize, mem.AddrB)
		inj.Send(out)
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
	c, err := NewConsumer(cfg, end)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- c.Run(context.Background(), func(h wal.Header, p []byte) error {
			if wal.Seq(p) == 50 {
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
