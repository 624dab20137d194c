package cast

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/internal/cfgerr"
	"github.com/walcast/walcast/wal"
)

// ColdReader serves the Sender's cold reads off the hot thread;
// *wal.Writer satisfies it. ReadRange copies up to n consecutive frames
// starting at seq from into dst and returns the frame and byte counts.
type ColdReader interface {
	ReadRange(from uint64, n int, dst []byte) (frames, bytes int, err error)
}

// IOFlusher is a log whose I/O goroutine may need the loop's core:
// Flushing reports that a write + sync is in progress. *wal.Writer
// satisfies it.
type IOFlusher interface {
	Flushing() bool
}

// Waiter is a datapath that can park on Go's netpoller until a datagram
// arrives (datapath/udp and datapath/mmsg are). The loop needs it for
// the affinity.Park idle strategy.
type Waiter interface {
	RecvWait(v *batch.Vec, deadline time.Time) (int, error)
}

// LoopConfig configures a [Loop]. A zero field means its default
// (DefaultLoopConfig shows them); Path and a core are required.
type LoopConfig struct {
	// Path carries the datagrams. The Loop owns it from StartLoop on and
	// closes it in Close, after its thread has stopped using it.
	Path datapath.Path
	// Sender and Receiver are the cores the loop drives; at least one.
	// With both (an echoer, or a ping client), NAK datagrams go to the
	// Sender and everything else to the Receiver.
	Sender   *protocol.Sender
	Receiver *protocol.Receiver
	// Cold serves the Sender's cold reads (NAKed records no longer in the
	// hot ring) on an I/O goroutine; usually the Sender's *wal.Writer.
	// Nil: cold requests are reported failed and the receiver asks again.
	//
	// When Cold also reports its flushes (a *wal.Writer does:
	// [IOFlusher]), an idle iteration during a flush yields the core
	// (sched_yield) instead of spinning, and an idle iteration whose sends
	// the WAL refused (wal.ErrBackpressure) yields, then sleeps 20 µs if
	// refusals go on: on a host with as
	// many cores as spinning loops the WAL's I/O goroutine then gets the
	// core it needs. See LoopStats.IOYields.
	Cold ColdReader
	// Thread pins the loop's locked OS thread (CPU -1: unpinned). With
	// the Park idle strategy the loop runs on an ordinary goroutine
	// instead (see affinity.GoFor) and Thread is not applied.
	Thread affinity.Config
	// Idle paces the loop when a poll found nothing. affinity.Park blocks
	// in the Path's RecvWait until a datagram or the next tick.
	Idle affinity.Idler
	// Batch is the number of datagrams received per poll and flushed per
	// send (default 64).
	Batch int
	// Slot is the size in bytes of each datagram buffer (default
	// DefaultMaxFrame); it must hold the largest datagram either side
	// sends, coalesced datagrams included.
	Slot int
	// TickInterval is how often the cores' timers run at least (default
	// 1 ms); they also run at the cores' own Deadline (re-NAKs, probes and
	// Status frames due sooner).
	TickInterval time.Duration
	// OnRecord is called on the loop thread for every record delivered
	// in seq order; h and payload are valid only during the call.
	OnRecord func(l *Loop, h wal.Header, payload []byte)
	// OnEvent is called on the loop thread when the Receiver's outcome or
	// silence changes, when the Sender's flow-control table changes
	// (receivers joining, leaving, faulting), and when the loop stops on
	// an error.
	OnEvent func(Event)
	// OnPoll is called on the loop thread once per iteration with the
	// loop's clock: producers that live inside the loop call l.Send here.
	OnPoll func(l *Loop, now int64)
	// SendRing is the number of slots of the ring through which one other
	// goroutine publishes records ([Loop.Publish]); 0 = none.
	SendRing int
	// RecvRing is the number of slots of the ring through which one other
	// goroutine consumes delivered records ([Loop.Received]); 0 = none.
	RecvRing int
	// RingSlot is the largest payload a ring slot holds, bytes (default
	// Slot − 16).
	RingSlot int
	// ColdBuffers is the number of cold reads in flight at once (default
	// DefaultMaxColdInFlight); ColdBufSize the bytes each may return
	// (default DefaultMaxColdRecords × Slot).
	ColdBuffers int
	ColdBufSize int
	// Source, when valid, is the only address whose data and heartbeats
	// reach the cores; those from any other address are dropped and
	// counted in LoopStats.Foreign (a consumer that knows its producer).
	// Frames for a sender (NAK, Status) pass from anyone: in a multicast
	// group the other receivers' are useful.
	Source netip.AddrPort
	// KeepGOMAXPROCS leaves GOMAXPROCS as it is. By default Start raises
	// it to the number of spinning loops + 2 when it is lower: a spinning
	// loop holds a P for good, and the GC, the WAL's and the loop's I/O
	// goroutines and the application need the others (a loop with the
	// Park strategy does not count). Start undoes its change when it
	// fails, and when the last spinning loop stops the value found
	// before the first raise is restored, unless something else changed
	// GOMAXPROCS meanwhile.
	KeepGOMAXPROCS bool
}

// DefaultLoopConfig returns a spinning, unpinned loop with 64-datagram
// batches and a 1 ms tick; set Path and a core.
func DefaultLoopConfig() LoopConfig {
	return LoopConfig{
		Thread:       affinity.DefaultConfig(),
		Batch:        64,
		Slot:         protocol.DefaultMaxFrame,
		TickInterval: time.Millisecond,
		ColdBuffers:  protocol.DefaultMaxColdInFlight,
	}
}

// Validate reports the first nonsensical field, wrapped in ErrConfig.
func (c LoopConfig) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Path == nil:
		return fmt.Errorf("%w: loop needs a Path", ErrConfig)
	case c.Sender == nil && c.Receiver == nil:
		return fmt.Errorf("%w: loop needs a Sender or a Receiver", ErrConfig)
	case c.Batch < 1 || c.Batch > 1024:
		return fmt.Errorf("%w: loop Batch %d outside 1..1024", ErrConfig, c.Batch)
	case c.Slot < wal.HeaderSize+8 || c.Slot > protocol.MaxDatagram:
		return fmt.Errorf("%w: loop Slot %d outside %d..%d", ErrConfig, c.Slot, wal.HeaderSize+8, protocol.MaxDatagram)
	case c.TickInterval <= 0:
		return fmt.Errorf("%w: loop TickInterval %v must be > 0", ErrConfig, c.TickInterval)
	case c.SendRing < 0 || c.RecvRing < 0 || c.ColdBuffers < 0 || c.ColdBufSize < 0 || c.RingSlot < 0:
		return fmt.Errorf("%w: loop ring and cold sizes must be ≥ 0", ErrConfig)
	case c.SendRing > 0 && c.Sender == nil:
		return fmt.Errorf("%w: SendRing without a Sender", ErrConfig)
	case c.RecvRing > 0 && c.Receiver == nil:
		return fmt.Errorf("%w: RecvRing without a Receiver", ErrConfig)
	}
	if c.Idle.Parks() {
		if _, ok := c.Path.(Waiter); !ok {
			return fmt.Errorf("%w: idle strategy park needs a Path with RecvWait", ErrConfig)
		}
	}
	return cfgerr.Nest("cast", ErrConfig, "Thread", c.Thread.Validate())
}

// EventKind says what an [Event] reports.
type EventKind uint8

const (
	EventFaulted         EventKind = iota + 1 // the Receiver Faulted (sticky)
	EventReconnect                            // the Receiver must reconnect (sticky)
	EventSenderRestarted                      // the sender's seqs restarted (sticky)
	EventPeerSilent                           // silence with no gap open (clears on traffic)
	EventPeerHeard                            // traffic again after EventPeerSilent
	EventError                                // the loop stopped on a datapath error (Event.Err)
	// EventSkip: the Receiver applied a Skip marker (Event.Skip): the
	// stream jumped over seqs that have no record; Skip.LostFrom…LostTo
	// are seqs already delivered that the marker stands for.
	EventSkip
	// EventLogError: the Sender's log cannot make records durable
	// (Event.Err: a full disk, an I/O error, a stalled flush); heartbeats
	// are withheld until EventLogRecovered.
	EventLogError
	EventLogRecovered // the Sender's log makes progress again
	// EventLateStart: a StartNow Receiver began delivering at Event.Seq,
	// after seq 1 (seqs below it exist and are not delivered).
	EventLateStart

	// Sender side (Event.Receiver says which receiver): flow control.
	EventReceiverJoined    // a receiver's first Status: flow control on for it
	EventReceiverRestarted // a new receiver id from a known address replaced the old one
	EventReceiverLost      // a receiver silent for ReceiverTimeout was dropped from flow control
	EventReceiverLeft      // a receiver said it is closing
	EventReceiverFaulted   // a receiver reported a sticky outcome (Event.Receiver.State)
	EventReceiverRecovered // live (or progressing) again after EventReceiverFaulted (EventReceiverStalled)
	EventReceiverStalled   // a receiver held the sender back for ReceiverTimeout without progress: released
)

var eventNames = [...]string{EventFaulted: "faulted", EventReconnect: "reconnect", EventSenderRestarted: "sender_restarted",
	EventPeerSilent: "peer_silent", EventPeerHeard: "peer_heard", EventError: "error", EventSkip: "skip",
	EventLogError: "log_error", EventLogRecovered: "log_recovered", EventLateStart: "late_start",
	EventReceiverJoined: "receiver_joined", EventReceiverRestarted: "receiver_restarted", EventReceiverLost: "receiver_lost",
	EventReceiverLeft: "receiver_left", EventReceiverFaulted: "receiver_faulted", EventReceiverRecovered: "receiver_recovered",
	EventReceiverStalled: "receiver_stalled"}

// senderEvents maps the Sender's flow-control events to loop events.
var senderEvents = [...]EventKind{protocol.ReceiverJoined: EventReceiverJoined, protocol.ReceiverRestarted: EventReceiverRestarted,
	protocol.ReceiverLost: EventReceiverLost, protocol.ReceiverLeft: EventReceiverLeft,
	protocol.ReceiverFaulted: EventReceiverFaulted, protocol.ReceiverRecovered: EventReceiverRecovered,
	protocol.ReceiverStalled: EventReceiverStalled}

func (k EventKind) String() string {
	if int(k) < len(eventNames) && eventNames[k] != "" {
		return eventNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is something the application should know about.
type Event struct {
	Kind    EventKind
	At      int64               // loop clock, ns
	Outcome protocol.Outcome    // the Receiver's outcome at the time
	Err     error               // EventError, EventLogError
	Skip    protocol.SkipNotice // EventSkip
	Seq     uint64              // EventLateStart: the first seq delivered
	// Receiver is, for the EventReceiver* kinds, the receiver as the
	// Sender last heard it (id, address, delivered seq, state). PrevID is
	// the id EventReceiverRestarted replaced.
	Receiver protocol.ReceiverInfo
	PrevID   uint64
}

// LoopStats are the loop's own counters.
type LoopStats struct {
	Iterations  uint64 // loop iterations
	IdlePolls   uint64 // iterations that found nothing to do
	Datagrams   uint64 // datagrams received
	Delivered   uint64 // records delivered in order
	Flushes     uint64 // Path.Send calls
	Backlogged  uint64 // datagrams the path could not take at once (EAGAIN), sent later
	RingStalls  uint64 // times delivery waited for the application to drain RecvRing
	ColdReads   uint64 // cold reads served by the I/O goroutine
	ColdErrors  uint64 // cold reads that failed
	Published   uint64 // records taken from SendRing and sent
	PublishErrs uint64 // records from SendRing the Sender refused (dropped; see SendErr)
	IOYields    uint64 // idle iterations that gave the core to the WAL's I/O (see LoopConfig.Cold)
	Foreign     uint64 // datagrams dropped for coming from another address than Source
	// EarlyTicks counts core ticks run at a core's Deadline, before the
	// next TickInterval.
	EarlyTicks uint64
}

type coldJob struct {
	req   protocol.ColdRequest
	buf   int
	bytes int
	err   error
}

// Loop binds a Sender and/or a Receiver to a Path on one locked, pinned
// OS thread: it polls the Path without blocking (or parks, with
// affinity.Park), feeds the cores, flushes what they produced as one
// batch, ticks their timers, serves cold reads through an I/O goroutine
// and talks to the application through callbacks (on the loop thread) or
// two single-producer/single-consumer rings (from one other goroutine).
// One iteration allocates nothing.
type Loop struct {
	cfg    LoopConfig
	path   datapath.Path
	waiter Waiter
	snd    *protocol.Sender
	rcv    *protocol.Receiver
	in     *batch.Vec
	out    *batch.Vec
	back   *batch.Vec // datagrams the path refused (EAGAIN), sent before out
	epoch  time.Time
	now    int64
	tick   int64
	next   int64 // next tick, loop clock
	due    int64 // earliest core Deadline, loop clock
	idle   affinity.Idler

	sendRing, recvRing *Ring
	deliverFn          func(wal.Header, []byte)
	room               int         // RecvRing free slots last passed to the Receiver
	windowShut         atomic.Bool // the Sender's flow control refused the last SendRing record

	coldBufs [][]byte
	coldFree []int
	coldReqs []protocol.ColdRequest
	coldReq  chan coldJob
	coldDone chan coldJob
	pend     coldJob
	pendRest []byte
	pendOn   bool
	ioWG     sync.WaitGroup

	io            IOFlusher // Cold, when it reports its flushes
	backpressured bool      // a Send of this iteration met wal.ErrBackpressure
	bpRun         int       // consecutive iterations refused by the WAL

	lastKind   protocol.OutcomeKind
	lastSilent bool
	logErr     error
	lastLate   uint64
	events     chan Event

	stop      atomic.Bool
	spins     bool
	thread    *affinity.Thread
	done      chan struct{}
	err       error
	closeOnce sync.Once
	closeErr  error

	statsMu sync.Mutex
	sStats  protocol.SenderStats
	rStats  protocol.ReceiverStats
	rcvInfo []protocol.ReceiverInfo // the Sender's flow-control table (snapshot)
	rcvN    int

	// ls is counted by the loop thread with plain increments (no atomic
	// per iteration: the loop is the only writer) and copied to lsPub
	// under statsMu with the cores' stats, every tick and at Close.
	ls, lsPub LoopStats
	sendErr   atomic.Pointer[error] // see SendErr
}

// NewLoop builds a Loop without starting it (see [Loop.Start]).
func NewLoop(cfg LoopConfig) (*Loop, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	l := &Loop{
		cfg:    cfg,
		path:   cfg.Path,
		snd:    cfg.Sender,
		rcv:    cfg.Receiver,
		in:     batch.New(cfg.Batch, cfg.Slot),
		out:    batch.New(cfg.Batch, cfg.Slot),
		back:   batch.New(2*cfg.Batch, cfg.Slot),
		epoch:  time.Now(),
		tick:   int64(cfg.TickInterval),
		idle:   cfg.Idle,
		events: make(chan Event, 64),
		done:   make(chan struct{}),
	}
	l.waiter, _ = cfg.Path.(Waiter)
	l.io, _ = cfg.Cold.(IOFlusher)
	l.deliverFn = l.deliver
	if cfg.Sender != nil {
		l.rcvInfo = make([]protocol.ReceiverInfo, 16)
	}
	ringSlot := cfg.RingSlot
	if ringSlot == 0 {
		ringSlot = cfg.Slot - wal.HeaderSize
	}
	if cfg.SendRing > 0 {
		l.sendRing = NewRing(cfg.SendRing, ringSlot)
	}
	if cfg.RecvRing > 0 {
		l.recvRing = NewRing(cfg.RecvRing, ringSlot)
	}
	if l.snd != nil {
		nb := cfg.ColdBuffers
		if nb == 0 {
			nb = protocol.DefaultMaxColdInFlight
		}
		size := cfg.ColdBufSize
		if size == 0 {
			size = protocol.DefaultMaxColdRecords * cfg.Slot
		}
		l.coldBufs = make([][]byte, nb)
		l.coldFree = make([]int, 0, nb)
		for i := range l.coldBufs {
			l.coldBufs[i] = make([]byte, size)
			l.coldFree = append(l.coldFree, i)
		}
		l.coldReqs = make([]protocol.ColdRequest, nb)
		l.coldReq = make(chan coldJob, nb)
		l.coldDone = make(chan coldJob, nb)
	}
	l.now = l.clock()
	l.next = l.now
	l.due = math.MinInt64
	l.room = -1
	return l, nil
}

// StartLoop builds a Loop and starts it.
func StartLoop(cfg LoopConfig) (*Loop, error) {
	l, err := NewLoop(cfg)
	if err != nil {
		return nil, err
	}
	if err := l.Start(); err != nil {
		return nil, err
	}
	return l, nil
}

// Feed hands the cores one datagram received outside the loop (e.g. the
// one a CLI read to learn its peer's address) as if the loop had
// received it. Call it before Start only. What the cores produce is sent
// on the first iteration.
func (l *Loop) Feed(d []byte, from netip.AddrPort) {
	l.now = l.clock()
	l.route(d, from)
	l.checkEvents()
}

// Start runs the loop on a new locked OS thread placed per cfg.Thread
// and the I/O goroutine for cold reads. It returns once the thread is
// placed.
func (l *Loop) Start() error {
	l.raiseProcs()
	if l.snd != nil {
		l.ioWG.Add(1)
		go l.serveIO()
	}
	t, err := affinity.GoFor(l.idle.Strategy, l.cfg.Thread, l.run)
	if err != nil {
		l.lowerProcs()
		if l.coldReq != nil {
			close(l.coldReq)
			l.ioWG.Wait()
			l.coldReq = nil // Close must not close it again
		}
		return err
	}
	l.thread = t
	return nil
}

// Done is closed when the loop thread has stopped (after Close, or on a
// datapath error: see Err).
func (l *Loop) Done() <-chan struct{} { return l.done }

// Err is the datapath error that stopped the loop, if any (read it after Done).
func (l *Loop) Err() error {
	select {
	case <-l.done:
		return l.err
	default:
		return nil
	}
}

// Events delivers the same events as OnEvent to another goroutine
// (buffered; events beyond 64 unread are dropped).
func (l *Loop) Events() <-chan Event { return l.events }

// Close stops the loop thread, waits for it and for the I/O goroutine,
// then closes the Path: no fd is closed under a running system call. It
// returns the error that stopped the loop early, if any, or the Path's
// Close error. Safe to call more than once and from any goroutine.
func (l *Loop) Close() error {
	l.closeOnce.Do(func() {
		l.stop.Store(true)
		if l.thread != nil {
			l.thread.Wait()
		} else {
			close(l.done)
		}
		if l.coldReq != nil {
			close(l.coldReq)
			l.ioWG.Wait()
		}
		l.snapshot()
		l.closeErr = errors.Join(l.err, l.path.Close())
	})
	return l.closeErr
}

func (l *Loop) clock() int64 { return int64(time.Since(l.epoch)) + 1 }

// Now is the loop's clock (monotonic ns), as passed to the cores.
func (l *Loop) Now() int64 { return l.clock() }

func (l *Loop) run() {
	defer close(l.done)
	defer l.lowerProcs()
	for !l.stop.Load() {
		if !l.iterate() {
			return
		}
	}
	// Tell the sender this receiver is leaving (it stops waiting for it
	// at once), and flush so that a Close right after a Send still sends it.
	if l.rcv != nil {
		l.rcv.Leave(l.clock(), l.out)
	}
	_ = l.flush()
}

// iterate runs one loop iteration; false means stop (error).
func (l *Loop) iterate() bool {
	l.ls.Iterations++
	l.now = l.clock()
	work := false

	if l.recvRing == nil || l.recvRing.Free() >= l.in.Cap() {
		var n int
		var err error
		if l.idle.Parks() && l.waiter != nil && l.quiet() {
			n, err = l.waiter.RecvWait(l.in, l.epoch.Add(time.Duration(min(l.next, l.due))))
			l.now = l.clock()
		} else {
			n, err = l.path.Recv(l.in)
		}
		if err != nil {
			return l.fail(err)
		}
		if n > 0 {
			work = true
			l.ls.Datagrams += uint64(n)
			for i := 0; i < n; i++ {
				d, from := l.in.Msg(i)
				l.route(d, from)
				if l.snd != nil && l.snd.RetxPending() {
					// NAKs filled the batch with retransmits: send it and
					// continue them before the next datagram's NAKs queue
					// behind (one GRO datagram may carry 64 NAKs, a
					// batch 64 of those); past the Sender's deferral
					// queue they would be dropped, costing the receiver
					// a retry each.
					if err := l.flush(); err != nil {
						return l.fail(err)
					}
					l.snd.Tick(l.now, l.out)
				}
			}
			l.checkEvents()
		}
	}

	if l.sendRing != nil && l.drainSendRing() {
		work = true
	}
	if l.cfg.OnPoll != nil {
		l.cfg.OnPoll(l, l.now)
	}
	// Cold service only when a read is pending, came back or is wanted
	// (len of a channel is a plain load; the select in serveCold is not).
	if l.snd != nil && (l.pendOn || len(l.coldDone) > 0 || l.snd.ColdPending()) && l.serveCold() {
		work = true
	}
	if l.snd != nil && l.snd.RetxPending() && l.now < l.next {
		// NAKed retransmits that did not fit in an earlier batch continue
		// now, not at the next tick: under a burst of NAKs they would
		// otherwise pile up past the Sender's deferral queue and be
		// dropped (RetxDropped), costing the receiver a retry each.
		work = true
		l.snd.Tick(l.now, l.out)
	}
	if l.recvRing != nil {
		// The consumer's room is the Receiver's window: a Status goes out
		// at once when it opens.
		if free := l.recvRing.Free(); free != l.room {
			l.room = free
			l.rcv.SetConsumerRoom(free, l.now, l.out)
		}
	}
	ticked := false
	if l.now >= l.next || l.now >= l.due {
		ticked = true
		if l.now < l.next {
			l.ls.EarlyTicks++
		}
		if l.snd != nil {
			l.snd.Tick(l.now, l.out)
		}
		if l.rcv != nil {
			l.rcv.Tick(l.now, l.out)
		}
		l.checkEvents()
		if l.now >= l.next {
			if l.snd != nil {
				l.checkLog()
			}
			l.next = l.now + l.tick
			l.snapshot()
		}
	}
	if l.out.Len() > 0 || l.back.Len() > 0 {
		work = true
		if err := l.flush(); err != nil {
			return l.fail(err)
		}
	}
	if work || ticked {
		l.due = l.deadline()
	}
	if work {
		l.idle.Reset()
	} else {
		l.ls.IdlePolls++
		if !l.yieldIO() {
			l.idle.Idle()
		}
	}
	if !l.backpressured {
		l.bpRun = 0
	}
	l.backpressured = false
	return true
}

// yieldIO gives the core to the WAL's I/O goroutine when this idle
// iteration waits for it: a sleep when the WAL refused a record (nothing
// can be sent until it writes), a sched_yield while it flushes. It
// reports whether it did either. Without it, two spinning loops on two
// cores leave the I/O goroutine only the scheduler's preemption slices.
func (l *Loop) yieldIO() bool {
	switch {
	case l.backpressured && !l.idle.Parks():
		// sched_yield first (cheap when nothing else waits for this
		// CPU); after a run of refusals, short sleeps, so that a CPU goes
		// idle and the scheduler pulls the I/O thread onto it.
		l.ls.IOYields++
		if l.bpRun++; l.bpRun <= 16 {
			affinity.OSYield()
		} else {
			affinity.OSSleep(20 * time.Microsecond)
		}
	case l.io != nil && l.spins && l.io.Flushing():
		l.ls.IOYields++
		affinity.OSYield()
	default:
		return false
	}
	return true
}

// deadline is the earliest time a core's Tick has work.
func (l *Loop) deadline() int64 {
	d := int64(math.MaxInt64)
	if l.snd != nil {
		d = l.snd.Deadline()
	}
	if l.rcv != nil {
		d = min(d, l.rcv.Deadline())
	}
	return d
}

// quiet reports that nothing waits to be sent, so parking is safe.
func (l *Loop) quiet() bool {
	return l.out.Len() == 0 && l.back.Len() == 0 && !l.pendOn && (l.snd == nil || !l.snd.RetxPending()) &&
		(l.sendRing == nil || l.sendRing.Len() == 0) && (l.snd == nil || !l.snd.ColdPending())
}

func (l *Loop) route(d []byte, from netip.AddrPort) {
	if l.cfg.Source.IsValid() && from != l.cfg.Source && !toSender(d) {
		l.ls.Foreign++
		return
	}
	if l.snd != nil && (l.rcv == nil || toSender(d)) {
		l.snd.Handle(d, from, l.now, l.out)
		return
	}
	if l.rcv != nil {
		l.rcv.Handle(d, l.now, l.out, l.deliverFn)
	}
}

func (l *Loop) deliver(h wal.Header, p []byte) {
	if s := l.rcv.LateStart(); s != l.lastLate {
		// Before the record itself, so the application learns where
		// delivery begins before it sees the first record.
		l.lastLate = s
		l.emit(Event{Kind: EventLateStart, At: l.now, Outcome: l.rcv.Outcome(), Seq: s})
	}
	if h.Type == wal.TypeSkip && l.rcv != nil {
		l.emit(Event{Kind: EventSkip, At: l.now, Skip: l.rcv.LastSkip()})
	}
	l.ls.Delivered++
	if l.cfg.OnRecord != nil {
		l.cfg.OnRecord(l, h, p)
	}
	if l.recvRing != nil {
		var seq uint64
		if len(p) >= 8 {
			seq = wal.Seq(p)
		}
		for i := 0; l.recvRing.Push(h.Type, seq, p) == ErrRingFull; i++ {
			// The application is behind: wait for it (never drop a
			// delivered record); the kernel buffers meanwhile.
			if i == 0 {
				l.ls.RingStalls++
			}
			if l.stop.Load() {
				return
			}
			runtime.Gosched()
		}
	}
}

func (l *Loop) checkEvents() {
	if l.snd != nil {
		for e, ok := l.snd.NextEvent(); ok; e, ok = l.snd.NextEvent() {
			l.emit(Event{Kind: senderEvents[e.Kind], At: e.At, Receiver: e.Receiver, PrevID: e.PrevID})
		}
	}
	if l.rcv == nil {
		return
	}
	o := l.rcv.Outcome()
	if o.Kind != l.lastKind {
		l.lastKind = o.Kind
		switch o.Kind {
		case protocol.Faulted:
			l.emit(Event{Kind: EventFaulted, At: l.now, Outcome: o})
		case protocol.Reconnect:
			l.emit(Event{Kind: EventReconnect, At: l.now, Outcome: o})
		case protocol.SenderRestarted:
			l.emit(Event{Kind: EventSenderRestarted, At: l.now, Outcome: o})
		}
	}
	if l.rcv.LateStart() == 0 {
		l.lastLate = 0 // rearmed by Resync or ResetAfterReplay
	}
	if s := l.rcv.PeerSilent(); s != l.lastSilent {
		l.lastSilent = s
		k := EventPeerHeard
		if s {
			k = EventPeerSilent
		}
		l.emit(Event{Kind: k, At: l.now, Outcome: o})
	}
}

// checkLog reports the Sender's log failing and recovering (once per
// change; the error values are the log's own, so this allocates nothing).
func (l *Loop) checkLog() {
	err := l.snd.LogErr()
	switch {
	case err != nil && l.logErr == nil:
		l.emit(Event{Kind: EventLogError, At: l.now, Err: err})
	case err == nil && l.logErr != nil:
		l.emit(Event{Kind: EventLogRecovered, At: l.now})
	}
	l.logErr = err
}

func (l *Loop) emit(e Event) {
	if l.cfg.OnEvent != nil {
		l.cfg.OnEvent(e)
	}
	select {
	case l.events <- e:
	default:
	}
}

func (l *Loop) fail(err error) bool {
	if errors.Is(err, datapath.ErrClosed) && l.stop.Load() {
		return false
	}
	l.err = err
	l.emit(Event{Kind: EventError, At: l.now, Err: err})
	return false
}

// Send sends one data record from inside a loop callback (OnPoll,
// OnRecord, OnEvent) and returns its seq. It must not be called from
// another goroutine: use Publish there. ErrBatchFull means the path is
// backed up: try again on a later iteration. Other errors are the
// Sender's: wal.ErrBackpressure (the WAL) and protocol.ErrBackpressure
// (a receiver's window is closed; errors.Is matches it to
// wal.ErrBackpressure too) also mean "try again on a later iteration".
func (l *Loop) Send(typ uint16, payload []byte) (uint64, error) {
	if l.snd == nil {
		return 0, fmt.Errorf("%w: loop has no Sender", ErrConfig)
	}
	seq, err := l.snd.Send(typ, payload, l.now, l.out)
	if err == protocol.ErrBatchFull {
		if ferr := l.flush(); ferr != nil {
			return 0, ferr
		}
		seq, err = l.snd.Send(typ, payload, l.now, l.out)
	}
	if err != nil && err != protocol.ErrBatchFull && err != protocol.ErrBackpressure && errors.Is(err, wal.ErrBackpressure) {
		l.backpressured = true // the WAL's, not flow control's: the loop must keep reading Status
	}
	return seq, err
}

// Publish queues one record for sending from a goroutine other than the
// loop's (one producer only). It copies payload. When the ring is full it
// returns protocol.ErrBackpressure if a receiver's flow-control window
// holds the sender back, else ErrRingFull (the loop is behind): retry
// later, or use PublishWait.
func (l *Loop) Publish(typ uint16, payload []byte) error {
	if l.sendRing == nil {
		return fmt.Errorf("%w: loop has no SendRing", ErrConfig)
	}
	if err := l.checkRecord(typ, payload); err != nil {
		return err
	}
	err := l.sendRing.Push(typ, 0, payload)
	if err == ErrRingFull && l.windowShut.Load() {
		return protocol.ErrBackpressure
	}
	return err
}

// PublishWait is Publish that waits while the ring is full (the loop is
// behind or a receiver's window is closed) until the record is queued,
// ctx ends (its error is returned) or the loop stops (ErrLoopStopped). It
// yields, then sleeps up to 1 ms between tries; it allocates nothing
// while it waits.
func (l *Loop) PublishWait(ctx context.Context, typ uint16, payload []byte) error {
	for i := 0; ; i++ {
		err := l.Publish(typ, payload)
		if err != ErrRingFull && err != protocol.ErrBackpressure {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		select {
		case <-l.done:
			return ErrLoopStopped
		default:
		}
		if i < 64 {
			runtime.Gosched()
		} else {
			time.Sleep(time.Duration(min(i-63, 1000)) * time.Microsecond)
		}
	}
}

// ErrLoopStopped is returned by PublishWait when the loop stopped (Close,
// or a datapath error: see Err) before the record could be queued.
var ErrLoopStopped = errors.New("cast: loop stopped")

// Received is the ring of delivered records for one consumer goroutine
// (nil without RecvRing): Peek, then Pop when done with the payload.
func (l *Loop) Received() *Ring { return l.recvRing }

func (l *Loop) drainSendRing() bool {
	did := false
	for i := 0; i < l.out.Cap(); i++ {
		typ, _, p, ok := l.sendRing.Peek()
		if !ok {
			break
		}
		_, err := l.Send(typ, p)
		if err == protocol.ErrBackpressure {
			l.windowShut.Store(true)
			break // leave it queued until the window opens
		}
		if err == protocol.ErrBatchFull || errors.Is(err, wal.ErrBackpressure) {
			l.noteSendErr(err) // a failing WAL flush is backpressure too: say so
			break              // leave it queued
		}
		l.noteSendErr(err)
		l.windowShut.Store(false)
		if err != nil {
			l.ls.PublishErrs++
		} else {
			l.ls.Published++
		}
		l.sendRing.Pop()
		did = true
	}
	return did
}

// flush sends the backlog, then out. What the path does not take moves
// to the backlog, so out is always empty afterwards unless the backlog
// is too full to take it (then out waits and the Sender sees
// ErrBatchFull).
func (l *Loop) flush() error {
	if l.back.Len() > 0 {
		l.ls.Flushes++
		n, err := l.path.Send(l.back)
		if err != nil {
			return err
		}
		l.back.Drop(n)
	}
	if l.out.Len() == 0 || l.back.Len() > l.back.Cap()-l.out.Cap() {
		return nil
	}
	from := 0
	if l.back.Len() == 0 {
		l.ls.Flushes++
		n, err := l.path.Send(l.out)
		if err != nil {
			return err
		}
		from = n
	}
	for i := from; i < l.out.Len(); i++ {
		m, a := l.out.Msg(i)
		l.back.Append(m, a)
		l.ls.Backlogged++
	}
	l.out.Reset()
	return nil
}

// serveCold finishes cold reads that came back and hands new requests to
// the I/O goroutine. It reports whether it did anything.
func (l *Loop) serveCold() bool {
	did := false
	if l.pendOn {
		did = true
		if !l.finishCold() {
			return true
		}
	}
	for {
		select {
		case j := <-l.coldDone:
			did = true
			l.pend, l.pendOn = j, true
			if j.err != nil {
				l.ls.ColdErrors++
				l.snd.ColdFailed(j.req)
				l.releaseCold()
				continue
			}
			l.ls.ColdReads++
			l.pendRest = l.coldBufs[j.buf][:j.bytes]
			if !l.finishCold() {
				return true
			}
			continue
		default:
		}
		break
	}
	if len(l.coldFree) > 0 && l.snd.ColdPending() {
		did = true
		n := l.snd.ColdRequests(l.coldReqs[:len(l.coldFree)])
		for i := 0; i < n; i++ {
			if l.cfg.Cold == nil {
				l.ls.ColdErrors++
				l.snd.ColdFailed(l.coldReqs[i])
				continue
			}
			b := l.coldFree[len(l.coldFree)-1]
			l.coldFree = l.coldFree[:len(l.coldFree)-1]
			l.coldReq <- coldJob{req: l.coldReqs[i], buf: b}
		}
	}
	return did
}

// finishCold hands the pending read's frames to the Sender, flushing when
// the batch fills; false means the path is backed up (try again later).
func (l *Loop) finishCold() bool {
	for {
		rest := l.snd.ColdDone(l.pend.req, l.pendRest, l.now, l.out)
		if len(rest) == 0 {
			l.releaseCold()
			return true
		}
		progress := len(rest) < len(l.pendRest)
		l.pendRest = rest
		if err := l.flush(); err != nil || (!progress && l.out.Full()) {
			return false
		}
	}
}

func (l *Loop) releaseCold() {
	l.coldFree = append(l.coldFree, l.pend.buf)
	l.pendOn = false
	l.pendRest = nil
}

func (l *Loop) serveIO() {
	defer l.ioWG.Done()
	for j := range l.coldReq {
		_, j.bytes, j.err = l.cfg.Cold.ReadRange(j.req.From, j.req.Count, l.coldBufs[j.buf])
		l.coldDone <- j
	}
}

func (l *Loop) snapshot() {
	if l.snd == nil && l.rcv == nil {
		return
	}
	l.statsMu.Lock()
	l.lsPub = l.ls
	if l.snd != nil {
		l.sStats = l.snd.Stats()
		l.rcvN = l.snd.Receivers(l.rcvInfo)
	}
	if l.rcv != nil {
		l.rStats = l.rcv.Stats()
	}
	l.statsMu.Unlock()
}

// SenderStats is a snapshot of the Sender's counters, at most one
// TickInterval old (exact after Close).
func (l *Loop) SenderStats() protocol.SenderStats {
	l.statsMu.Lock()
	defer l.statsMu.Unlock()
	return l.sStats
}

// Receivers is a snapshot of the Sender's flow-control table (the
// receivers heard from and not dropped: their delivered seq, window,
// state, RTT), at most one TickInterval old; at most 16 are reported.
// It allocates the returned slice.
func (l *Loop) Receivers() []protocol.ReceiverInfo {
	l.statsMu.Lock()
	defer l.statsMu.Unlock()
	return append([]protocol.ReceiverInfo(nil), l.rcvInfo[:l.rcvN]...)
}

// ReceiverStats is a snapshot of the Receiver's counters, at most one
// TickInterval old (exact after Close).
func (l *Loop) ReceiverStats() protocol.ReceiverStats {
	l.statsMu.Lock()
	defer l.statsMu.Unlock()
	return l.rStats
}

// Stats returns the loop's counters, at most one TickInterval old
// (exact after Close).
func (l *Loop) Stats() LoopStats {
	l.statsMu.Lock()
	defer l.statsMu.Unlock()
	return l.lsPub
}
