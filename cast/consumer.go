package cast

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/internal/cfgerr"
	"github.com/walcast/walcast/replay"
	"github.com/walcast/walcast/wire"
)

// Record is one record delivered to a Consumer's callback. Payload is
// valid only during the call; its first 8 bytes are Seq.
type Record struct {
	Seq     uint64
	Type    uint16
	CRC     uint32 // the payload's CRC-32C, as the frame header carried it (checked)
	Payload []byte
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
	keys  atomic.Pointer[Keys] // the latest SetKeys (nil: cfg.Keys)
	clP   atomic.Pointer[replay.Client]

	ctx     context.Context
	deliver func(Record) error
	err     error            // ends Run (loop thread, then read after the loop stopped)
	sticky  protocol.Outcome // the receiver's sticky outcome, from its event, until onPoll handles it
	tip     uint64
	udpN    uint64 // records delivered from UDP (udpRecords publishes it)
	tipPub  uint64 // tip as last published to tipNow and the replay client
	tipCRC  uint32 // payload CRC of the tip record
	crcKnow bool   // tipCRC is set (false for a tip loaded from the file)
	sender  netip.AddrPort

	udpRecords, tcpRecords, escalations, faults, reconnects, catchUps, stale, skips, lost atomic.Uint64
	lastRecovery                                                                          atomic.Int64
	tipNow                                                                                atomic.Uint64

	// awaitAuth counts what a keyed consumer refused while it waited for
	// its producer (awaitSender: before its loop exists); Stats adds it to
	// the loop's.
	awaitAuth struct {
		mu sync.Mutex
		s  AuthStats
	}
}

// NewConsumer checks cfg and opens the UDP socket (or takes cfg.Path);
// Addr then reports where the producer must send. Nothing is received
// before Run.
func NewConsumer(cfg ConsumerConfig) (*Consumer, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	c := &Consumer{cfg: cfg, rcfg: cfg.Advanced.Receiver.Config(), tip: cfg.Advanced.StartTip}
	c.tipNow.Store(cfg.Advanced.StartTip)
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

// Tip is the last seq delivered (or loaded from the tip file). While Run
// runs it may lag the deliver callback by one loop iteration.
func (c *Consumer) Tip() uint64 { return c.tipNow.Load() }

// Stats returns the counters. Safe to call while Run runs (the tip and
// UDPRecords may lag by one loop iteration); exact after.
func (c *Consumer) Stats() ConsumerStats {
	s := ConsumerStats{
		Tip: c.tipNow.Load(), UDPRecords: c.udpRecords.Load(), TCPRecords: c.tcpRecords.Load(),
		Escalations: c.escalations.Load(), Faults: c.faults.Load(), Reconnects: c.reconnects.Load(),
		CatchUps: c.catchUps.Load(), StaleRestarts: c.stale.Load(), LastRecovery: time.Duration(c.lastRecovery.Load()),
		Skips: c.skips.Load(), LostSeqs: c.lost.Load(),
	}
	c.awaitAuth.mu.Lock()
	s.Auth = c.awaitAuth.s
	c.awaitAuth.mu.Unlock()
	if l := c.loopNow(); l != nil {
		s.Receiver, s.Loop = l.ReceiverStats(), l.Stats()
		s.Auth = s.Auth.plus(l.AuthStats())
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
//   - the producer ended the stream (Producer.End) and every record up
//     to its end was delivered (EventEnded): Run returns nil;
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
	var first [][]byte
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
		c.event(Event{Kind: EventSenderFound, Sender: c.sender})
	}
	c.rcfg.Sender = c.cfg.Advanced.Control
	if !c.rcfg.Sender.IsValid() {
		c.rcfg.Sender = c.sender
	}
	c.rcfg.StartNow = c.cfg.Advanced.StartNow && c.tip == 0 // no tip: nothing to resume after
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
			return cfgerr.Nest("cast", ErrConfig, "Advanced.ReplayClient", err)
		}
		c.clP.Store(c.cl)
	}
	if !c.cfg.Advanced.SkipBootstrap && !c.cfg.NoCatchUp && !c.rcfg.StartNow {
		if err := c.bootstrap(ctx); err != nil {
			return err
		}
		if c.err == ErrStop { // deliver stopped during the catch-up: never go live
			return nil
		}
	} else if c.tip > 0 {
		c.r.ResetAfterReplay(c.tip)
	}
	slot := max(c.rcfg.MaxFrame, protocol.DefaultMaxFrame, 2048)
	c.loop, err = NewLoop(LoopConfig{
		Path: c.path, Receiver: c.r, Thread: c.cfg.Thread, Idle: c.cfg.Idle, Shared: c.cfg.Advanced.Shared, RaiseGOMAXPROCS: c.cfg.Advanced.RaiseGOMAXPROCS, Batch: c.cfg.Advanced.Batch,
		Slot: slot, OnRecord: c.onRecord, OnEvent: c.onLoopEvent, OnPoll: c.onPoll, Source: c.sender, Keys: c.currentKeys(),
		Counters: c.cfg.Advanced.Counters.forStream(c.cfg.Stream),
	})
	if err != nil {
		return err
	}
	c.loopP.Store(c.loop)
	if k := c.keys.Load(); k != nil && c.cfg.Keys != nil {
		_ = c.loop.SetKeys(k) // SetKeys may have run between NewLoop and the Store
	}
	c.sampleCounters()
	if firstFrom == c.sender {
		for _, d := range first {
			c.loop.Feed(d, firstFrom)
		}
	}
	c.event(Event{Kind: EventLive})
	stopPersist := c.persister()
	if err := c.loop.Start(); err != nil {
		stopPersist()
		c.loop.Close()
		return err
	}
	stopCtx := context.AfterFunc(ctx, func() { c.loop.Stop() })
	<-c.loop.Done()
	c.publish()
	stopCtx()
	lerr := c.loop.Close()
	stopPersist()
	switch {
	case c.err == ErrStop, c.err == errEnded:
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

// awaitSender waits for the producer's first frame (AwaitSender) and
// returns copies of that datagram and of every later one of the same
// read from the same source, with that source: the producer. Until then
// nothing is delivered, and nothing from elsewhere is kept.
func (c *Consumer) awaitSender(ctx context.Context) ([][]byte, netip.AddrPort, error) {
	var open func([]byte, netip.AddrPort) (int, error) // with keys: only an authenticated datagram names the producer
	if c.cfg.Keys != nil {
		applied := c.currentKeys()
		op, err := wire.NewOpener(applied.all()...)
		if err != nil {
			return nil, netip.AddrPort{}, err
		}
		var warned [4]uint64 // key ids reported by EventKeyUnknown
		open = func(d []byte, from netip.AddrPort) (int, error) {
			if k := c.currentKeys(); k != applied && op.SetKeys(k.all()...) == nil {
				applied = k // SetKeys while the consumer waits for its producer
			}
			n, err := op.Open(d, from)
			if err != nil {
				c.awaitAuth.mu.Lock()
				c.awaitAuth.s.refuse(err)
				c.awaitAuth.mu.Unlock()
			}
			if errors.Is(err, wire.ErrAuthKeyID) {
				if id := d[len(d)-wire.TrailerSize+16]; warned[id/64]&(1<<(id%64)) == 0 {
					warned[id/64] |= 1 << (id % 64)
					c.event(Event{Kind: EventKeyUnknown,
						Err: fmt.Errorf("%w: a datagram is tagged with key id %d, which this consumer does not hold", ErrKeyFile, id)})
				}
			}
			return n, err
		}
	}
	v, from, _, err := AwaitSender(ctx, c.path, max(c.rcfg.MaxFrame, protocol.DefaultMaxFrame, 2048), open)
	switch {
	case ctx.Err() != nil:
		return nil, netip.AddrPort{}, ctx.Err()
	case err != nil:
		return nil, netip.AddrPort{}, fmt.Errorf("cast: consumer: waiting for the producer: %w", err)
	}
	var ds [][]byte
	for i := 0; i < v.Len(); i++ {
		if d, f := v.Msg(i); f == from {
			ds = append(ds, append([]byte(nil), d...))
		}
	}
	return ds, from, nil
}

func (c *Consumer) event(e Event) {
	if c.cfg.OnEvent != nil {
		e.Tip = c.tip
		if e.At == 0 && c.loop != nil {
			e.At = c.loop.Now()
		}
		c.cfg.OnEvent(e)
	}
}

// apply hands one record to the application if it is the next one.
// Records at or below the tip are duplicates (a catch-up overlapping
// UDP) and are dropped; anything else out of order is a bug below.
func (c *Consumer) apply(h wire.Header, p []byte) (bool, error) {
	seq := wire.Seq(p)
	if seq <= c.tip {
		return false, nil
	}
	if h.Type == wire.TypeSkip {
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

// setTip moves the tip; publish makes it visible to other goroutines.
func (c *Consumer) setTip(seq uint64, crc uint32) {
	c.tip, c.tipCRC, c.crcKnow = seq, crc, true
}

// publish hands the tip and the UDP record count to other goroutines
// (Tip, Stats, the replay client and its tip file): after every TCP
// record and once per loop iteration, not per UDP record (atomic stores
// on every record were a measurable part of the receiver's cost).
func (c *Consumer) publish() {
	if c.tip != c.tipPub {
		c.tipPub = c.tip
		c.tipNow.Store(c.tip)
		if c.cl != nil {
			c.cl.SetTip(c.tip)
		}
	}
	if c.udpN != c.udpRecords.Load() {
		c.udpRecords.Store(c.udpN)
	}
}

// applySkip applies a Skip marker: it reports the seqs of its range this
// consumer delivered (EventSkip), hands the marker to deliver and moves
// the tip to it.
func (c *Consumer) applySkip(h wire.Header, p []byte) (bool, error) {
	sk, err := wire.ParseSkip(p)
	if err != nil {
		return false, fmt.Errorf("%w: bad Skip marker: %w", errOrder, err)
	}
	if c.tip != 0 && sk.From > c.tip+1 {
		return false, fmt.Errorf("%w: Skip %d…%d after %d", errOrder, sk.From, sk.Seq, c.tip)
	}
	ev := Event{Kind: EventSkip, Skip: protocol.SkipNotice{Skip: sk}}
	if from, to, ok := sk.Lost(c.tip); ok {
		ev.Skip.LostFrom, ev.Skip.LostTo = from, to
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
func (c *Consumer) onRecord(l *Loop, h wire.Header, p []byte) {
	if c.err != nil {
		return
	}
	ok, err := c.apply(h, p)
	if err != nil {
		c.fail(err)
		return
	}
	if ok {
		c.udpN++
	}
}

func (c *Consumer) tcpRecord(h wire.Header, p []byte) error {
	ok, err := c.apply(h, p)
	if ok {
		c.tcpRecords.Add(1)
		c.publish()
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
		c.loop.Stop()
	}
}

// onLoopEvent passes the loop's outcome, silence, late-start and end
// events on. A sticky outcome is handled in onPoll, not here: the event
// may come from within the receiver's input processing. Skip markers are
// reported by applySkip (a catch-up delivers them too), a datapath error
// by Run.
func (c *Consumer) onLoopEvent(e Event) {
	switch e.Kind {
	case EventFaulted, EventReconnect, EventSenderRestarted:
		c.sticky = e.Outcome
		e.Handled = c.cl != nil
		c.event(e)
	case EventPeerSilent, EventPeerHeard, EventLateStart:
		c.event(e)
	case EventEnded:
		c.event(e)
		c.fail(errEnded)
	}
}
