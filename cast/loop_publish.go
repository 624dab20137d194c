package cast

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/wal"
)

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
