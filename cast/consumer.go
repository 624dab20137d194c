package cast

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/replay"
	"github.com/walcast/walcast/wal"
)

// ConsumerConfig configures a [Consumer]. Start from
// [DefaultConsumerConfig] and fill in Replay's endpoints, stream and TLS.
type ConsumerConfig struct {
	// Receiver configures the UDP receiver (NAK target, windows, budgets).
	Receiver protocol.ReceiverConfig
	// Replay configures the TCP catch-up client: endpoints in order, the
	// stream id, TLS, and the tip file (TipPath) that makes a restarted
	// consumer resume at tip+1.
	Replay replay.ClientConfig
	// Bootstrap catches up over TCP before going live (pattern A of the
	// spec). Off: the receiver starts at tip+1 if a tip is known, else at
	// Receiver.Start (seq 1 by default: a stream already a reorder window
	// ahead escalates to a catch-up; Receiver.StartNow: the first record
	// it hears).
	Bootstrap bool
	// Batch is the number of datagrams read per Recv.
	Batch int
	// IdleSleep is how long the loop sleeps when the path had nothing to
	// read. 0 busy-polls (yielding the processor between polls).
	IdleSleep time.Duration
	// VerifyWait bounds the check made on SenderRestarted: whether the
	// producer's WAL still holds the consumer's last record (same CRC).
	// A record not yet durable on a live sender appears within a flush
	// interval; a lost one never does.
	VerifyWait time.Duration
	// CatchUpGrace: a catch-up continues past the server's CaughtUp, on
	// the live tail, until the tip reaches the highest seq the receiver
	// knows of (so records the producer had not yet made durable do not
	// cause a second escalation), for at most this long.
	CatchUpGrace time.Duration
	// Clock returns monotonic ns; nil uses the process's monotonic clock.
	// Tests on datapath/mem pass the network's clock.
	Clock func() int64
	// OnEvent, when set, is called on the Run goroutine for each
	// escalation, catch-up and resume. It must not block.
	OnEvent func(ConsumerEvent)
}

// DefaultConsumerConfig returns the receiver and replay defaults,
// bootstrap on, batches of 64 datagrams and a 50 µs idle sleep.
func DefaultConsumerConfig() ConsumerConfig {
	return ConsumerConfig{
		Receiver:     protocol.DefaultReceiverConfig(),
		Replay:       replay.DefaultClientConfig(),
		Bootstrap:    true,
		Batch:        64,
		IdleSleep:    50 * time.Microsecond,
		VerifyWait:   time.Second,
		CatchUpGrace: 200 * time.Millisecond,
	}
}

// Validate reports the first nonsensical field.
func (c ConsumerConfig) Validate() error {
	if err := c.Receiver.Validate(); err != nil {
		return err
	}
	if err := c.Replay.Validate(); err != nil {
		return fmt.Errorf("%w: %w", protocol.ErrConfig, err)
	}
	if c.Batch < 1 {
		return fmt.Errorf("%w: Batch %d must be ≥ 1", protocol.ErrConfig, c.Batch)
	}
	if c.CatchUpGrace < 0 {
		return fmt.Errorf("%w: CatchUpGrace %v must be ≥ 0", protocol.ErrConfig, c.CatchUpGrace)
	}
	if c.VerifyWait <= 0 {
		return fmt.Errorf("%w: VerifyWait %v must be > 0", protocol.ErrConfig, c.VerifyWait)
	}
	if c.IdleSleep < 0 {
		return fmt.Errorf("%w: IdleSleep %v must be ≥ 0", protocol.ErrConfig, c.IdleSleep)
	}
	return nil
}

// ConsumerEventKind names a consumer event.
type ConsumerEventKind uint8

// Consumer events.
const (
	// EventEscalated: the receiver raised a sticky outcome (Outcome set);
	// a TCP catch-up follows.
	EventEscalated ConsumerEventKind = iota + 1
	// EventCaughtUp: a TCP catch-up finished (From, To, Records,
	// Duration set; Bootstrap for the initial one).
	EventCaughtUp
	// EventResumed: the receiver was reset to the tip; UDP delivery
	// resumes at Tip+1.
	EventResumed
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

func (k ConsumerEventKind) String() string {
	switch k {
	case EventEscalated:
		return "escalated"
	case EventCaughtUp:
		return "caught-up"
	case EventResumed:
		return "resumed"
	case EventSkipped:
		return "skipped"
	}
	return "unknown"
}

// ConsumerEvent is one consumer event.
type ConsumerEvent struct {
	Kind      ConsumerEventKind
	Outcome   protocol.Outcome // for EventEscalated
	Bootstrap bool
	Tip       uint64
	From, To  uint64        // seqs delivered by the catch-up (From > To: none)
	Records   uint64        // records the catch-up delivered
	Duration  time.Duration // escalation (or bootstrap start) to caught up
	Skip      wal.Skip      // for EventSkipped
	// LostFrom…LostTo are, for EventSkipped, the seqs this consumer delivered
	// that the Skip stands for (0, 0: none).
	LostFrom, LostTo uint64
}

// ConsumerStats are a [Consumer]'s counters.
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
	// catch-up, read after ResetAfterReplay.
	StaleRestarts uint64
	LastRecovery  time.Duration
	Receiver      protocol.ReceiverStats // as of the last Stats call on the loop
	Replay        replay.ClientStats
}

// ErrSenderBehind: the sender's heartbeat announced a highest seq below
// the consumer's tip — it restarted and lost records this consumer had
// already delivered (sent over UDP before they were durable). The
// consumer cannot make its history agree with the sender's by itself;
// Run returns this error (wrapping ErrSenderRestarted) and the
// application decides.
var ErrSenderBehind = errors.New("cast: sender restarted behind the consumer's tip")

// errOrder means a record reached the consumer out of order: a bug in a
// lower layer, never the network's doing.
var errOrder = errors.New("cast: consumer got a record out of order")

// Consumer is the live+catch-up pattern the reference leaves to every
// application: it receives the stream over UDP through a [Receiver]; when
// the receiver raises Faulted or Reconnect it catches up over TCP replay
// from its tip, calls ResetAfterReplay and resumes UDP. Every record
// reaches the one callback exactly once, in seq order, across the
// switches; the tip file is kept (at most every Replay.TipInterval and
// when Run returns), so a restarted consumer resumes at tip+1.
//
// Unlike the sans-I/O core, a Consumer drives I/O: it reads its
// datapath, sends NAKs, dials TCP and starts a goroutine that writes the
// tip file.
type Consumer struct {
	cfg   ConsumerConfig
	path  datapath.Path
	r     *protocol.Receiver
	cl    *replay.Client
	clock func() int64

	in, out *batch.Vec

	deliver   func(h wal.Header, payload []byte) error
	udpFn     func(h wal.Header, payload []byte)
	tip       uint64
	tipCRC    uint32 // payload CRC of the tip record
	crcKnown  bool   // tipCRC is set (false for a tip loaded from the file)
	appErr    error
	statsMu   sync.Mutex
	recvStats protocol.ReceiverStats

	udpRecords, tcpRecords, escalations, faults, reconnects, catchUps, stale, skips, lost atomic.Uint64
	lastRecovery                                                                          atomic.Int64
}

// NewConsumer builds a consumer reading the stream from path (bound to
// the receiving address; NAKs go to cfg.Receiver.Sender). It loads the
// tip from cfg.Replay.TipPath.
func NewConsumer(cfg ConsumerConfig, path datapath.Path) (*Consumer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r, err := protocol.NewReceiver(cfg.Receiver)
	if err != nil {
		return nil, err
	}
	cl, err := replay.NewClient(cfg.Replay)
	if err != nil {
		return nil, err
	}
	c := &Consumer{cfg: cfg, path: path, r: r, cl: cl, clock: cfg.Clock, tip: cl.Tip()}
	if c.clock == nil {
		start := time.Now()
		c.clock = func() int64 { return int64(time.Since(start)) + 1 }
	}
	slot := max(cfg.Receiver.MaxFrame, 2048)
	c.in = batch.New(cfg.Batch, slot)
	c.out = batch.New(cfg.Batch, wal.ControlFrameSize)
	c.udpFn = c.udpRecord
	return c, nil
}

// Tip is the last seq delivered (or loaded from the tip file).
func (c *Consumer) Tip() uint64 { return c.cl.Tip() }

// Stats returns a snapshot of the counters. Safe to call while Run runs.
func (c *Consumer) Stats() ConsumerStats {
	c.statsMu.Lock()
	rs := c.recvStats
	c.statsMu.Unlock()
	return ConsumerStats{
		Tip: c.cl.Tip(), UDPRecords: c.udpRecords.Load(), TCPRecords: c.tcpRecords.Load(),
		Escalations: c.escalations.Load(), Faults: c.faults.Load(), Reconnects: c.reconnects.Load(),
		CatchUps: c.catchUps.Load(), StaleRestarts: c.stale.Load(), LastRecovery: time.Duration(c.lastRecovery.Load()),
		Skips: c.skips.Load(), LostSeqs: c.lost.Load(),
		Receiver: rs, Replay: c.cl.Stats(),
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
	if err := c.deliver(h, p); err != nil {
		return false, err
	}
	c.tip, c.tipCRC, c.crcKnown = seq, h.CRC, true
	c.cl.SetTip(seq)
	return true, nil
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
	if err := c.deliver(h, p); err != nil {
		return false, err
	}
	c.tip, c.tipCRC, c.crcKnown = sk.Seq, h.CRC, true
	c.cl.SetTip(sk.Seq)
	return true, nil
}

func (c *Consumer) udpRecord(h wal.Header, p []byte) {
	if c.appErr != nil {
		return
	}
	ok, err := c.apply(h, p)
	if err != nil {
		c.appErr = err
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
	return err
}

// Run consumes the stream until ctx ends (returning ctx's error), deliver
// returns an error (returned as is; that record is not applied), the
// path fails, a catch-up exhausts its retry budget, or the sender
// restarts behind the tip (ErrSenderBehind). deliver gets each record's
// header and payload (valid only during the call) in seq order, exactly
// once. Run must not be called concurrently with itself.
func (c *Consumer) Run(ctx context.Context, deliver func(h wal.Header, payload []byte) error) error {
	c.deliver = deliver
	c.appErr = nil
	c.tip = c.cl.Tip()
	stopPersist := c.persistLoop()
	defer stopPersist()

	if c.cfg.Bootstrap {
		if err := c.bootstrap(ctx); err != nil {
			return err
		}
	} else if c.tip > 0 {
		c.r.ResetAfterReplay(c.tip)
	}
	idle := 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := c.path.Recv(c.in)
		if err != nil {
			return fmt.Errorf("cast: consumer receive: %w", err)
		}
		now := c.clock()
		for i := 0; i < n; i++ {
			b, _ := c.in.Msg(i)
			if c.out.Full() {
				c.flush()
			}
			c.r.Handle(b, now, c.out, c.udpFn)
			if c.appErr != nil {
				return c.appErr
			}
		}
		c.r.Tick(now, c.out)
		c.flush()
		if o := c.r.Outcome(); o.Kind != protocol.Live {
			if err := c.escalate(ctx, o, now); err != nil {
				return err
			}
		}
		if n == 0 {
			idle++
			if idle&63 == 0 {
				c.snapshot()
			}
			if c.cfg.IdleSleep > 0 {
				time.Sleep(c.cfg.IdleSleep)
			} else {
				runtime.Gosched()
			}
		} else {
			idle = 0
		}
	}
}

func (c *Consumer) snapshot() {
	c.statsMu.Lock()
	c.recvStats = c.r.Stats()
	c.statsMu.Unlock()
}

func (c *Consumer) flush() {
	if c.out.Len() > 0 {
		_, _ = c.path.Send(c.out) // NAKs are best effort; the pump re-sends
		c.out.Reset()
	}
}

// bootstrap catches up before going live. An empty stream (every
// endpoint answers NotAvailable while the tip is 0) goes live at seq 1.
func (c *Consumer) bootstrap(ctx context.Context) error {
	start := c.clock()
	from := c.tip + 1
	tcp0 := c.tcpRecords.Load()
	tip, err := c.cl.CatchUpOnce(ctx, c.tcpRecord)
	if err != nil && ctx.Err() == nil && !(errors.Is(err, replay.ErrNotAvailable) && c.tip == 0) {
		tip, err = c.cl.CatchUp(ctx, c.tcpRecord)
	} else if err != nil && ctx.Err() == nil {
		err = nil // empty stream: nothing to catch up
	}
	if err != nil {
		return fmt.Errorf("cast: consumer bootstrap: %w", err)
	}
	c.catchUps.Add(1)
	c.event(ConsumerEvent{Kind: EventCaughtUp, Bootstrap: true, From: from, To: tip, Records: c.tcpRecords.Load() - tcp0, Duration: time.Duration(c.clock() - start)})
	c.r.ResetAfterReplay(c.tip)
	c.event(ConsumerEvent{Kind: EventResumed})
	return nil
}

// escalate handles a sticky outcome: catch up over TCP from the tip,
// reset the receiver to the new tip, resume.
func (c *Consumer) escalate(ctx context.Context, o protocol.Outcome, since int64) error {
	c.snapshot()
	c.escalations.Add(1)
	c.event(ConsumerEvent{Kind: EventEscalated, Outcome: o})
	switch o.Kind {
	case protocol.Faulted:
		c.faults.Add(1)
	case protocol.Reconnect:
		c.reconnects.Add(1)
	case protocol.SenderRestarted:
		// A sender with a WAL continues its seqs after a restart (delta
		// 7). A heartbeat below our tip is either stale (sent before a
		// catch-up moved the tip, read after the reset) or a sender that
		// lost records we delivered. Ask the producer for our tip record.
		same, err := c.cl.Verify(ctx, c.tip, c.tipCRC, c.crcKnown, c.cfg.VerifyWait)
		if err != nil {
			return fmt.Errorf("cast: consumer verifying tip %d after %v: %w", c.tip, o.Kind, err)
		}
		if !same {
			return fmt.Errorf("%w: %w", ErrSenderBehind, o.Err())
		}
		c.stale.Add(1)
		c.r.ResetAfterReplay(c.tip)
		c.event(ConsumerEvent{Kind: EventResumed})
		return nil
	}
	from := c.tip + 1
	tcp0 := c.tcpRecords.Load()
	c.cl.SetTip(c.tip)
	target := max(c.r.HighestSeen(), o.Seq, o.GapEnd)
	if _, err := c.cl.CatchUpTo(ctx, target, c.cfg.CatchUpGrace, c.tcpRecord); err != nil {
		return fmt.Errorf("cast: consumer catch-up after %v: %w", o.Kind, err)
	}
	d := time.Duration(c.clock() - since)
	c.catchUps.Add(1)
	c.lastRecovery.Store(int64(d))
	c.event(ConsumerEvent{Kind: EventCaughtUp, From: from, To: c.tip, Records: c.tcpRecords.Load() - tcp0, Duration: d})
	c.r.ResetAfterReplay(c.tip)
	c.event(ConsumerEvent{Kind: EventResumed})
	return nil
}

// persistLoop writes the tip file at most every TipInterval while Run
// runs, off the receive loop, and once more when Run returns.
func (c *Consumer) persistLoop() (stop func()) {
	if c.cfg.Replay.TipPath == "" {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(c.cfg.Replay.TipInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = c.cl.PersistTip()
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
		_ = c.cl.PersistTip()
	}
}
