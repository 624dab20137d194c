package cast

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/replay"
)

// onPoll runs on the loop thread every iteration: a sticky outcome the
// receiver's event reported (onLoopEvent) is handled here, on the same
// thread as the receiver, so the catch-up and the reset need no hand-off
// (the receiver drops its input meanwhile and the kernel buffers what
// arrives).
func (c *Consumer) onPoll(l *Loop, now int64) {
	c.publish()
	if c.err != nil {
		l.Stop()
		return
	}
	if o := c.sticky; o.Kind != protocol.Live {
		c.sticky = protocol.Outcome{}
		if err := c.escalate(o, now); err != nil {
			c.fail(err)
		}
	}
}

// bootstrap catches up before going live. An empty stream (every
// endpoint answers NotAvailable while the tip is 0) goes live at seq 1.
func (c *Consumer) bootstrap(ctx context.Context) error {
	start := time.Now()
	from := c.tip + 1
	tcp0 := c.tcpRecords.Load()
	c.event(Event{Kind: EventCatchingUp, Bootstrap: true, From: from})
	tip, err := c.cl.CatchUpOnce(ctx, c.tcpRecord)
	if err != nil && ctx.Err() == nil && c.err == nil && !(errors.Is(err, replay.ErrNotAvailable) && c.tip == 0) {
		tip, err = c.cl.CatchUp(ctx, c.tcpRecord)
	} else if err != nil && ctx.Err() == nil && c.err == nil {
		err = nil // empty stream: nothing to catch up
	}
	if c.err != nil {
		if c.err == ErrStop {
			return nil
		}
		return c.err
	}
	if err != nil {
		return fmt.Errorf("cast: consumer bootstrap: %w", err)
	}
	c.catchUps.Add(1)
	c.event(Event{Kind: EventCaughtUp, Bootstrap: true, From: from, To: tip, Records: c.tcpRecords.Load() - tcp0, Duration: time.Since(start)})
	c.r.ResetAfterReplay(c.tip)
	return nil
}

// escalate handles a sticky outcome: catch up over TCP from the tip,
// reset the receiver to the new tip, resume.
func (c *Consumer) escalate(o protocol.Outcome, now int64) error {
	start := time.Now()
	c.escalations.Add(1)
	if c.cl == nil {
		return fmt.Errorf("cast: consumer (no catch-up): %w", o.Err())
	}
	switch o.Kind {
	case protocol.Faulted:
		c.faults.Add(1)
	case protocol.Reconnect:
		c.reconnects.Add(1)
	case protocol.SenderRestarted:
		// A producer with a WAL continues its seqs after a restart. A
		// heartbeat below our tip is either stale (sent before a catch-up
		// moved the tip, read after the reset) or a producer that lost
		// records we delivered. Ask it for our tip record.
		same, err := c.cl.Verify(c.ctx, c.tip, c.tipCRC, c.crcKnow, c.verifyWait())
		if err != nil {
			return fmt.Errorf("cast: consumer verifying tip %d after %v: %w", c.tip, o.Kind, err)
		}
		if !same {
			return fmt.Errorf("%w: %w", ErrSenderBehind, o.Err())
		}
		c.stale.Add(1)
		c.r.ResetAfterReplay(c.tip)
		c.event(Event{Kind: EventLive})
		return nil
	}
	from := c.tip + 1
	tcp0 := c.tcpRecords.Load()
	c.cl.SetTip(c.tip)
	c.event(Event{Kind: EventCatchingUp, From: from, Outcome: o})
	target := max(c.r.HighestSeen(), o.Seq, o.GapEnd)
	if _, err := c.cl.CatchUpTo(c.ctx, target, c.grace(), c.tcpRecord); err != nil && c.err == nil {
		return fmt.Errorf("cast: consumer catch-up after %v: %w", o.Kind, err)
	}
	if c.err != nil {
		return c.err
	}
	d := time.Since(start)
	c.catchUps.Add(1)
	c.lastRecovery.Store(int64(d))
	c.event(Event{Kind: EventCaughtUp, From: from, To: c.tip, Records: c.tcpRecords.Load() - tcp0, Duration: d})
	c.r.ResetAfterReplay(c.tip)
	c.event(Event{Kind: EventLive})
	return nil
}

func (c *Consumer) verifyWait() time.Duration {
	if c.cfg.Advanced.VerifyWait == 0 {
		return defaultVerifyWait
	}
	return c.cfg.Advanced.VerifyWait
}

func (c *Consumer) grace() time.Duration {
	switch {
	case c.cfg.Advanced.CatchUpGrace == 0:
		return defaultCatchUpGrace
	case c.cfg.Advanced.CatchUpGrace < 0:
		return 0
	}
	return c.cfg.Advanced.CatchUpGrace
}

// persister writes the tip file while Run runs (at most every
// TipInterval, off the loop thread) and once more when it stops.
func (c *Consumer) persister() (stop func()) {
	if c.cl == nil {
		return func() {}
	}
	return c.cl.StartPersister()
}
