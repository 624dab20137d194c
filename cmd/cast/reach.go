package main

import (
	"fmt"
	"sync"
	"time"

	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/datapath/drop"
	"github.com/walcast/walcast/datapath/mmsg"
	"github.com/walcast/walcast/datapath/udp"
)

// reach tells a sender whether anyone listens at its peer address, from
// the ICMP errors (port unreachable) the kernel reports on a connected
// UDP socket: the datapath counts them as Refused. A receiver that
// listens never causes one; one that exits (it gave up, or was stopped)
// makes every later datagram, heartbeats included, come back refused.
// Without ICMP (filtered on the way) nothing is learnt and the verdict
// is nil: only the receiver's own feedback could tell more.
//
// A receiver asked for n records exits once it has them, so refusals
// after the last record was sent are normal, unless the receiver was
// still asking for repairs (NAKs) just before it went away.
type reach struct {
	p    datapath.Path
	naks func() uint64 // NAKs served so far (nil: unknown)
	mu   sync.Mutex
	// alive: send calls went through that no ICMP error answered. With
	// nobody listening the first datagram draws one, which the next send
	// call reports, and so on: a sample that saw 4 calls and no refusal
	// proves a listener; over a whole run nobody listening gives 1 to 2.7
	// calls per refusal (udp loses the refused call's datagram, mmsg
	// retries once and splits batches), so ≥ 3 per refusal (+8) does too.
	alive               bool
	lastCalls, lastRefd uint64
	lastNaks            uint64
	lastNakAt           time.Time
	lastRefusedAt       time.Time
	marked              bool
	markRefd            uint64    // refused count when the last record was sent
	refusingAtMark      bool      // refusals in the 250 ms before mark
	refusedAfterMark    time.Time // first refusal seen after mark
}

func newReach(p datapath.Path, naks func() uint64) *reach {
	r := &reach{p: p, naks: naks}
	r.lastCalls, r.lastRefd = pathCounters(p)
	return r
}

// pathCounters returns the send calls made and refused so far.
func pathCounters(p datapath.Path) (calls, refused uint64) {
	if d, ok := p.(*drop.Path); ok {
		p = d.Inner()
	}
	switch v := p.(type) {
	case *udp.Path:
		s := v.Stats()
		return s.SendCalls, s.Refused
	case *mmsg.Path:
		s := v.Stats()
		return s.SendCalls, s.Refused
	}
	return 0, 0
}

// sample records one interval; call it every few ms.
func (r *reach) sample() {
	r.mu.Lock()
	defer r.mu.Unlock()
	calls, refd := pathCounters(r.p)
	if (refd == 0 && calls >= 4) || calls >= 3*refd+8 {
		r.alive = true
	}
	if refd > r.lastRefd {
		r.lastRefusedAt = time.Now()
	}
	if r.marked && refd > r.markRefd && r.refusedAfterMark.IsZero() {
		r.refusedAfterMark = time.Now()
	}
	r.lastCalls, r.lastRefd = calls, refd
	if r.naks != nil {
		if n := r.naks(); n != r.lastNaks {
			r.lastNaks, r.lastNakAt = n, time.Now()
		}
	}
}

// mark says the last record is sent (heartbeats keep going while the
// sender lingers).
func (r *reach) mark() {
	r.sample()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.marked, r.markRefd = true, r.lastRefd
	r.refusingAtMark = !r.lastRefusedAt.IsZero() && time.Since(r.lastRefusedAt) < 250*time.Millisecond
}

// watch samples every 5 ms until stop is closed.
func (r *reach) watch(stop <-chan struct{}) {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			r.sample()
		}
	}
}

// nobody reports datagrams refused and none ever accepted so far.
func (r *reach) nobody() bool {
	r.sample()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastRefd > 0 && !r.alive
}

// verdict: exit 1 when nobody ever listened; exit 3 when the receiver
// went away while records were still being sent, or while it was still
// asking for repairs; nil otherwise (or when ICMP tells nothing).
func (r *reach) verdict(peer fmt.Stringer) error {
	r.sample()
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.lastRefd == 0:
		return nil
	case !r.alive:
		return failf("nobody is listening at %s: %d datagrams came back refused (ICMP port unreachable)", peer, r.lastRefd)
	case !r.marked:
		return nil // interrupted: the caller says so
	case r.refusingAtMark && r.lastRefd > r.markRefd:
		// Refused as the last records went out, and still at the end.
		return outcomef("the receiver at %s went away while records were being sent (%d datagrams refused, ICMP port unreachable): it gave up or was stopped", peer, r.lastRefd)
	case !r.refusedAfterMark.IsZero() && !r.lastNakAt.IsZero() && r.lastNakAt.After(r.refusedAfterMark.Add(-300*time.Millisecond)):
		return outcomef("the receiver at %s went away while it was still asking for repairs (ICMP port unreachable after its last NAK): it gave up", peer)
	}
	return nil
}
