package protocol

import (
	"github.com/walcast/walcast/wire"
)

// The peer/group set: receivers of one multicast stream (a walcast
// extension) send their NAKs and Status to the control group, so each
// hears the others'. This file keeps which other receivers exist (from
// their Status and NAK frames) and applies the NAKs heard from them to
// the loss detector's gaps: a NAK from another receiver for the seqs this
// one misses makes its own unnecessary until the repair has had time to
// come. The back-off draw itself is groupBackoff (receiver_delay.go).

// maxPeers is how many other receivers a Receiver remembers; a larger
// group counts as maxPeers+1 (the back-off grows with ln(group), so the
// cap costs little).
const maxPeers = 64

// peerSet remembers the other receivers heard recently, by receiver id.
//
// Invariant: n ≤ maxPeers; id[0:n] are distinct (the Receiver never
// adds its own id) and at[i] is when id[i] was last heard; a full set
// replaces its longest silent member.
type peerSet struct {
	id  [maxPeers]uint64
	at  [maxPeers]int64
	n   int
	ttl int64 // forget a peer silent this long, ns
}

// heard notes receiver id (nonzero) heard at now.
func (p *peerSet) heard(id uint64, now int64) {
	oldest := 0
	for i := range p.n {
		if p.id[i] == id {
			p.at[i] = now
			return
		}
		if p.at[i] < p.at[oldest] {
			oldest = i
		}
	}
	if p.n < maxPeers {
		p.id[p.n], p.at[p.n] = id, now
		p.n++
		return
	}
	p.id[oldest], p.at[oldest] = id, now // full: the longest silent one goes
}

// group is the group size estimate: this receiver plus the others heard
// within ttl.
func (p *peerSet) group(now int64) int {
	g := 1
	for i := range p.n {
		if now-p.at[i] < p.ttl {
			g++
		}
	}
	return g
}

// GroupSize is the receiver's estimate of its group: itself plus the
// other receivers whose Status or NAKs it heard within the silence time.
// 1 means it is alone (unicast, or the only receiver): it then NAKs at
// once, exactly as in unicast.
func (r *Receiver) GroupSize(now int64) int { return r.peers.group(now) }

// heardNak handles a NAK another receiver sent to the group: the seqs it
// asks for that this receiver also misses need no NAK of its own until
// the repair has had time to come (one re-NAK delay). A NAK carrying
// this receiver's own id is its own, looped back by the host.
func (r *Receiver) heardNak(p []byte, now int64) {
	nak, err := wire.ParseNak(p)
	if err != nil {
		r.stats.Bad.ShortPayload++
		return
	}
	id := le.Uint64(p[16:])
	if id == r.id {
		r.stats.OwnNaks++
		return
	}
	r.stats.GroupNaks++
	if id != 0 {
		r.peers.heard(id, now)
	}
	if r.expected == 0 || nak.Count == 0 || nak.From > r.highest {
		return
	}
	from := max(nak.From, r.expected)
	to := r.highest
	if nak.Count-1 < to-nak.From { // no overflow: Count ≥ 1
		to = nak.From + nak.Count - 1
	}
	if edge := r.expected + r.window - 1; to > edge {
		to = edge
	}
	r.loss.heard(from, to, &r.ring, r.RTT(), r.peer.probes, now)
}

// heardStatus notes the receiver of another receiver's Status (a group
// member).
func (r *Receiver) heardStatus(p []byte, now int64) {
	st, err := wire.ParseStatus(p)
	if err != nil {
		r.stats.Bad.ShortPayload++
		return
	}
	if st.ReceiverID != r.id {
		r.stats.GroupStatus++
		r.peers.heard(st.ReceiverID, now)
	}
}
