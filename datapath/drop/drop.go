// Package drop wraps a datapath.Path and loses a seeded, reproducible
// fraction of the datagrams it receives and/or sends: the `-drop PCT`
// of the CLI and the loss injection of the real-socket tests. It owns no
// socket and allocates nothing per call.
package drop

import (
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath"
)

// Config says what to lose.
type Config struct {
	RecvPct float64 // percent of received datagrams lost, 0..100
	SendPct float64 // percent of sent datagrams lost, 0..100
	DupPct  float64 // percent of sent datagrams sent twice, 0..100
	Seed    uint64  // PRNG seed (0 picks a fixed one)
	// Spare is the number of received datagrams passed before receive
	// loss starts (a receiver with ReceiverConfig.StartNow begins at the
	// first record it hears; losing that one moves where it begins).
	Spare int
}

// Path is a lossy view of another Path.
type Path struct {
	inner  datapath.Path
	waiter interface {
		RecvWait(*batch.Vec, time.Time) (int, error)
	}
	recvThr uint64
	sendThr uint64
	dupThr  uint64
	state   uint64
	spare   int
	kept    *batch.Vec
	idx     []int // kept[i] is original message idx[i]

	recvDropped, sendDropped, duplicated atomic.Uint64
}

var _ datapath.Path = (*Path)(nil)

// New wraps inner. batchCap and slot size the internal send Vec (use the
// loop's Batch and Slot).
func New(inner datapath.Path, c Config, batchCap, slot int) *Path {
	p := &Path{
		inner:   inner,
		recvThr: threshold(c.RecvPct),
		sendThr: threshold(c.SendPct),
		dupThr:  threshold(c.DupPct),
		spare:   c.Spare,
		state:   c.Seed,
		kept:    batch.New(2*batchCap, slot),
		idx:     make([]int, 2*batchCap),
	}
	if p.state == 0 {
		p.state = 0x9e3779b97f4a7c15
	}
	p.waiter, _ = inner.(interface {
		RecvWait(*batch.Vec, time.Time) (int, error)
	})
	return p
}

func threshold(pct float64) uint64 {
	if pct <= 0 {
		return 0
	}
	if pct >= 100 {
		return ^uint64(0)
	}
	return uint64(pct / 100 * float64(^uint64(0)))
}

// next is xorshift64*: fast, seeded, good enough for loss patterns.
func (p *Path) next() uint64 {
	x := p.state
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	p.state = x
	return x * 0x2545f4914f6cdd1d
}

func (p *Path) lose(thr uint64) bool { return thr != 0 && p.next() < thr }

// Send forwards the messages that survive to the inner Path and reports
// the lost ones as sent.
func (p *Path) Send(v *batch.Vec) (int, error) {
	if p.sendThr == 0 && p.dupThr == 0 {
		return p.inner.Send(v)
	}
	p.kept.Reset()
	n := min(v.Len(), p.kept.Cap()/2)
	for i := 0; i < n; i++ {
		if p.lose(p.sendThr) {
			p.sendDropped.Add(1)
			continue
		}
		m, a := v.Msg(i)
		p.idx[p.kept.Len()] = i
		p.kept.Append(m, a)
		if p.lose(p.dupThr) {
			p.duplicated.Add(1)
			p.idx[p.kept.Len()] = i + 1 // the copy is the last of message i
			p.kept.Append(m, a)
		}
	}
	if p.kept.Len() == 0 {
		return n, nil
	}
	k, err := p.inner.Send(p.kept)
	if k == p.kept.Len() {
		return n, err
	}
	return p.idx[k], err // everything before the first unsent kept message
}

// Recv receives from the inner Path and removes the lost datagrams.
func (p *Path) Recv(v *batch.Vec) (int, error) {
	n, err := p.inner.Recv(v)
	return p.filter(v, n), err
}

// RecvWait forwards to the inner Path's RecvWait (which must exist for
// the park idle strategy) and removes the lost datagrams. A wait whose
// datagrams were all lost returns (0, nil) like a deadline.
func (p *Path) RecvWait(v *batch.Vec, deadline time.Time) (int, error) {
	if p.waiter == nil {
		return p.Recv(v)
	}
	n, err := p.waiter.RecvWait(v, deadline)
	return p.filter(v, n), err
}

// ReleaseWait forwards to the inner Path (datapath.ReleaseWait).
func (p *Path) ReleaseWait() { datapath.ReleaseWait(p.inner) }

func (p *Path) filter(v *batch.Vec, n int) int {
	if p.recvThr == 0 || n == 0 {
		return n
	}
	k := 0
	for i := 0; i < n; i++ {
		if p.spare > 0 {
			p.spare--
		} else if p.lose(p.recvThr) {
			p.recvDropped.Add(1)
			continue
		}
		if k != i {
			m, a := v.Msg(i)
			c := copy(v.Buf(k), m)
			v.Set(k, c, a)
		}
		k++
	}
	v.SetLen(k)
	return k
}

// LocalAddr is the inner Path's.
func (p *Path) LocalAddr() netip.AddrPort { return p.inner.LocalAddr() }

// Close closes the inner Path.
func (p *Path) Close() error { return p.inner.Close() }

// Duplicated returns how many sent datagrams were sent twice.
func (p *Path) Duplicated() uint64 { return p.duplicated.Load() }

// Inner returns the wrapped Path.
func (p *Path) Inner() datapath.Path { return p.inner }

// Dropped returns how many datagrams were lost on receive and on send.
func (p *Path) Dropped() (recv, send uint64) { return p.recvDropped.Load(), p.sendDropped.Load() }
