package fanout

import (
	"encoding/binary"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/wire"
)

// Wire types the taps recognise (spec §2 and the walcast extensions).
const (
	typeStatus    = 0x10
	typeNak       = 0x11
	typeHeartbeat = 0x12
	typeReserved  = 0x14
	typeEnd       = 0x16
)

func control(t uint16) bool {
	return t == typeStatus || t == typeNak || t == typeHeartbeat || t == typeReserved || t == typeEnd
}

// frames calls f for every whole frame of a datagram (one, or several
// coalesced) with its type and, for data, its seq.
func frames(d []byte, f func(typ uint16, seq uint64, p []byte)) {
	for len(d) >= wire.HeaderSize {
		typ := binary.LittleEndian.Uint16(d[2:])
		n := wire.HeaderSize + int(binary.LittleEndian.Uint16(d[4:]))
		if n > len(d) {
			return
		}
		p := d[wire.HeaderSize:n]
		var seq uint64
		if !control(typ) && len(p) >= 8 {
			seq = binary.LittleEndian.Uint64(p)
		}
		f(typ, seq, p)
		d = d[n:]
	}
}

// senderTap counts what a sender puts on the wire: datagrams, data
// frames, and repairs (data frames for a seq at or below the highest
// already sent).
type senderTap struct {
	datapath.Path
	highest                  uint64
	datagrams, data, repairs atomic.Uint64
}

func (t *senderTap) Send(v *batch.Vec) (int, error) {
	n, err := t.Path.Send(v)
	for i := range n {
		m, _ := v.Msg(i)
		t.datagrams.Add(1)
		frames(m, t.frame)
	}
	return n, err
}

func (t *senderTap) frame(typ uint16, seq uint64, _ []byte) {
	if control(typ) || seq == 0 {
		return
	}
	t.data.Add(1)
	if seq <= t.highest {
		t.repairs.Add(1)
		return
	}
	t.highest = seq
}

// Tracker records, per seq, whether a data frame arrived and whether it
// arrived late (after a higher seq: lost on its first transmission and
// repaired). Any protocol's receiver can feed it the seqs it reads off
// the wire. Not safe for concurrent use.
type Tracker struct {
	records uint64
	seen    []uint64 // bit per seq 1..records
	missing []uint64 // bit per seq: a higher seq arrived first
	maxSeen uint64
	repairs uint64
	dups    uint64
}

// NewTracker tracks seqs 1..records.
func NewTracker(records int) *Tracker {
	w := (records + 64) / 64
	return &Tracker{records: uint64(records), seen: make([]uint64, w), missing: make([]uint64, w)}
}

func bit(b []uint64, s uint64) bool { return b[s>>6]&(1<<(s&63)) != 0 }
func set(b []uint64, s uint64)      { b[s>>6] |= 1 << (s & 63) }

// Observe notes one data frame of seq arriving.
func (t *Tracker) Observe(seq uint64) {
	if seq == 0 || seq > t.records {
		return
	}
	if bit(t.seen, seq) {
		t.dups++
		return
	}
	set(t.seen, seq)
	if seq > t.maxSeen {
		for s := t.maxSeen + 1; s < seq; s++ {
			set(t.missing, s)
		}
		t.maxSeen = seq
		return
	}
	if bit(t.missing, seq) {
		t.repairs++
	}
}

// Repairs counts frames that filled a seq seen missing; Duplicates
// frames for a seq already received.
func (t *Tracker) Repairs() uint64    { return t.repairs }
func (t *Tracker) Duplicates() uint64 { return t.dups }

// Lost is the set of seqs lost at this receiver (a bitmap, bit s = seq
// s): those first seen after a higher seq, plus those never seen below
// the highest seen (delivered some other way, e.g. TCP catch-up). Seqs
// above the highest seen (a lost tail) are not counted.
func (t *Tracker) Lost() []uint64 {
	out := make([]uint64, len(t.missing))
	copy(out, t.missing)
	for s := uint64(1); s < t.maxSeen; s++ {
		if !bit(t.seen, s) {
			set(out, s)
		}
	}
	return out
}

// LostEvents folds several receivers' losses into lost-record events: a
// seq lost by at least one receiver is one event.
type LostEvents struct{ seqs []uint64 }

// Add folds in t's lost seqs and returns how many t lost.
func (u *LostEvents) Add(t *Tracker) uint64 {
	lost := t.Lost()
	if u.seqs == nil {
		u.seqs = make([]uint64, len(lost))
	}
	n := uint64(0)
	for i, w := range lost {
		u.seqs[i] |= w
		n += uint64(bits.OnesCount64(w))
	}
	return n
}

// Count is the number of distinct seqs lost by at least one receiver.
func (u *LostEvents) Count() uint64 {
	n := uint64(0)
	for _, w := range u.seqs {
		n += uint64(bits.OnesCount64(w))
	}
	return n
}

// receiverTap feeds a Tracker with the data frames a receiver's datapath
// reads and counts the control frames it sends.
type receiverTap struct {
	datapath.Path
	*Tracker
	nakFrames, nakSeqs, status atomic.Uint64
	dead                       atomic.Bool // killed: sends nothing any more
}

func newReceiverTap(p datapath.Path, records int) *receiverTap {
	return &receiverTap{Path: p, Tracker: NewTracker(records)}
}

func (t *receiverTap) Recv(v *batch.Vec) (int, error) {
	n, err := t.Path.Recv(v)
	for i := range n {
		m, _ := v.Msg(i)
		frames(m, t.data)
	}
	return n, err
}

func (t *receiverTap) data(typ uint16, seq uint64, _ []byte) {
	if !control(typ) {
		t.Observe(seq)
	}
}

func (t *receiverTap) Send(v *batch.Vec) (int, error) {
	if t.dead.Load() {
		return v.Len(), nil // a killed process sends nothing
	}
	n, err := t.Path.Send(v)
	for i := range n {
		m, _ := v.Msg(i)
		frames(m, t.control)
	}
	return n, err
}

func (t *receiverTap) control(typ uint16, _ uint64, p []byte) {
	switch typ {
	case typeNak:
		t.nakFrames.Add(1)
		if len(p) >= 16 {
			t.nakSeqs.Add(binary.LittleEndian.Uint64(p[8:]))
		}
	case typeStatus:
		t.status.Add(1)
	}
}

// waiter is a datapath that can park until a datagram arrives (the loop's
// Park idle strategy needs it).
type waiter interface {
	RecvWait(v *batch.Vec, deadline time.Time) (int, error)
}

func (t *senderTap) RecvWait(v *batch.Vec, deadline time.Time) (int, error) {
	return t.Path.(waiter).RecvWait(v, deadline)
}

// ReleaseWait forwards to the tapped Path (datapath.ReleaseWait).
func (t *senderTap) ReleaseWait() { datapath.ReleaseWait(t.Path) }

// ReleaseWait forwards to the tapped Path (datapath.ReleaseWait).
func (t *receiverTap) ReleaseWait() { datapath.ReleaseWait(t.Path) }

func (t *receiverTap) RecvWait(v *batch.Vec, deadline time.Time) (int, error) {
	n, err := t.Path.(waiter).RecvWait(v, deadline)
	for i := range n {
		m, _ := v.Msg(i)
		frames(m, t.data)
	}
	return n, err
}
