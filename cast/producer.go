package cast

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/internal/cfgerr"
	"github.com/walcast/walcast/replay"
	"github.com/walcast/walcast/wal"
	"github.com/walcast/walcast/wire"
)

// ProducerConfig configures a [Producer]. The zero value of every field
// means its default; To (or a connected Path) is the one field a
// producer needs.
type ProducerConfig struct {
	// To is where the stream goes: a consumer's UDP address, as its
	// Consumer.Addr reports it.
	To netip.AddrPort
	// Local is the UDP address to send from and receive NAKs on (default:
	// the unspecified address of To's family, on a free port).
	// Producer.Addr reports the address bound.
	Local netip.AddrPort
	// Keys, when set, authenticate every datagram (docs/auth.md): each
	// one sent is tagged, and only NAKs and Status frames tagged with one
	// of the keys are heard. The trailer takes 34 bytes of each datagram,
	// so the largest payload is 34 bytes smaller. Consumers need the same
	// keys; the WAL and the replay stream are unchanged.
	Keys *Keys
	// Dir is the root directory of the write-ahead log: every record is
	// appended to Dir/<Stream>/ before it is sent, retransmits of records
	// older than the hot ring are read back from it, and the replay
	// server serves catch-up from it. A restarted producer continues the
	// seqs where the log ends. Empty: no log — records live only in the
	// sender's hot ring (Advanced.Sender.RingSlots, 4096 by default), and a
	// consumer that falls further behind cannot catch up.
	Dir string
	// Stream is the stream id (default 0): the WAL's <sid> and what a
	// consumer asks the replay server for.
	Stream uint32
	// Replay serves TCP catch-up from the WAL on the UDP socket's address
	// and port (TCP and UDP ports are separate spaces), which is where a
	// consumer that learnt the producer's address looks for it. Needs
	// Dir, and TLS or Plaintext.
	Replay bool
	// ReplayAddr serves catch-up on this TCP address instead
	// ("host:port"; port 0 picks one). It implies Replay.
	ReplayAddr string
	// TLS is the replay server's TLS config (a certificate; TLS 1.3).
	// Required with Replay unless Plaintext. It must require and verify
	// client certificates (mutual TLS, as replay.ServerTLS with a client
	// CA makes it) unless Advanced.ReplayServer.AnyClient.
	TLS *tls.Config
	// Plaintext serves catch-up without TLS; it must be asked for.
	Plaintext bool
	// Path replaces the UDP socket: datapath/mmsg or datapath/xdp for
	// throughput, datapath/mem in tests. The Producer owns it and closes
	// it. Local is then ignored; To may be zero for a connected Path.
	Path datapath.Path
	// Thread pins the loop's OS thread (default: locked, unpinned).
	Thread affinity.Config
	// Idle is what the loop does when it found nothing to do (default:
	// spin, the lowest latency at the cost of one busy CPU; affinity.Park
	// sleeps on the socket until a datagram or the next 1 ms tick).
	Idle affinity.Idler
	// Advanced holds the settings most producers leave at their
	// defaults: queue and batch sizes, the loop's hook, and the tuning of
	// the log, the protocol sender and the replay server.
	Advanced ProducerAdvanced
}

// ProducerAdvanced is the part of a [ProducerConfig] most producers
// leave zero (every zero field means its default).
type ProducerAdvanced struct {
	// PublishSlots is the number of records Publish can queue for the
	// loop (default 4096; rounded up to a power of two).
	PublishSlots int
	// Batch is the most datagrams the loop sends in one call and
	// receives per poll (default 64).
	Batch int
	// RaiseGOMAXPROCS lets the loop raise GOMAXPROCS for its spinning
	// thread (see LoopConfig.RaiseGOMAXPROCS); by default it is left
	// alone.
	RaiseGOMAXPROCS bool
	// Shared runs the loop on a SharedThread, in turn with other loops
	// (a consumer's, say), instead of on a thread of its own: Thread is
	// then not applied and Idle must spin (LoopConfig.Shared).
	Shared *SharedThread
	// Counters publishes the producer's counters for `cast stat` (on by
	// default; Counters.Stream is set from Stream).
	Counters Counters
	// OnPoll, when set, is called on the loop thread once per iteration
	// with the loop's clock: a producer that lives inside the loop sends
	// there with l.Send (a paced benchmark, say), without the publish
	// queue. Flush and Close cover only what Publish accepted.
	OnPoll func(l *Loop, now int64)
	// WAL tunes the log (segment size, flush cadence, retention), when
	// ProducerConfig.Dir is set.
	WAL WALTuning
	// Sender tunes the protocol sender (hot ring, heartbeat, frame size,
	// flow control); where it sends is To. Flow control is on by
	// default: a consumer's Status frames bound how far the producer runs
	// ahead of it (its reorder window), so Publish waits for a slow
	// consumer instead of overrunning it, and a consumer silent for
	// ReceiverTimeout (1 s) or that said it is leaving no longer holds it
	// back. A consumer that never sends Status (the reference's) is not
	// waited for after the first InitialWait (1 s). NoFlowControl turns
	// it off.
	Sender SenderTuning
	// ReplayServer tunes the replay server, with Replay.
	ReplayServer ReplayServerTuning
}

func (c ProducerConfig) check() error {
	bad := func(field, f string, a ...any) error { return cfgerr.New("cast", ErrConfig, field, f, a...) }
	switch {
	case !c.To.IsValid() && c.Path == nil:
		return bad("To", "a producer needs a destination (a consumer's Addr) or a connected Path")
	case (c.Replay || c.ReplayAddr != "") && c.Dir == "":
		return bad("Replay", "catch-up is served from the WAL: set Dir")
	case c.Advanced.PublishSlots < 0:
		return bad("Advanced.PublishSlots", "%d is negative", c.Advanced.PublishSlots)
	}
	if err := c.Advanced.Sender.Config().Validate(); err != nil {
		return cfgerr.Nest("cast", ErrConfig, "Advanced.Sender", err)
	}
	if err := c.Thread.Validate(); err != nil {
		return cfgerr.Nest("cast", ErrConfig, "Thread", err)
	}
	if c.Replay || c.ReplayAddr != "" {
		sc := c.Advanced.ReplayServer.config(c.TLS, c.Plaintext)
		if err := sc.Validate(); err != nil {
			return cfgerr.Nest("cast", ErrConfig, "Advanced.ReplayServer", err)
		}
	}
	if c.Dir != "" {
		if err := c.Advanced.WAL.config(c.Dir, c.Stream).Validate(); err != nil {
			return cfgerr.Nest("cast", ErrConfig, "Advanced.WAL", err)
		}
	}
	return nil
}

// Producer publishes one stream: records are appended to the WAL (when
// Dir is set), sent over UDP by a protocol Sender on its own loop thread
// (pinned per Thread), retransmitted when a consumer NAKs them (from the
// hot ring, else from the WAL off the hot thread), and served over TCP
// to consumers that fall behind (with Replay). Publish, TryPublish,
// Flush and Close may be called from any goroutine.
type Producer struct {
	cfg   ProducerConfig
	w     *wal.Writer
	snd   *protocol.Sender
	path  datapath.Path
	loop  *Loop
	srv   *replay.Server
	ln    net.Listener
	srvWG sync.WaitGroup

	maxPayload int

	pubMu    sync.Mutex // one Publish at a time: the queue has one producer
	accepted atomic.Uint64
	closing  atomic.Bool
	ending   atomic.Bool   // End was called: Publish refuses records
	endReq   atomic.Bool   // End asks the loop thread to end the stream
	endDone  chan struct{} // closed by the loop thread once it did
	endSent  bool          // loop thread only

	userPoll  func(*Loop, int64)
	closeOnce sync.Once
	closeErr  error
}

// NewProducer opens the WAL, the UDP socket (or takes cfg.Path) and the
// replay listener, and starts the loop. Everything it opened is closed
// again when it fails.
func NewProducer(cfg ProducerConfig) (_ *Producer, err error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	p := &Producer{cfg: cfg, endDone: make(chan struct{}), userPoll: cfg.Advanced.OnPoll}
	defer func() {
		if err != nil {
			p.release()
		}
	}()
	if cfg.Dir != "" {
		if p.w, err = wal.Open(cfg.Advanced.WAL.config(cfg.Dir, cfg.Stream)); err != nil {
			return nil, fmt.Errorf("cast: producer: %w", err)
		}
	}
	path, err := p.openPath()
	if err != nil {
		return nil, err
	}
	p.path = path
	sc := cfg.Advanced.Sender.Config()
	if !connected(path) {
		sc.Dest = cfg.To
		if cfg.To.Addr().IsMulticast() {
			sc.AcceptAnyNakSource = true // NAKs come from the members, never from the group
		}
	}
	var log protocol.Log
	var cold ColdReader
	if p.w != nil {
		log, cold = p.w, p.w
	}
	mf := sc.MaxFrame
	if mf == 0 {
		mf = protocol.DefaultMaxFrame
	}
	slot := mf
	if cfg.Keys != nil {
		// MaxFrame stays the largest datagram sent: new records leave
		// room for the trailer. The loop's buffers hold MaxFrame bytes of
		// frames besides it, so that a record a run without keys wrote to
		// the log at the full MaxFrame can still be retransmitted (in a
		// datagram the trailer makes larger than MaxFrame).
		sc.MaxFrame = mf - wire.TrailerSize
		slot = min(mf+wire.TrailerSize, protocol.MaxDatagram)
	}
	if p.snd, err = protocol.NewSender(sc, log); err != nil {
		path.Close()
		return nil, err
	}
	p.maxPayload = min(p.snd.MaxFrame()-wire.HeaderSize, wire.MaxPayload)
	lc := LoopConfig{
		Path: path, Sender: p.snd, Cold: cold, Thread: cfg.Thread, Idle: cfg.Idle, Shared: cfg.Advanced.Shared,
		SendRing: cfg.Advanced.PublishSlots, RingSlot: p.maxPayload, Slot: slot, Batch: cfg.Advanced.Batch,
		RaiseGOMAXPROCS: cfg.Advanced.RaiseGOMAXPROCS, OnPoll: p.onPoll, Keys: cfg.Keys,
		Counters: cfg.Advanced.Counters.forStream(cfg.Stream),
	}
	if lc.SendRing == 0 {
		lc.SendRing = 4096
	}
	if p.loop, err = NewLoop(lc); err != nil {
		path.Close()
		return nil, err
	}
	if err := p.loop.Start(); err != nil {
		return nil, err
	}
	p.sampleCounters()
	return p, nil
}

// ProducerStats are a [Producer]'s counters (safe to read at any time;
// exact after Close).
type ProducerStats struct {
	Published uint64 // records Publish and TryPublish accepted
	Sent      uint64 // of those, records handed to the datapath
	// LastSeq is the seq of the last record sent (with a WAL, at first
	// the last seq of the log the producer reopened; 0: none).
	LastSeq uint64
	Durable uint64 // highest seq durable in the WAL (0 without one)
	Sender  protocol.SenderStats
	Loop    LoopStats
	Auth    AuthStats          // datagrams refused by authentication (with Keys; see docs/auth.md)
	WAL     wal.Stats          // zero without a WAL
	Replay  replay.ServerStats // zero without Replay
}

// Stats returns the counters.
func (p *Producer) Stats() ProducerStats {
	s := ProducerStats{Published: p.accepted.Load(), Sender: p.loop.SenderStats(), Loop: p.loop.Stats(), Auth: p.loop.AuthStats()}
	s.Sent, s.LastSeq = p.loop.Sent()
	if p.w != nil {
		s.Durable, s.WAL = p.w.Durable(), p.w.Stats()
	}
	if p.srv != nil {
		s.Replay = p.srv.Stats()
	}
	return s
}

// openPath opens the UDP socket (unless cfg.Path is given), connected to
// To when To is unicast, and with Replay the TCP listener on the same
// address and port: when that port is taken on TCP and the UDP port was
// the kernel's pick, it tries again with another.
func (p *Producer) openPath() (datapath.Path, error) {
	c := p.cfg
	serve := c.Replay || c.ReplayAddr != ""
	if c.Path != nil {
		if serve {
			addr := c.ReplayAddr
			if addr == "" {
				addr = c.Path.LocalAddr().String()
			}
			if err := p.listen(addr); err != nil {
				return nil, err
			}
		}
		return c.Path, nil
	}
	peer := c.To
	if peer.Addr().IsMulticast() {
		peer = netip.AddrPort{}
	}
	for try := 0; ; try++ {
		path, err := openUDP(c.Local, peer)
		if err != nil {
			return nil, fmt.Errorf("cast: producer: %w", err)
		}
		if !serve {
			return path, nil
		}
		addr := c.ReplayAddr
		if addr == "" {
			addr = path.LocalAddr().String()
		}
		err = p.listen(addr)
		if err == nil {
			return path, nil
		}
		path.Close()
		if c.ReplayAddr != "" || c.Local.Port() != 0 || try == 7 || !errors.Is(err, syscall.EADDRINUSE) {
			return nil, err
		}
	}
}

// listen starts the replay server on addr.
func (p *Producer) listen(addr string) error {
	sc := p.cfg.Advanced.ReplayServer.config(p.cfg.TLS, p.cfg.Plaintext)
	srv, err := replay.NewServer(sc, replay.NewWriterSource(p.w, p.cfg.Dir, p.cfg.Stream))
	if err != nil {
		return cfgerr.Nest("cast", ErrConfig, "Advanced.ReplayServer", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("cast: producer: replay listener: %w", err)
	}
	p.srv, p.ln = srv, ln
	p.srvWG.Add(1)
	go func() {
		defer p.srvWG.Done()
		_ = srv.Serve(ln) // returns when Close closes the listener
	}()
	return nil
}

// connected reports whether path sends to a fixed peer.
func connected(path datapath.Path) bool {
	pp, ok := path.(interface{ Peer() netip.AddrPort })
	return ok && pp.Peer().IsValid()
}

// Addr is the UDP address the producer sends from and takes NAKs on.
func (p *Producer) Addr() netip.AddrPort { return p.path.LocalAddr() }

// Events delivers the loop's events to one goroutine: receivers joining,
// leaving, faulting, stalling or going silent (the EventReceiver* kinds),
// the WAL failing and recovering (EventLogError, EventLogRecovered) and
// the loop stopping on a datapath error (EventError). Buffered; events
// beyond 64 unread are dropped.
func (p *Producer) Events() <-chan Event { return p.loop.Events() }

// Receivers returns the flow-control table: every receiver whose Status
// the sender heard and still waits for (at most a tick old).
func (p *Producer) Receivers() []protocol.ReceiverInfo { return p.loop.Receivers() }

// Done is closed when the loop has stopped: after Close, or on a
// datapath error (Err says which).
func (p *Producer) Done() <-chan struct{} { return p.loop.Done() }

// ReplayAddr is the TCP address the replay server listens on (zero
// without Replay).
func (p *Producer) ReplayAddr() netip.AddrPort {
	if p.ln == nil {
		return netip.AddrPort{}
	}
	ap, _ := netip.ParseAddrPort(p.ln.Addr().String())
	return ap
}

// check refuses a record the stream cannot carry, before it is queued:
// the loop thread must never be the first to refuse one (a record it
// refuses faults the producer).
func (p *Producer) check(typ uint16, payload []byte) error {
	if wire.Reserved(typ) {
		return fmt.Errorf("%w: type %#x: %w", ErrRecord, typ, wire.ErrReserved)
	}
	if len(payload) < 8 || len(payload) > p.maxPayload {
		return fmt.Errorf("%w: payload of %d bytes outside 8..%d (the first 8 carry the seq)", ErrRecord, len(payload), p.maxPayload)
	}
	return nil
}

// Publish queues one record: typ (any type but the protocol's reserved
// 0x10–0x17, see wire.Reserved) and payload, whose first 8 bytes are overwritten with the seq
// the stream assigns (the caller's slice is copied, not changed). It
// checks the record first and returns an error wrapping ErrRecord for a
// record the stream cannot carry. When the queue is full it waits for
// room until ctx ends. A nil error means the record will be sent: Flush
// and Close wait for it. Publish is safe for concurrent use (callers take
// turns).
func (p *Producer) Publish(ctx context.Context, typ uint16, payload []byte) error {
	if err := p.check(typ, payload); err != nil {
		return err
	}
	p.pubMu.Lock()
	defer p.pubMu.Unlock()
	for {
		err := p.push(typ, payload)
		if err != ErrBackpressure {
			return err
		}
		if err := p.loop.WaitProgress(ctx); err != nil {
			return err
		}
	}
}

// TryPublish is Publish without waiting: it returns ErrBackpressure when
// the queue is full.
func (p *Producer) TryPublish(typ uint16, payload []byte) error {
	if err := p.check(typ, payload); err != nil {
		return err
	}
	p.pubMu.Lock()
	defer p.pubMu.Unlock()
	return p.push(typ, payload)
}

func (p *Producer) push(typ uint16, payload []byte) error {
	if p.closing.Load() {
		return ErrClosed
	}
	if p.ending.Load() {
		return ErrEnded
	}
	if err := p.fault(); err != nil {
		return err
	}
	switch err := p.loop.Publish(typ, payload); err {
	case nil:
		p.accepted.Add(1)
		return nil
	case ErrRingFull, protocol.ErrBackpressure:
		return ErrBackpressure
	default:
		return err
	}
}

// fault is the error that keeps records from going out: the loop stopped
// on a datapath error, or the Sender refused a record (the WAL failing).
func (p *Producer) fault() error {
	if err := p.loop.Err(); err != nil {
		return fmt.Errorf("cast: producer loop stopped: %w", err)
	}
	if err := p.loop.SendErr(); err != nil {
		return fmt.Errorf("cast: producer: %w", err)
	}
	if p.w != nil {
		if err := p.w.Err(); err != nil {
			return fmt.Errorf("cast: producer: %w", err)
		}
	}
	return nil
}

// Err is the error that keeps records from going out, or nil: the loop
// stopped on a datapath error, the Sender refused a record, or the WAL
// is failing (a full disk, say; Publish and Flush return it too).
func (p *Producer) Err() error { return p.fault() }

// onPoll runs on the loop thread once per iteration: End's request is
// carried out there (Loop.End is a loop-thread call), then the
// application's OnPoll runs.
func (p *Producer) onPoll(l *Loop, now int64) {
	if !p.endSent && p.endReq.Load() {
		p.endSent = true
		_ = l.End() // the loop has a Sender
		close(p.endDone)
	}
	if p.userPoll != nil {
		p.userPoll(l, now)
	}
}

// Flush returns once every record Publish accepted before the call has
// been sent and, with a WAL, is durable; or with the error that keeps it
// from being so (the WAL failing, the loop stopped), or ctx's error. A
// consumer's closed flow-control window holds records back until it
// opens or the consumer leaves or goes silent (Sender.ReceiverTimeout).
func (p *Producer) Flush(ctx context.Context) error {
	target := p.accepted.Load()
	for {
		if err := p.fault(); err != nil {
			return err
		}
		if n, _ := p.loop.Sent(); n >= target {
			break
		}
		select {
		case <-p.loop.Done(): // Sent is final: the records it lacks were never taken
			if err := p.fault(); err != nil {
				return err
			}
			return ErrClosed
		default:
		}
		if err := p.loop.WaitProgress(ctx); err != nil {
			return err
		}
	}
	if _, last := p.loop.Sent(); p.w == nil || p.w.Durable() >= last {
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- p.w.Flush() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("cast: producer: %w", err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops taking records, waits until every accepted record has been
// sent and is durable (Flush), then stops the loop, the replay server
// and the WAL. It returns the first error of these steps: an accepted
// record is never dropped without Close saying why. Safe to call more
// than once.
func (p *Producer) Close() error {
	p.closeOnce.Do(func() {
		p.pubMu.Lock() // a Publish in progress finishes first; later ones see closing
		p.closing.Store(true)
		p.pubMu.Unlock()
		err := p.Flush(context.Background())
		p.closeErr = errors.Join(err, p.release())
	})
	return p.closeErr
}

// release stops what NewProducer started, in reverse order.
func (p *Producer) release() error {
	var errs []error
	if p.loop != nil {
		errs = append(errs, p.loop.Close())
	}
	if p.srv != nil {
		errs = append(errs, p.srv.Close())
		p.srvWG.Wait()
	} else if p.ln != nil {
		errs = append(errs, p.ln.Close())
	}
	if p.w != nil {
		errs = append(errs, p.w.Close())
	}
	return errors.Join(errs...)
}
