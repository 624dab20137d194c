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
// another goroutine: use Publish there. A record that fills the batch
// (with a Batch of 1, every record) goes to the Path at once, not at the
// end of the iteration. ErrBatchFull means the path is
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
	if err == nil {
		l.flushFull()
	}
	return seq, l.refused(err)
}

// flushFull sends the batch now when a Send left it full, not at the end
// of the iteration. The next Send would flush it first anyway, and what
// the iteration still emits queues behind it either way, so the order on
// the wire is the same. With Batch 1 (the latency setting) a reply made
// in OnRecord leaves before the rest of the iteration's bookkeeping,
// which shortens every round trip (docs/bench.md, "The reply leaves with
// its batch"). A path error is not the caller's: the record is sequenced
// and in the hot ring. The batch then stays unsent, and the iteration's
// own flush meets the error again and fails the loop, as it did before
// this early flush.
func (l *Loop) flushFull() {
	if l.out.Full() {
		_ = l.flush()
	}
}

// SendBatch is Send for several records of type typ, from the loop's
// goroutine (OnPoll): it sends them in order, flushing the batch to the
// Path whenever it fills, and returns how many it sent and the error
// that stopped it, as Send would have returned it for payloads[n]. It
// sends what a loop of Send sends, with the per-record bookkeeping done
// once per batch where the stream's state allows
// (protocol.Sender.SendBatch).
func (l *Loop) SendBatch(typ uint16, payloads [][]byte) (int, error) {
	if l.snd == nil {
		return 0, fmt.Errorf("%w: loop has no Sender", ErrConfig)
	}
	n := 0
	for flushed := false; ; flushed = true {
		k, err := l.snd.SendBatch(typ, payloads[n:], l.now, l.out)
		n += k
		// Full: flush and go on; full again right after a flush, with
		// nothing sent, is returned as Send returns it.
		if err != protocol.ErrBatchFull || k == 0 && flushed {
			if err == nil {
				l.flushFull()
			}
			return n, l.refused(err)
		}
		if ferr := l.flush(); ferr != nil {
			return n, ferr
		}
	}
}

// refused notes what a refused Send means for the loop and returns err.
func (l *Loop) refused(err error) error {
	if err != nil && err != protocol.ErrBatchFull && err != protocol.ErrBackpressure && errors.Is(err, wal.ErrBackpressure) {
		l.backpressured = true // the WAL's, not flow control's: the loop must keep reading Status
	}
	return err
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
// waits as WaitProgress does.
func (l *Loop) PublishWait(ctx context.Context, typ uint16, payload []byte) error {
	for {
		err := l.Publish(typ, payload)
		if err != ErrRingFull && err != protocol.ErrBackpressure {
			return err
		}
		select {
		case <-l.done:
			return ErrLoopStopped
		default:
		}
		if err := l.WaitProgress(ctx); err != nil {
			return err
		}
	}
}

// WaitProgress is how this package waits for the loop (PublishWait, and
// a Producer's Publish and Flush): it returns once the loop has run
// another iteration, which took what it could from SendRing and handed
// what the cores produced to the Path, or after at most 10 ms, or when
// the loop has stopped (nil: see Done); ctx's error when ctx ends. Most
// calls only yield: a spinning loop frees room within microseconds, far
// below a timer's cost; every 64th parks. Call it from any goroutine but
// the loop's.
func (l *Loop) WaitProgress(ctx context.Context) error {
	if l.pub.spins.Add(1)%64 != 0 {
		runtime.Gosched()
		return ctx.Err()
	}
	l.pub.waiting.Add(1)
	defer l.pub.waiting.Add(-1)
	t := time.NewTimer(10 * time.Millisecond)
	defer t.Stop()
	select {
	case <-l.pub.wake:
	case <-t.C:
	case <-l.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// Sent reports how far the loop got with SendRing: n records taken from
// it (sent, or refused by the Sender: see SendErr) and lastSeq, the last
// seq the Sender assigned (records sent with Send from a callback
// included), as of the last iteration that left nothing waiting to be
// handed to the Path (0, 0 without a SendRing). Safe from any goroutine.
func (l *Loop) Sent() (n, lastSeq uint64) { return l.pub.sentN.Load(), l.pub.sentSeq.Load() }

// publishProgress runs at the end of each iteration of a loop with a
// SendRing: it publishes Sent once nothing waits for the Path, and wakes
// the goroutines in WaitProgress.
func (l *Loop) publishProgress() {
	if l.out.Len() == 0 && l.back.Len() == 0 {
		if n := l.ls.Published + l.ls.PublishErrs; n != l.pub.sentN.Load() {
			l.pub.sentN.Store(n)
		}
		if s := l.snd.NextSeq() - 1; s != l.pub.sentSeq.Load() {
			l.pub.sentSeq.Store(s)
		}
	}
	if l.pub.waiting.Load() > 0 {
		select {
		case l.pub.wake <- struct{}{}:
		default:
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
	for left := l.out.Cap(); left > 0; {
		n, typ := l.sendRing.peekRun(l.pubRun[:min(left, len(l.pubRun))])
		if n == 0 {
			break
		}
		// A run of one type in one call (SendBatch: what a Send each
		// would send); what it stopped at is handled as Send's refusal.
		k, err := l.SendBatch(typ, l.pubRun[:n])
		clear(l.pubRun[:n]) // no slot stays referenced
		if k > 0 {
			l.sendRing.popN(k)
			l.ls.Published += uint64(k)
			l.windowShut.Store(false)
			did = true
			left -= k
		}
		if err == nil {
			continue
		}
		if err == protocol.ErrBackpressure {
			l.windowShut.Store(true)
			break // leave it queued until the window opens
		}
		l.noteSendErr(err) // a failing WAL flush is backpressure too: say so
		if err == protocol.ErrBatchFull || errors.Is(err, wal.ErrBackpressure) {
			break // leave it queued
		}
		// The Sender refused this record for good: dropped, counted.
		l.windowShut.Store(false)
		l.ls.PublishErrs++
		l.sendRing.popN(1)
		did = true
		left--
	}
	return did
}
