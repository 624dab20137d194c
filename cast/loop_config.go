package cast

import (
	"errors"
	"runtime"
	"sync"

	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/internal/defaults"
	"github.com/walcast/walcast/wal"
)

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
// LoopConfig.KeepGOMAXPROCS).
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
	if l.cfg.KeepGOMAXPROCS {
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
	case wal.TypeNak, protocol.TypeStatus, protocol.TypeBitmapNak:
		return true
	}
	return false
}

// checkRecord refuses, before it is queued, a record the Sender would
// drop: a control type, a payload shorter than its 8-byte seq, or a frame
// larger than the loop's datagram slot. The errors are the Sender's own
// (preallocated: Publish stays allocation-free).
func (l *Loop) checkRecord(typ uint16, payload []byte) error {
	switch {
	case protocol.IsControl(typ):
		return protocol.ErrControlType
	case len(payload) < 8:
		return protocol.ErrPayloadShort
	case wal.HeaderSize+len(payload) > l.cfg.Slot:
		return protocol.ErrFrameTooLarge
	}
	return nil
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
