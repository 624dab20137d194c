package cast

import (
	"errors"
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
	"github.com/walcast/walcast/wire"
)

// Loop binds a Sender and/or a Receiver to a Path on one locked, pinned
// OS thread: it polls the Path without blocking (or parks, with
// affinity.Park), feeds the cores, flushes what they produced as one
// batch, ticks their timers, serves cold reads through an I/O goroutine
// and talks to the application through callbacks (on the loop thread) or
// two single-producer/single-consumer rings (from one other goroutine).
// Several loops may share one thread instead ([SharedThread]).
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
	pubRun             [][]byte // drainSendRing's run of records, views of sendRing's slots
	deliverFn          func(wire.Header, []byte)
	room               int         // RecvRing free slots last passed to the Receiver
	roomSeq            uint64      // the Receiver's ExpectedSeq when room was last told
	windowShut         atomic.Bool // the Sender's flow control refused the last SendRing record
	pub                publishWait // SendRing's progress, for WaitProgress and Sent

	cold coldService // Cold's reads on the I/O goroutine

	// A loop with only a Sender reads its path for NAKs and Status; while
	// it sends full batches it reads at most every senderRecvGap (a read
	// that finds nothing costs a system call): recvAt is the last read,
	// fullSend that the last flush sent a full batch.
	recvAt   int64
	fullSend bool

	io            IOFlusher // Cold, when it reports its flushes
	backpressured bool      // a Send of this iteration met wal.ErrBackpressure
	bpRun         int       // consecutive iterations refused by the WAL

	events chan Event

	stop      atomic.Bool
	spins     bool
	started   bool             // Start succeeded
	thread    *affinity.Thread // nil on a SharedThread
	done      chan struct{}
	err       error
	closeOnce sync.Once
	closeErr  error

	// ls is counted by the loop thread with plain increments (no atomic
	// per iteration: the loop is the only writer) and copied to snap
	// with the cores' stats, every tick and at Close.
	ls      LoopStats
	snap    statsSnapshot
	sendErr atomic.Pointer[error] // see SendErr

	auth    *loopAuth // nil without LoopConfig.Keys
	authPub AuthStats // auth.stats as of the last snapshot

	vclock func() int64 // tests: a virtual clock (datapath/mem) instead of time.Since(epoch)

	ctr *loopCounters // the counters file's slots (nil: off); loop_counters.go
}

// publishWait is what a goroutine publishing through SendRing waits on
// (Loop.WaitProgress) and what it learns of the loop's progress
// (Loop.Sent); the loop thread writes it in publishProgress.
type publishWait struct {
	sentN, sentSeq atomic.Uint64
	waiting        atomic.Int32  // goroutines parked in WaitProgress
	spins          atomic.Uint32 // WaitProgress calls: every 64th parks
	wake           chan struct{}
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
	if cfg.Keys != nil {
		a, err := newLoopAuth(cfg.Keys)
		if err != nil {
			return nil, err
		}
		// The cores write datagrams of at most Slot − TrailerSize bytes;
		// the trailer goes into the tail of out's buffers at flush.
		l.auth = a
		l.out = batch.NewTail(cfg.Batch, cfg.Slot-wire.TrailerSize, wire.TrailerSize)
	}
	l.waiter, _ = cfg.Path.(Waiter)
	l.io, _ = cfg.Cold.(IOFlusher)
	l.deliverFn = l.deliver
	if cfg.Sender != nil {
		l.snap.receivers = make([]protocol.ReceiverInfo, 16)
	}
	ringSlot := cfg.RingSlot
	if ringSlot == 0 {
		ringSlot = l.out.SlotSize() - wire.HeaderSize
	}
	if cfg.SendRing > 0 {
		sendSlot := ringSlot
		if cfg.RingSlot == 0 {
			sendSlot = l.maxRecord() - wire.HeaderSize
		}
		l.sendRing = NewRing(cfg.SendRing, sendSlot)
		l.pubRun = make([][]byte, cfg.Batch)
		l.pub.wake = make(chan struct{}, 1)
		l.pub.sentSeq.Store(l.snd.NextSeq() - 1)
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
		l.cold.bufs = make([][]byte, nb)
		l.cold.free = make([]int, 0, nb)
		for i := range l.cold.bufs {
			l.cold.bufs[i] = make([]byte, size)
			l.cold.free = append(l.cold.free, i)
		}
		l.cold.reqs = make([]protocol.ColdRequest, nb)
		l.cold.req = make(chan coldJob, nb)
		l.cold.done = make(chan coldJob, nb)
	}
	l.now = l.clock()
	l.next = l.now
	l.due = math.MinInt64
	l.room = -1
	l.ctr = newLoopCounters(l)
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
// (or attaches it to cfg.Shared) and the I/O goroutine for cold reads.
// It returns once the thread is placed.
func (l *Loop) Start() error {
	l.raiseProcs()
	if l.snd != nil {
		l.cold.ioWG.Add(1)
		go l.serveIO()
	}
	if !l.idle.Parks() {
		// A wait before Start (a consumer awaiting its sender) left the
		// socket in Go's netpoller; a spinning loop never parks on it.
		datapath.ReleaseWait(l.path)
	}
	var t *affinity.Thread
	var err error
	if l.cfg.Shared != nil {
		err = l.cfg.Shared.attach(l)
	} else {
		t, err = affinity.GoFor(l.idle.Strategy, l.cfg.Thread, l.run)
	}
	if err != nil {
		l.lowerProcs()
		if l.cold.req != nil {
			close(l.cold.req)
			l.cold.ioWG.Wait()
			l.cold.req = nil // Close must not close it again
		}
		return err
	}
	l.thread = t
	l.started = true
	return nil
}

// Stop asks the loop thread to stop after its current iteration and
// returns at once; Done is closed once it has. Safe from any goroutine
// and from the loop's own callbacks, where Close (which waits for the
// thread) cannot be called. Close still has to release the Path.
func (l *Loop) Stop() { l.stop.Store(true) }

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
		switch {
		case l.thread != nil:
			l.thread.Wait()
		case l.started: // on a SharedThread, which closes done when the loop ends
			<-l.done
		default:
			close(l.done)
		}
		if l.cold.req != nil {
			close(l.cold.req)
			l.cold.ioWG.Wait()
		}
		l.snapshot()
		l.closeCounters()
		l.closeErr = errors.Join(l.err, l.path.Close())
	})
	return l.closeErr
}

func (l *Loop) clock() int64 {
	if l.vclock != nil {
		return l.vclock()
	}
	return int64(time.Since(l.epoch)) + 1
}

// Now is the loop's clock (monotonic ns), as passed to the cores.
func (l *Loop) Now() int64 { return l.clock() }

func (l *Loop) run() {
	for l.step() {
	}
}

// step runs one iteration, or the loop's end once Stop was called; false
// once the loop has ended (done is closed). A loop's own thread calls it
// until then; a SharedThread calls it in turn with its other loops'.
func (l *Loop) step() bool {
	if !l.stop.Load() {
		if l.iterate() {
			return true
		}
	} else {
		// Tell the sender this receiver is leaving (it stops waiting for
		// it at once), and flush so that a Close right after a Send still
		// sends it.
		if l.rcv != nil {
			l.rcv.Leave(l.clock(), l.out)
		}
		_ = l.flush()
		if l.sendRing != nil {
			l.publishProgress()
		}
	}
	l.lowerProcs()
	close(l.done)
	return false
}

// iterate runs one loop iteration; false means stop (error).
func (l *Loop) iterate() bool {
	l.ls.Iterations++
	l.now = l.clock()
	l.beat()
	work := false

	if (l.recvRing == nil || l.recvRing.Free() >= l.in.Cap()) && l.recvDue() {
		l.recvAt = l.now
		var n int
		var err error
		if l.idle.Parks() && l.waiter != nil && l.quiet() {
			n, err = l.waiter.RecvWait(l.in, l.epoch.Add(time.Duration(min(l.next, l.due))))
			l.now = l.clock()
			l.woke()
		} else {
			n, err = l.path.Recv(l.in)
		}
		if err != nil {
			return l.fail(err)
		}
		if l.rcv != nil {
			// A full batch: more input waits; a group receiver defers its
			// NAKs until it has read it.
			l.rcv.SetBacklog(n == l.in.Cap(), l.now)
		}
		if n > 0 {
			work = true
			l.ls.Datagrams += uint64(n)
			// One Status decision for the batch, not one per datagram.
			hold := l.rcv != nil && n > 1
			if hold {
				l.rcv.HoldStatus()
			}
			for i := 0; i < n; i++ {
				if j := l.receiverRun(i, n); j > i {
					// Datagrams i..j−1 all go to the Receiver as they are:
					// one call for the run.
					l.rcv.HandleRun(l.in, i, j, l.now, l.out, l.deliverFn)
					i = j - 1
					continue
				}
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
			if hold {
				l.rcv.ReleaseStatus(l.now, l.out)
			}
			l.checkEvents()
		}
	}

	if l.snd != nil && l.snd.RetxPending() && l.now < l.next {
		// NAKed retransmits that did not fit in an earlier batch continue
		// now, not at the next tick: under a burst of NAKs they would
		// otherwise pile up past the Sender's deferral queue and be
		// dropped (RetxDropped), costing the receiver a retry each. And
		// before new records: a repair never goes out behind data sent
		// after its NAK was read (the receiver's order rule counts on it).
		work = true
		l.snd.Tick(l.now, l.out)
	}
	if l.sendRing != nil && l.drainSendRing() {
		work = true
	}
	if l.cfg.OnPoll != nil {
		l.cfg.OnPoll(l, l.now)
	}
	// Cold service only when a read is pending, came back or is wanted
	// (len of a channel is a plain load; the select in serveCold is not).
	if l.snd != nil && (l.cold.pendOn || len(l.cold.done) > 0 || l.snd.ColdPending()) && l.serveCold() {
		work = true
	}
	if l.recvRing != nil {
		// The consumer's room is the Receiver's window: a Status goes out
		// at once when it opens.
		// Records delivered since the last call used room up: a consumer
		// that popped as many meanwhile leaves Free unchanged, yet the
		// Receiver must hear it (else its window stays shut for good).
		if free, exp := l.recvRing.Free(), l.rcv.ExpectedSeq(); free != l.room || exp != l.roomSeq {
			l.room, l.roomSeq = free, exp
			l.rcv.SetConsumerRoom(free, l.now, l.out)
		}
	}
	ticked := false
	if l.now >= l.next || l.now >= l.due {
		ticked = true
		if l.now < l.next {
			l.ls.EarlyTicks++
		}
		if err := l.tickCores(); err != nil {
			return l.fail(err)
		}
		l.checkEvents()
		if l.now >= l.next {
			l.next = l.now + l.tick
			if l.auth != nil {
				l.auth.apply()
			}
			l.snapshot()
		}
	}
	if l.out.Len() > 0 || l.back.Len() > 0 {
		work = true
		if err := l.flush(); err != nil {
			return l.fail(err)
		}
	}
	if l.sendRing != nil {
		l.publishProgress()
	}
	if work || ticked {
		l.due = l.deadline()
	}
	if work {
		l.idle.Reset()
	} else {
		l.ls.IdlePolls++
		l.idling(ticked)
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

// tickCores runs the cores' timers. What they owe the peer (a Status, a
// probe, a heartbeat) needs room in the batch, and the records that
// OnRecord or OnPoll sent this iteration may have filled it (a Batch of 1
// holds one datagram): left to an iteration without traffic, it never goes
// out on a busy two-way stream (a ping-pong where each loop finds the
// peer's next record every time it looks), and the peer's window closes on
// stale news. So while the batch is full after a Tick, flush and tick
// again (at most 3 more times: a probe, a Status, and what NAKs continue).
func (l *Loop) tickCores() error {
	for k := 0; ; k++ {
		if l.snd != nil {
			l.snd.Tick(l.now, l.out)
		}
		if l.rcv != nil {
			l.rcv.Tick(l.now, l.out)
		}
		if k == 3 || !l.out.Full() {
			return nil
		}
		l.ls.FullTicks++
		if err := l.flush(); err != nil {
			return err
		}
	}
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
	case l.io != nil && l.spins && l.cfg.Shared == nil && l.io.Flushing():
		// (A shared thread exists to leave the I/O a CPU of its own.)
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
	return l.out.Len() == 0 && l.back.Len() == 0 && !l.cold.pendOn && (l.snd == nil || !l.snd.RetxPending()) &&
		(l.sendRing == nil || l.sendRing.Len() == 0) && (l.snd == nil || !l.snd.ColdPending())
}

func (l *Loop) route(d []byte, from netip.AddrPort) {
	if l.auth != nil {
		var ok bool
		if d, ok = l.open(d, from); !ok {
			return
		}
	}
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

// receiverRun returns j > i when datagrams i..j−1 of l.in (of n) would
// each go from route straight to the Receiver's Handle, unchanged: in a
// loop without authentication, each from the Source when one is set
// (a receive-only loop also hands the Receiver NAKs and Status from
// elsewhere: a group's), and, in a loop that has a Sender too, none
// addressed to the Sender. Else it returns i. (What the Receiver
// delivers may be sent on from OnRecord, which leaves no retransmit
// pending: the run needs none of the per-datagram checks iterate makes
// after the Sender's input.)
func (l *Loop) receiverRun(i, n int) int {
	if l.rcv == nil || l.auth != nil {
		return i
	}
	src := l.cfg.Source
	if l.snd == nil && !src.IsValid() {
		return n
	}
	j := i
	for ; j < n; j++ {
		d, from := l.in.Msg(j)
		foreign := src.IsValid() && from != src
		if l.snd != nil && (toSender(d) || foreign) || l.snd == nil && foreign && !toSender(d) {
			break
		}
	}
	return j
}

func (l *Loop) deliver(h wire.Header, p []byte) {
	// What the Receiver queued before this record (a late start, the
	// Skip marker this record is) reaches the application first.
	if l.rcv.Events() > 0 {
		l.receiverEvents()
	}
	l.ls.Delivered++
	if l.cfg.OnRecord != nil {
		l.cfg.OnRecord(l, h, p)
	}
	if l.recvRing != nil {
		var seq uint64
		if len(p) >= 8 {
			seq = wire.Seq(p)
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

func (l *Loop) fail(err error) bool {
	if errors.Is(err, datapath.ErrClosed) && l.stop.Load() {
		return false
	}
	l.err = err
	l.emit(Event{Kind: EventError, At: l.now, Err: err})
	return false
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
	if l.auth != nil {
		// Sealed once: from here every message of out is sent or moved
		// to the backlog, and out is reset.
		l.auth.seal(l.out, 0)
	}
	from := 0
	if l.back.Len() == 0 {
		l.ls.Flushes++
		n, err := l.path.Send(l.out)
		if err != nil {
			return err
		}
		from = n
		l.fullSend = n == l.out.Cap()
	}
	for i := from; i < l.out.Len(); i++ {
		m, a := l.out.Msg(i)
		l.back.Append(m, a)
		l.ls.Backlogged++
	}
	l.out.Reset()
	return nil
}
