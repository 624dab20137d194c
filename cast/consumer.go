package cast

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/internal/cfgerr"
	"github.com/walcast/walcast/replay"
	"github.com/walcast/walcast/wal"
)

// ConsumerConfig configures a [Consumer]. The zero value of every field
// means its default; ConsumerConfig{Plaintext: true} is a consumer on a
// free port of every address that learns its producer from the stream
// and catches up from it over plain TCP.
type ConsumerConfig struct {
	// Local is the UDP address to receive on (default: the unspecified
	// IPv4 address, on a free port). Consumer.Addr reports the address
	// bound: give it to the producer as ProducerConfig.To.
	Local netip.AddrPort
	// From is the producer's UDP address (Producer.Addr): NAKs go there,
	// and catch-up defaults to the same address and port over TCP. Zero:
	// the consumer learns it from the first valid frame that arrives — a
	// data record or a heartbeat whose CRC checks (a producer announces
	// itself within a heartbeat interval, 100 ms by default, even when it
	// has nothing to send) — and ignores what other addresses send.
	From netip.AddrPort
	// Replay lists the replay servers to catch up from, "host:port", in
	// the order tried (newest source first, archives after). Default: the
	// producer's address (From, or the one learnt) over TCP.
	Replay []string
	// Stream is the stream id asked for (default 0).
	Stream uint32
	// TLS is the client's TLS config (RootCAs: the CA to trust). Required
	// for catch-up unless Plaintext.
	TLS *tls.Config
	// Plaintext catches up without TLS; it must be asked for.
	Plaintext bool
	// TipPath is the tip file: the last seq delivered, written at most
	// every 10 ms and when Run returns, so that a restarted consumer
	// resumes at tip+1. Empty: the tip lives in memory.
	TipPath string
	// StartTip, without a TipPath, is the tip to resume after (default
	// 0: the stream's first record).
	StartTip uint64
	// SkipBootstrap goes live at once instead of catching up over TCP
	// first: at tip+1 if a tip is known, else at Receiver.Start (seq 1 by
	// default: a stream already a reorder window ahead escalates to a
	// catch-up; Receiver.StartNow: the first record it hears, reported by
	// EventStartedLate).
	SkipBootstrap bool
	// NoCatchUp never dials TCP: a gap UDP cannot repair (the receiver
	// faults or must reconnect) ends Run with the outcome's error. For a
	// producer without a WAL or a replay server.
	NoCatchUp bool
	// VerifyWait bounds the check made when the producer announces a
	// highest seq below the tip (SenderRestarted): whether its WAL still
	// holds the consumer's last record (default 1 s).
	VerifyWait time.Duration
	// CatchUpGrace: a catch-up goes on past the server's CaughtUp, on its
	// live tail, until the tip reaches the highest seq the receiver has
	// heard of, for at most this long (default 200 ms; negative: stop at
	// CaughtUp).
	CatchUpGrace time.Duration
	// Path replaces the UDP socket (datapath/mem in tests). The Consumer
	// owns it and closes it. Local is then ignored.
	Path datapath.Path
	// Thread pins the loop's OS thread (default: locked, unpinned).
	Thread affinity.Config
	// Idle is what the loop does when it found nothing to do (default:
	// spin; affinity.Park sleeps on the socket).
	Idle affinity.Idler
	// KeepGOMAXPROCS leaves GOMAXPROCS alone (see LoopConfig).
	KeepGOMAXPROCS bool
	// OnEvent, when set, is called for each [ConsumerEvent], on the
	// goroutine that calls deliver, in order with the records. It must
	// not block.
	OnEvent func(ConsumerEvent)
	// Receiver tunes the protocol receiver (reorder window, NAK timing).
	// Its Sender, where NAKs go, defaults to the producer's address (From
	// or the one learnt); a multicast consumer sets it to the group's
	// control address.
	Receiver protocol.ReceiverConfig
	// ReplayClient tunes the catch-up client (timeouts, backoff, retry
	// budget); Endpoints, Stream, TLS, Plaintext and TipPath come from the
	// fields above and must be left zero.
	ReplayClient replay.ClientConfig
}

const (
	defaultVerifyWait   = time.Second
	defaultCatchUpGrace = 200 * time.Millisecond
)

func (c ConsumerConfig) check() error {
	bad := func(field, f string, a ...any) error { return cfgerr.New("cast", ErrConfig, field, f, a...) }
	rc := c.ReplayClient
	switch {
	case len(rc.Endpoints) > 0 || rc.Stream != 0 || rc.TLS != nil || rc.Plaintext || rc.TipPath != "" || rc.StartTip != 0:
		return bad("ReplayClient", "Endpoints, Stream, TLS, Plaintext, TipPath and StartTip come from ConsumerConfig; leave them zero here")
	case c.TipPath != "" && c.StartTip != 0:
		return bad("StartTip", "the tip comes from TipPath; StartTip is for a consumer without a tip file")
	case c.NoCatchUp && (len(c.Replay) > 0 || c.TipPath != ""):
		return bad("NoCatchUp", "no catch-up, yet Replay or TipPath is set")
	case !c.NoCatchUp && c.TLS == nil && !c.Plaintext:
		return bad("TLS", "catch-up needs a TLS config with the CA to trust, or Plaintext (or NoCatchUp)")
	case c.VerifyWait < 0:
		return bad("VerifyWait", "%v is negative", c.VerifyWait)
	}
	if err := c.Receiver.Validate(); err != nil {
		return cfgerr.Nest("cast", ErrConfig, "Receiver", err)
	}
	if err := c.Thread.Validate(); err != nil {
		return cfgerr.Nest("cast", ErrConfig, "Thread", err)
	}
	if !c.NoCatchUp {
		if _, err := c.clientConfig("127.0.0.1:1"); err != nil {
			return err
		}
	}
	return nil
}

// clientConfig is the replay client's config, with from as the endpoint
// when Replay lists none.
func (c ConsumerConfig) clientConfig(from string) (replay.ClientConfig, error) {
	rc := c.ReplayClient
	rc.Endpoints = c.Replay
	if len(rc.Endpoints) == 0 {
		rc.Endpoints = []string{from}
	}
	rc.Stream, rc.TLS, rc.Plaintext, rc.TipPath, rc.StartTip = c.Stream, c.TLS, c.Plaintext, c.TipPath, c.StartTip
	if err := rc.Validate(); err != nil {
		return rc, cfgerr.Nest("cast", ErrConfig, "ReplayClient", err)
	}
	return rc, nil
}

// Record is one record delivered to a Consumer's callback. Payload is
// valid only during the call; its first 8 bytes are Seq.
type Record struct {
	Seq     uint64
	Type    uint16
	CRC     uint32 // the payload's CRC-32C, as the frame header carried it (checked)
	Payload []byte
}

// ConsumerEventKind names a consumer event.
type ConsumerEventKind uint8

// Consumer events, in the order a consumer's life shows them.
const (
	// EventSenderFound: the consumer learnt the producer's address
	// (From) from the first valid frame.
	EventSenderFound ConsumerEventKind = iota + 1
	// EventCatchingUp: a TCP catch-up starts at seq From; Bootstrap for
	// the one before going live, else Outcome says what UDP could not
	// repair.
	EventCatchingUp
	// EventCaughtUp: the catch-up delivered From..To (Records records, From
	// > To when there was nothing) in Duration.
	EventCaughtUp
	// EventLive: UDP delivery is live from Tip+1.
	EventLive
	// EventEscalated: the receiver raised a sticky outcome (Outcome);
	// a catch-up or, for a restarted sender, a check of the tip follows.
	EventEscalated
	// EventProducerSilent: no data and no heartbeat for the silence time
	// (10 heartbeat intervals) with no gap open; not sticky.
	// EventProducerHeard: traffic again.
	EventProducerSilent
	EventProducerHeard
	// EventStartedLate: a Receiver with StartNow began delivering at
	// From (the records before it were never asked for).
	EventStartedLate
	// EventSkipped: a Skip marker (Skip set) says the seqs Skip.From …
	// Skip.Seq have no record in the producer's log; the stream continues
	// after it. LostFrom…LostTo (0, 0: none) are the seqs of that range
	// this consumer had already delivered: with reason wal.SkipRestart
	// their content never became durable at the producer — the
	// application must drop what it applied for them. The marker itself
	// reaches deliver in its place (type wal.TypeSkip) right after this
	// event.
	EventSkipped
)

var consumerEventNames = [...]string{EventSenderFound: "sender-found", EventCatchingUp: "catching-up",
	EventCaughtUp: "caught-up", EventLive: "live", EventEscalated: "escalated", EventProducerSilent: "producer-silent", EventProducerHeard: "producer-heard", EventSkipped: "skipped", EventStartedLate: "started-late"}

func (k ConsumerEventKind) String() string {
	if int(k) < len(consumerEventNames) && consumerEventNames[k] != "" {
		return consumerEventNames[k]
	}
	return fmt.Sprintf("ConsumerEventKind(%d)", uint8(k))
}

// ConsumerEvent is one consumer event.
type ConsumerEvent struct {
	Kind      ConsumerEventKind
	Tip       uint64           // last seq delivered when the event happened
	Sender    netip.AddrPort   // EventSenderFound: the producer's address
	Outcome   protocol.Outcome // EventEscalated, EventCatchingUp after one
	Bootstrap bool             // EventCatchingUp, EventCaughtUp: the initial catch-up
	From, To  uint64           // EventCatchingUp (From), EventCaughtUp: seqs delivered
	Records   uint64           // EventCaughtUp: records the catch-up delivered
	Duration  time.Duration    // EventCaughtUp: escalation (or bootstrap start) to caught up
	Skip      wal.Skip         // EventSkipped
	// LostFrom…LostTo are, for EventSkipped, the seqs this consumer
	// delivered that the Skip stands for (0, 0: none).
	LostFrom, LostTo uint64
}

// ConsumerStats are a [Consumer]'s counters. Exact once Run has returned.
type ConsumerStats struct {
	Tip         uint64 // last seq delivered
	UDPRecords  uint64 // records delivered from the UDP receiver
	TCPRecords  uint64 // records delivered by TCP catch-ups
	Escalations uint64 // sticky outcomes handled
	Faults      uint64 // of which Faulted
	Reconnects  uint64 // of which Reconnect
	CatchUps    uint64 // TCP catch-ups completed (bootstrap included)
	Skips       uint64 // Skip markers applied
	// LostSeqs counts seqs this consumer delivered that a Skip marker then
	// declared without a record (each reported by an EventSkipped).
	LostSeqs uint64
	// StaleRestarts counts SenderRestarted outcomes dismissed because the
	// producer still holds the tip record: a heartbeat from before a
	// catch-up, read after the reset.
	StaleRestarts uint64
	LastRecovery  time.Duration
	Receiver      protocol.ReceiverStats // at most a tick old while Run runs
	Loop          LoopStats
	Replay        replay.ClientStats
}

// Consumer follows one stream: a protocol Receiver on its own loop thread
// (pinned per Thread, idling per Idle) delivers records in seq order and
// NAKs gaps to the producer; when UDP cannot repair a gap (the receiver
// faults or must reconnect) the consumer catches up over TCP from the
// producer's WAL, resets the receiver to the new tip and goes on over
// UDP. Every record reaches the one callback exactly once, in seq order,
// across those switches.
type Consumer struct {
	cfg  ConsumerConfig
	rcfg protocol.ReceiverConfig
	path datapath.Path
	cl   *replay.Client // nil with NoCatchUp
	r    *protocol.Receiver
	loop *Loop
	ran  atomic.Bool

	loopP atomic.Pointer[Loop] // for Stats from other goroutines
	clP   atomic.Pointer[replay.Client]

	ctx     context.Context
	deliver func(Record) error
	err     error // ends Run (loop thread, then read after the loop stopped)
	tip     uint64
	tipCRC  uint32 // payload CRC of the tip record
	crcKnow bool   // tipCRC is set (false for a tip loaded from the file)
	sender  netip.AddrPort

	udpRecords, tcpRecords, escalations, faults, reconnects, catchUps, stale, skips, lost atomic.Uint64
	lastRecovery                                                                          atomic.Int64
	tipNow                                                                                atomic.Uint64
}

// NewConsumer checks cfg and opens the UDP socket (or takes cfg.Path);
// Addr then reports where the producer must send. Nothing is received
// before Run.
func NewConsumer(cfg ConsumerConfig) (*Consumer, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	c := &Consumer{cfg: cfg, rcfg: cfg.Receiver, tip: cfg.StartTip}
	c.tipNow.Store(cfg.StartTip)
	if cfg.TipPath != "" {
		tip, err := replay.ReadTip(cfg.TipPath)
		if err != nil {
			return nil, fmt.Errorf("cast: consumer: %w", err)
		}
		c.tip = tip
		c.tipNow.Store(tip)
	}
	c.path = cfg.Path
	if c.path == nil {
		p, err := openUDP(cfg.Local, cfg.From)
		if err != nil {
			return nil, fmt.Errorf("cast: consumer: %w", err)
		}
		c.path = p
	}
	return c, nil
}

// Addr is the UDP address the consumer receives on.
func (c *Consumer) Addr() netip.AddrPort { return c.path.LocalAddr() }

// Tip is the last seq delivered (or loaded from the tip file).
func (c *Consumer) Tip() uint64 { return c.tipNow.Load() }

// Stats returns the counters. Safe to call while Run runs; exact after.
func (c *Consumer) Stats() ConsumerStats {
	s := ConsumerStats{
		Tip: c.tipNow.Load(), UDPRecords: c.udpRecords.Load(), TCPRecords: c.tcpRecords.Load(),
		Escalations: c.escalations.Load(), Faults: c.faults.Load(), Reconnects: c.reconnects.Load(),
		CatchUps: c.catchUps.Load(), StaleRestarts: c.stale.Load(), LastRecovery: time.Duration(c.lastRecovery.Load()),
		Skips: c.skips.Load(), LostSeqs: c.lost.Load(),
	}
	if l := c.loopNow(); l != nil {
		s.Receiver, s.Loop = l.ReceiverStats(), l.Stats()
	}
	if cl := c.client(); cl != nil {
		s.Replay = cl.Stats()
	}
	return s
}

func (c *Consumer) loopNow() *Loop         { return c.loopP.Load() }
func (c *Consumer) client() *replay.Client { return c.clP.Load() }

// Close releases the socket of a consumer whose Run was never called (Run
// closes it itself when it returns).
func (c *Consumer) Close() error {
	if c.ran.Swap(true) {
		return nil
	}
	return c.path.Close()
}

// Run consumes the stream, calling deliver for every record in seq
// order, exactly once, on the consumer's loop thread (one call at a
// time; never concurrently with OnEvent), until:
//   - ctx ends: Run returns ctx's error, after a clean stop;
//   - deliver returns an error: Run returns it (ErrStop: nil), and the
//     record is applied only for ErrStop;
//   - a catch-up exhausts its retry budget, the socket fails (a NAK that
//     cannot be sent included), or the producer restarted behind the tip
//     (ErrSenderBehind): Run returns that error.
//
// The tip file is written when Run returns. A Consumer runs once: a
// second Run returns ErrClosed.
func (c *Consumer) Run(ctx context.Context, deliver func(Record) error) error {
	if c.ran.Swap(true) {
		return ErrClosed
	}
	c.ctx, c.deliver = ctx, deliver
	defer func() {
		if c.loop == nil {
			c.path.Close()
		}
	}()
	var first []byte
	var firstFrom netip.AddrPort
	c.sender = c.cfg.From
	if !c.sender.IsValid() {
		if pp, ok := c.path.(interface{ Peer() netip.AddrPort }); ok {
			c.sender = pp.Peer()
		}
	}
	if !c.sender.IsValid() {
		var err error
		if first, firstFrom, err = c.awaitSender(ctx); err != nil {
			return err
		}
		c.sender = firstFrom
		c.event(ConsumerEvent{Kind: EventSenderFound, Sender: c.sender})
	}
	if !c.rcfg.Sender.IsValid() {
		c.rcfg.Sender = c.sender
	}
	r, err := protocol.NewReceiver(c.rcfg)
	if err != nil {
		return err
	}
	c.r = r
	if !c.cfg.NoCatchUp {
		rc, err := c.cfg.clientConfig(c.sender.String())
		if err != nil {
			return err
		}
		if c.cl, err = replay.NewClient(rc); err != nil {
			return cfgerr.Nest("cast", ErrConfig, "ReplayClient", err)
		}
		c.clP.Store(c.cl)
	}
	if !c.cfg.SkipBootstrap && !c.cfg.NoCatchUp {
		if err := c.bootstrap(ctx); err != nil {
			return err
		}
	} else if c.tip > 0 {
		c.r.ResetAfterReplay(c.tip)
	}
	slot := max(c.rcfg.MaxFrame, protocol.DefaultMaxFrame, 2048)
	c.loop, err = NewLoop(LoopConfig{
		Path: c.path, Receiver: c.r, Thread: c.cfg.Thread, Idle: c.cfg.Idle, KeepGOMAXPROCS: c.cfg.KeepGOMAXPROCS,
		Slot: slot, OnRecord: c.onRecord, OnEvent: c.onLoopEvent, OnPoll: c.onPoll, Source: c.sender,
	})
	if err != nil {
		return err
	}
	c.loopP.Store(c.loop)
	if first != nil && firstFrom == c.sender {
		c.loop.Feed(first, firstFrom)
	}
	c.event(ConsumerEvent{Kind: EventLive})
	stopPersist := c.persister()
	if err := c.loop.Start(); err != nil {
		stopPersist()
		c.loop.Close()
		return err
	}
	stopCtx := context.AfterFunc(ctx, func() { c.loop.stop.Store(true) })
	<-c.loop.Done()
	stopCtx()
	lerr := c.loop.Close()
	stopPersist()
	switch {
	case c.err == ErrStop:
		return nil
	case c.err != nil:
		return c.err
	case ctx.Err() != nil:
		return ctx.Err()
	case lerr != nil:
		return fmt.Errorf("cast: consumer: %w", lerr)
	}
	return nil
}

// awaitSender reads the socket until a datagram holding a valid frame
// (CRC checked) of a type a producer sends arrives, and returns a copy of
// it with its source: the producer. Until then nothing is delivered, and
// nothing else is kept.
func (c *Consumer) awaitSender(ctx context.Context) ([]byte, netip.AddrPort, error) {
	v := batch.New(16, max(c.rcfg.MaxFrame, protocol.DefaultMaxFrame, 2048))
	waiter, _ := c.path.(Waiter)
	var idle affinity.Idler
	idle.Strategy = affinity.Backoff
	for {
		if err := ctx.Err(); err != nil {
			return nil, netip.AddrPort{}, err
		}
		var n int
		var err error
		if waiter != nil {
			n, err = waiter.RecvWait(v, time.Now().Add(50*time.Millisecond))
		} else {
			n, err = c.path.Recv(v)
		}
		if err != nil {
			return nil, netip.AddrPort{}, fmt.Errorf("cast: consumer: waiting for the producer: %w", err)
		}
		for i := 0; i < n; i++ {
			d, from := v.Msg(i)
			if h, _, _, err := wal.DecodeFrame(d); err == nil && h.Type != wal.TypeNak && h.Type != protocol.TypeStatus && from.IsValid() {
				return append([]byte(nil), d...), from, nil
			}
		}
		if n == 0 {
			idle.Idle()
		} else {
			idle.Reset()
		}
	}
}

func (c *Consumer) event(e ConsumerEvent) {
	if c.cfg.OnEvent != nil {
		e.Tip = c.tip
		c.cfg.OnEvent(e)
	}
}

// apply hands one record to the application if it is the next one.
// Records at or below the tip are duplicates (a catch-up overlapping
// UDP) and are dropped; anything else out of order is a bug below.
func (c *Consumer) apply(h wal.Header, p []byte) (bool, error) {
	seq := wal.Seq(p)
	if seq <= c.tip {
		return false, nil
	}
	if h.Type == wal.TypeSkip {
		return c.applySkip(h, p)
	}
	if seq != c.tip+1 && c.tip != 0 {
		return false, fmt.Errorf("%w: %d after %d", errOrder, seq, c.tip)
	}
	err := c.deliver(Record{Seq: seq, Type: h.Type, CRC: h.CRC, Payload: p})
	if err != nil && err != ErrStop {
		return false, err
	}
	c.setTip(seq, h.CRC)
	return true, err
}

func (c *Consumer) setTip(seq uint64, crc uint32) {
	c.tip, c.tipCRC, c.crcKnow = seq, crc, true
	c.tipNow.Store(seq)
	if c.cl != nil {
		c.cl.SetTip(seq)
	}
}

// applySkip applies a Skip marker: it reports the seqs of its range this
// consumer delivered (EventSkipped), hands the marker to deliver and moves
// the tip to it.
func (c *Consumer) applySkip(h wal.Header, p []byte) (bool, error) {
	sk, err := wal.ParseSkip(p)
	if err != nil {
		return false, fmt.Errorf("%w: bad Skip marker: %w", errOrder, err)
	}
	if c.tip != 0 && sk.From > c.tip+1 {
		return false, fmt.Errorf("%w: Skip %d…%d after %d", errOrder, sk.From, sk.Seq, c.tip)
	}
	ev := ConsumerEvent{Kind: EventSkipped, Skip: sk}
	if from, to, ok := sk.Lost(c.tip); ok {
		ev.LostFrom, ev.LostTo = from, to
		c.lost.Add(to - from + 1)
	}
	c.skips.Add(1)
	c.event(ev)
	err = c.deliver(Record{Seq: sk.Seq, Type: h.Type, CRC: h.CRC, Payload: p})
	if err != nil && err != ErrStop {
		return false, err
	}
	c.setTip(sk.Seq, h.CRC)
	return true, err
}

// onRecord is the loop's OnRecord: a record the UDP receiver delivered.
func (c *Consumer) onRecord(l *Loop, h wal.Header, p []byte) {
	if c.err != nil {
		return
	}
	ok, err := c.apply(h, p)
	if err != nil {
		c.fail(err)
		return
	}
	if ok {
		c.udpRecords.Add(1)
	}
}

func (c *Consumer) tcpRecord(h wal.Header, p []byte) error {
	ok, err := c.apply(h, p)
	if ok {
		c.tcpRecords.Add(1)
	}
	if err == ErrStop {
		c.fail(err)
		return replay.ErrStop
	}
	return err
}

// fail records the error that ends Run and stops the loop.
func (c *Consumer) fail(err error) {
	if c.err == nil {
		c.err = err
	}
	if c.loop != nil {
		c.loop.stop.Store(true)
	}
}

// onLoopEvent turns the loop's silence events into consumer events; the
// sticky outcomes are handled in onPoll, a datapath error by Run.
func (c *Consumer) onLoopEvent(e Event) {
	switch e.Kind {
	case EventPeerSilent:
		c.event(ConsumerEvent{Kind: EventProducerSilent})
	case EventPeerHeard:
		c.event(ConsumerEvent{Kind: EventProducerHeard})
	case EventLateStart:
		c.event(ConsumerEvent{Kind: EventStartedLate, From: e.Seq})
	}
}

// onPoll runs on the loop thread every iteration: a sticky outcome is
// handled here, on the same thread as the receiver, so the catch-up and
// the reset need no hand-off (the receiver drops its input meanwhile and
// the kernel buffers what arrives).
func (c *Consumer) onPoll(l *Loop, now int64) {
	if c.err != nil {
		l.stop.Store(true)
		return
	}
	if o := c.r.Outcome(); o.Kind != protocol.Live {
		if err := c.escalate(o, now); err != nil {
			c.fail(err)
		}
	}
}

// bootstrap catches up before going live. An empty stream (every
// endpoint answers NotAvailable while the tip is 0) goes live at seq 1.
func (c *Consumer) bootstrap(ctx context.Context) error {
	start := time.Now()
	from := c.tip + 1
	tcp0 := c.tcpRecords.Load()
	c.event(ConsumerEvent{Kind: EventCatchingUp, Bootstrap: true, From: from})
	tip, err := c.cl.CatchUpOnce(ctx, c.tcpRecord)
	if err != nil && ctx.Err() == nil && c.err == nil && !(errors.Is(err, replay.ErrNotAvailable) && c.tip == 0) {
		tip, err = c.cl.CatchUp(ctx, c.tcpRecord)
	} else if err != nil && ctx.Err() == nil && c.err == nil {
		err = nil // empty stream: nothing to catch up
	}
	if c.err != nil {
		if c.err == ErrStop {
			return nil
		}
		return c.err
	}
	if err != nil {
		return fmt.Errorf("cast: consumer bootstrap: %w", err)
	}
	c.catchUps.Add(1)
	c.event(ConsumerEvent{Kind: EventCaughtUp, Bootstrap: true, From: from, To: tip, Records: c.tcpRecords.Load() - tcp0, Duration: time.Since(start)})
	c.r.ResetAfterReplay(c.tip)
	return nil
}

// escalate handles a sticky outcome: catch up over TCP from the tip,
// reset the receiver to the new tip, resume.
func (c *Consumer) escalate(o protocol.Outcome, now int64) error {
	start := time.Now()
	c.escalations.Add(1)
	c.event(ConsumerEvent{Kind: EventEscalated, Outcome: o})
	if c.cl == nil {
		return fmt.Errorf("cast: consumer (no catch-up): %w", o.Err())
	}
	switch o.Kind {
	case protocol.Faulted:
		c.faults.Add(1)
	case protocol.Reconnect:
		c.reconnects.Add(1)
	case protocol.SenderRestarted:
		// A producer with a WAL continues its seqs after a restart. A
		// heartbeat below our tip is either stale (sent before a catch-up
		// moved the tip, read after the reset) or a producer that lost
		// records we delivered. Ask it for our tip record.
		same, err := c.cl.Verify(c.ctx, c.tip, c.tipCRC, c.crcKnow, c.verifyWait())
		if err != nil {
			return fmt.Errorf("cast: consumer verifying tip %d after %v: %w", c.tip, o.Kind, err)
		}
		if !same {
			return fmt.Errorf("%w: %w", ErrSenderBehind, o.Err())
		}
		c.stale.Add(1)
		c.r.ResetAfterReplay(c.tip)
		c.event(ConsumerEvent{Kind: EventLive})
		return nil
	}
	from := c.tip + 1
	tcp0 := c.tcpRecords.Load()
	c.cl.SetTip(c.tip)
	c.event(ConsumerEvent{Kind: EventCatchingUp, From: from, Outcome: o})
	target := max(c.r.HighestSeen(), o.Seq, o.GapEnd)
	if _, err := c.cl.CatchUpTo(c.ctx, target, c.grace(), c.tcpRecord); err != nil && c.err == nil {
		return fmt.Errorf("cast: consumer catch-up after %v: %w", o.Kind, err)
	}
	if c.err != nil {
		return c.err
	}
	d := time.Since(start)
	c.catchUps.Add(1)
	c.lastRecovery.Store(int64(d))
	c.event(ConsumerEvent{Kind: EventCaughtUp, From: from, To: c.tip, Records: c.tcpRecords.Load() - tcp0, Duration: d})
	c.r.ResetAfterReplay(c.tip)
	c.event(ConsumerEvent{Kind: EventLive})
	return nil
}

func (c *Consumer) verifyWait() time.Duration {
	if c.cfg.VerifyWait == 0 {
		return defaultVerifyWait
	}
	return c.cfg.VerifyWait
}

func (c *Consumer) grace() time.Duration {
	switch {
	case c.cfg.CatchUpGrace == 0:
		return defaultCatchUpGrace
	case c.cfg.CatchUpGrace < 0:
		return 0
	}
	return c.cfg.CatchUpGrace
}

// persister writes the tip file while Run runs (at most every
// TipInterval, off the loop thread) and once more when it stops.
func (c *Consumer) persister() (stop func()) {
	if c.cl == nil {
		return func() {}
	}
	return c.cl.StartPersister()
}
