package cast

import (
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"time"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/internal/cfgerr"
	"github.com/walcast/walcast/wire"

	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/internal/defaults"
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
	// Shared, when set, runs the loop on that SharedThread, in turn with
	// the other loops attached to it, instead of on a thread of its own:
	// Thread is then not applied and Idle must spin (its zero value).
	Shared *SharedThread
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
	OnRecord func(l *Loop, h wire.Header, payload []byte)
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
	// Keys, when set, authenticate every datagram (docs/auth.md): each
	// one sent carries a trailer tagged with Keys.Send, and only
	// datagrams whose trailer verifies under one of the keys reach the
	// cores (the rest are dropped and counted: Loop.AuthStats). The cores'
	// datagrams are then at most Slot − wire.TrailerSize bytes, so a
	// sealed one still fits Slot. Both ends need the same keys; nil: the
	// reference's bytes, unauthenticated.
	Keys *Keys
	// RaiseGOMAXPROCS lets Start raise GOMAXPROCS, a process-wide
	// setting, to the number of spinning loops + 2 when it is lower: a
	// spinning loop holds a P for good, and the GC, the WAL's and the
	// loop's I/O goroutines and the application need the others (a loop
	// with the Park strategy does not count). Start undoes its change
	// when it fails, and when the last spinning loop stops the value
	// found before the first raise is restored, unless something else
	// changed GOMAXPROCS meanwhile. By default GOMAXPROCS is left alone:
	// a program that runs n spinning loops without it needs GOMAXPROCS ≥
	// n + 2 of its own (affinity.EnsureGOMAXPROCS).
	RaiseGOMAXPROCS bool
	// Counters publishes the loop's and its cores' counters in the
	// process's counters file for `cast stat` (on by default; Off: none).
	Counters Counters
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
	case c.Slot < wire.HeaderSize+8 || c.Slot > protocol.MaxDatagram:
		return fmt.Errorf("%w: loop Slot %d outside %d..%d", ErrConfig, c.Slot, wire.HeaderSize+8, protocol.MaxDatagram)
	case c.Keys != nil && c.Slot-wire.TrailerSize < wire.HeaderSize+8:
		return fmt.Errorf("%w: loop Slot %d leaves no room for a frame beside the %d-byte authentication trailer", ErrConfig, c.Slot, wire.TrailerSize)
	case c.TickInterval <= 0:
		return fmt.Errorf("%w: loop TickInterval %v must be > 0", ErrConfig, c.TickInterval)
	case c.SendRing < 0 || c.RecvRing < 0 || c.ColdBuffers < 0 || c.ColdBufSize < 0 || c.RingSlot < 0:
		return fmt.Errorf("%w: loop ring and cold sizes must be ≥ 0", ErrConfig)
	case c.SendRing > 0 && c.Sender == nil:
		return fmt.Errorf("%w: SendRing without a Sender", ErrConfig)
	case c.RecvRing > 0 && c.Receiver == nil:
		return fmt.Errorf("%w: RecvRing without a Receiver", ErrConfig)
	}
	if c.Shared != nil && c.Idle.Strategy != affinity.Spin {
		return fmt.Errorf("%w: a loop on a SharedThread spins; idle strategy %v would stall the thread's other loops", ErrConfig, c.Idle.Strategy)
	}
	if c.Idle.Parks() {
		if _, ok := c.Path.(Waiter); !ok {
			return fmt.Errorf("%w: idle strategy park needs a Path with RecvWait", ErrConfig)
		}
	}
	return cfgerr.Nest("cast", ErrConfig, "Thread", c.Thread.Validate())
}

// withDefaults returns c with every zero field set to its default.
func (c LoopConfig) withDefaults() LoopConfig {
	d := DefaultLoopConfig()
	c.Batch = defaults.Or(c.Batch, d.Batch)
	c.Slot = defaults.Or(c.Slot, d.Slot)
	c.TickInterval = defaults.Or(c.TickInterval, d.TickInterval)
	c.ColdBuffers = defaults.Or(c.ColdBuffers, d.ColdBuffers)
	return c
}

// procs is the GOMAXPROCS bookkeeping of the spinning loops (see
// LoopConfig.RaiseGOMAXPROCS).
var procs struct {
	mu       sync.Mutex
	spinning int // running loops that busy-poll
	found    int // GOMAXPROCS before the first raise; 0: not raised
	set      int // the value the last raise set
}

// raiseProcs counts a spinning loop and makes room for it.
func (l *Loop) raiseProcs() {
	if l.idle.Parks() {
		return
	}
	procs.mu.Lock()
	defer procs.mu.Unlock()
	procs.spinning++
	l.spins = true
	if !l.cfg.RaiseGOMAXPROCS {
		return
	}
	want := procs.spinning + 2
	if n := runtime.GOMAXPROCS(0); n < want {
		if procs.found == 0 {
			procs.found = n
		}
		runtime.GOMAXPROCS(want)
		procs.set = want
	}
}

// lowerProcs undoes raiseProcs: when the last spinning loop stops, the
// value found before the first raise comes back unless GOMAXPROCS was
// changed by someone else meanwhile.
func (l *Loop) lowerProcs() {
	if !l.spins {
		return
	}
	procs.mu.Lock()
	defer procs.mu.Unlock()
	l.spins = false
	procs.spinning--
	if procs.spinning == 0 && procs.found != 0 {
		if runtime.GOMAXPROCS(0) == procs.set {
			runtime.GOMAXPROCS(procs.found)
		}
		procs.found, procs.set = 0, 0
	}
}

// toSender reports whether datagram d carries a frame a receiver sends
// to a sender (NAK, Status, bitmap NAK), by its first frame's type.
func toSender(d []byte) bool {
	if len(d) < 4 {
		return false
	}
	switch uint16(d[2]) | uint16(d[3])<<8 {
	case wire.TypeNak, wire.TypeStatus, wire.TypeBitmapNak:
		return true
	}
	return false
}

// checkRecord refuses, before it is queued, a record the Sender would
// drop: a reserved type (wire.Reserved, the Sender's own rule), a
// payload shorter than its 8-byte seq, or a frame larger than the
// Sender's MaxFrame or than the room the loop's datagrams leave for
// frames (Slot, less the trailer with keys). The errors are the Sender's
// own (preallocated: Publish stays allocation-free).
func (l *Loop) checkRecord(typ uint16, payload []byte) error {
	switch {
	case wire.Reserved(typ):
		return wire.ErrReserved
	case len(payload) < 8:
		return protocol.ErrPayloadShort
	case wire.HeaderSize+len(payload) > l.maxRecord():
		return protocol.ErrFrameTooLarge
	}
	return nil
}

// maxRecord is the largest data frame the loop sends, header included.
func (l *Loop) maxRecord() int {
	if l.snd != nil {
		return min(l.out.SlotSize(), l.snd.MaxFrame())
	}
	return l.out.SlotSize()
}

// noteSendErr keeps the last error for which the Sender refused (and the
// loop dropped) a record from SendRing; backpressure is not one.
func (l *Loop) noteSendErr(err error) {
	if err == nil || err == protocol.ErrBatchFull || errors.Is(err, wal.ErrBackpressure) {
		return
	}
	l.sendErr.Store(&err)
}

// SendErr is the last error for which the Sender refused a record taken
// from SendRing (the record was dropped and counted in
// LoopStats.PublishErrs), or nil.
func (l *Loop) SendErr() error {
	if p := l.sendErr.Load(); p != nil {
		return *p
	}
	return nil
}
