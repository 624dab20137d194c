package cast

import (
	"context"
	"fmt"
	"time"
)

// End ends the stream after the last record Publish accepted, as
// Loop.End and `cast send` do: Publish and TryPublish return ErrEnded
// from the call on; once every accepted record has been sent (and, with a
// WAL, is durable: Flush), the sender sends the session end marker and
// repeats it every heartbeat interval in place of the idle heartbeat,
// while it still serves NAKs, so a receiver that lost the marker or the
// tail learns where the stream ends and repairs it. End then waits until
// every receiver in the flow-control table has left (a Consumer ends its
// Run once it has delivered everything up to the marker, and says so),
// was dropped for silence (Sender.ReceiverTimeout), or ctx ends: the
// bound. It returns nil when no receiver remains, else an error wrapping
// ctx's naming how many did not confirm; Flush's error when the records
// could not be sent. Close afterwards stops the repeats.
//
// The marker is negotiated: it goes out only once a receiver has sent
// Status (a walcast receiver); a reference receiver sees the heartbeats
// go on, and End returns at once when no receiver ever sent Status.
// Calling End again waits again for the receivers.
func (p *Producer) End(ctx context.Context) error {
	p.pubMu.Lock() // a Publish in progress finishes first; later ones see ending
	p.ending.Store(true)
	p.pubMu.Unlock()
	if err := p.Flush(ctx); err != nil {
		return err
	}
	p.endReq.Store(true)
	select {
	case <-p.endDone:
	case <-p.loop.Done():
		return p.ended(p.fault())
	case <-ctx.Done():
		return ctx.Err()
	}
	// The flow-control table is at most one TickInterval old: a receiver
	// that left is gone from it within a tick of its Leave.
	for {
		n := len(p.loop.Receivers())
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cast: producer: end: %d receivers did not leave: %w", n, ctx.Err())
		case <-p.loop.Done():
			return p.ended(p.fault())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// ended is End's error when the loop stopped under it.
func (p *Producer) ended(err error) error {
	if err == nil {
		err = ErrClosed
	}
	return fmt.Errorf("cast: producer: end: %w", err)
}
