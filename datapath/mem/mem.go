package mem

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath"
)

// Clock is a virtual monotonic clock in nanoseconds. It only moves when
// the test moves it. Safe for concurrent use.
type Clock struct{ ns atomic.Int64 }

// NewClock returns a Clock reading start ns.
func NewClock(start int64) *Clock {
	c := &Clock{}
	c.ns.Store(start)
	return c
}

// Now returns the current virtual time in ns.
func (c *Clock) Now() int64 { return c.ns.Load() }

// Advance moves the clock forward by d and returns the new time.
func (c *Clock) Advance(d time.Duration) int64 { return c.ns.Add(int64(d)) }

// Set moves the clock to ns (tests may only move it forward).
func (c *Clock) Set(ns int64) { c.ns.Store(ns) }

// TimeSource is what a Network reads time from: a *Clock, or a real
// monotonic clock for tests that run loops in real time.
type TimeSource interface{ Now() int64 }

// Action is a bit set of what a link does to one datagram.
type Action uint8

// Actions a Script may return; Pass is none of them.
const (
	Pass      Action = 0
	Drop      Action = 1 << iota // the datagram is lost
	Duplicate                    // delivered twice
	Reorder                      // held back behind ReorderBy later datagrams
	Corrupt                      // one payload byte flipped
)

// Window is a time interval [From, To) in ns on the network's clock.
type Window struct{ From, To int64 }

// Impairment scripts one direction of a link. The zero value passes
// every datagram at once. Probabilities are in [0, 1] and drawn from a
// generator seeded with Seed, one draw sequence per link.
type Impairment struct {
	Seed    uint64
	Latency time.Duration // added to every datagram

	DropProb float64
	// Drop lists indexes (0-based count of datagrams sent on this link)
	// that are dropped.
	Drop []int
	// Blackouts drop every datagram sent during one of the windows.
	Blackouts []Window

	DupProb     float64
	ReorderProb float64
	// ReorderBy is how many later datagrams overtake a reordered one
	// (default 1). A reordered datagram is released after ReorderMaxHold
	// (default 10 ms) even if fewer datagrams followed.
	ReorderBy      int
	ReorderMaxHold time.Duration
	CorruptProb    float64
	// CorruptFrom is the first byte offset Corrupt may flip (default 0,
	// anywhere). Tests of the casting protocol set it past bytes the
	// header CRC does not cover (the record type at offset 2..4).
	CorruptFrom int

	// Script, when set, is asked first about every datagram: i is its
	// index on the link, b its bytes (read-only). Its actions are added
	// to the probabilistic ones.
	Script func(i int, b []byte) Action
}

// LinkStats counts what a link did.
type LinkStats struct {
	Sent, Delivered, Dropped, Duplicated, Reordered, Corrupted uint64
	Unreachable                                                uint64 // no endpoint at the destination
}

type packet struct {
	buf  []byte
	n    int
	src  netip.AddrPort
	at   int64 // deliverable at this time
	left int   // reorder: later datagrams still to pass
}

type link struct {
	imp   Impairment
	rng   *rand.Rand
	idx   int
	drop  map[int]bool
	held  []*packet
	stats LinkStats
}

type linkKey struct{ from, to netip.AddrPort }

// Network connects Ends by address.
type Network struct {
	mu    sync.Mutex
	clock TimeSource
	ends  map[netip.AddrPort]*End
	links map[linkKey]*link
	order []linkKey // links in creation order, for deterministic release
	pool  []*packet

	groups map[netip.AddrPort]*groupSet
}

// NewNetwork returns an empty network on clock.
func NewNetwork(clock TimeSource) *Network {
	return &Network{clock: clock, ends: map[netip.AddrPort]*End{}, links: map[linkKey]*link{}}
}

// ErrAddrInUse is returned by Listen for an address already bound.
var ErrAddrInUse = errors.New("mem: address already in use")

// Listen binds an End at addr whose zero-address sends go to peer.
func (n *Network) Listen(addr, peer netip.AddrPort) (*End, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.ends[addr]; ok {
		return nil, fmt.Errorf("mem: listen %v: %w", addr, ErrAddrInUse)
	}
	e := &End{n: n, addr: addr, peer: peer}
	n.ends[addr] = e
	return e, nil
}

// Impair sets the impairment of the direction from → to, replacing any
// earlier one and resetting its index and random stream.
func (n *Network) Impair(from, to netip.AddrPort, imp Impairment) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.setLink(linkKey{from, to}, newLink(imp))
}

func (n *Network) setLink(key linkKey, l *link) {
	if _, ok := n.links[key]; !ok {
		n.order = append(n.order, key)
	}
	n.links[key] = l
}

func newLink(imp Impairment) *link {
	if imp.ReorderBy <= 0 {
		imp.ReorderBy = 1
	}
	if imp.ReorderMaxHold <= 0 {
		imp.ReorderMaxHold = 10 * time.Millisecond
	}
	l := &link{imp: imp, rng: rand.New(rand.NewPCG(imp.Seed, imp.Seed^0x9e3779b97f4a7c15))}
	if len(imp.Drop) > 0 {
		l.drop = make(map[int]bool, len(imp.Drop))
		for _, i := range imp.Drop {
			l.drop[i] = true
		}
	}
	return l
}

// Stats returns the counters of the direction from → to.
func (n *Network) Stats(from, to netip.AddrPort) LinkStats {
	n.mu.Lock()
	defer n.mu.Unlock()
	if l := n.links[linkKey{from, to}]; l != nil {
		return l.stats
	}
	return LinkStats{}
}

// Pair is the usual test set-up: a clock, a network and two connected
// ends A (10.0.0.1:1000) and B (10.0.0.2:2000).
type Pair struct {
	Clock *Clock
	Net   *Network
	A, B  *End
}

// Addresses of the ends of a Pair.
var (
	AddrA = netip.MustParseAddrPort("10.0.0.1:1000")
	AddrB = netip.MustParseAddrPort("10.0.0.2:2000")
)

// NewPair returns a Pair on a fresh virtual clock starting at start ns.
// Impair A→B with p.Net.Impair(AddrA, AddrB, …) and B→A the other way.
func NewPair(start int64) *Pair {
	c := NewClock(start)
	n := NewNetwork(c)
	a, _ := n.Listen(AddrA, AddrB)
	b, _ := n.Listen(AddrB, AddrA)
	return &Pair{Clock: c, Net: n, A: a, B: b}
}

// End is one endpoint; it implements datapath.Path.
type End struct {
	n      *Network
	addr   netip.AddrPort
	peer   netip.AddrPort
	inbox  queue
	closed bool
}

var _ datapath.Path = (*End)(nil)

// LocalAddr is the address the End is bound to.
func (e *End) LocalAddr() netip.AddrPort { return e.addr }

// Pending is the number of datagrams queued for e, deliverable or not.
func (e *End) Pending() int {
	e.n.mu.Lock()
	defer e.n.mu.Unlock()
	return e.inbox.len()
}

// Close unbinds the End; later Send and Recv return datapath.ErrClosed.
func (e *End) Close() error {
	e.n.mu.Lock()
	defer e.n.mu.Unlock()
	if !e.closed {
		e.closed = true
		delete(e.n.ends, e.addr)
		e.n.leaveAll(e)
	}
	return nil
}

// Send puts every message of v on its link (a zero address means the
// peer). Like UDP it never fails for loss or a missing destination.
func (e *End) Send(v *batch.Vec) (int, error) {
	n := e.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if e.closed {
		return 0, datapath.ErrClosed
	}
	now := n.clock.Now()
	for i := 0; i < v.Len(); i++ {
		b, to := v.Msg(i)
		if !to.IsValid() {
			to = e.peer
		}
		n.send(e.addr, to, b, now)
	}
	return v.Len(), nil
}

func (n *Network) send(from, to netip.AddrPort, b []byte, now int64) {
	if g := n.groups[to]; g != nil {
		n.sendGroup(from, to, g, b, now)
		return
	}
	n.sendLink(from, to, b, now, 0)
}

// decide draws what l does to its next datagram b.
func (l *link) decide(b []byte, now int64) Action {
	i := l.idx
	l.idx++
	var act Action
	if l.imp.Script != nil {
		act = l.imp.Script(i, b)
	}
	if l.drop[i] {
		act |= Drop
	}
	for _, w := range l.imp.Blackouts {
		if now >= w.From && now < w.To {
			act |= Drop
		}
	}
	if l.imp.DropProb > 0 && l.rng.Float64() < l.imp.DropProb {
		act |= Drop
	}
	if l.imp.DupProb > 0 && l.rng.Float64() < l.imp.DupProb {
		act |= Duplicate
	}
	if l.imp.ReorderProb > 0 && l.rng.Float64() < l.imp.ReorderProb {
		act |= Reorder
	}
	if l.imp.CorruptProb > 0 && l.rng.Float64() < l.imp.CorruptProb {
		act |= Corrupt
	}
	return act
}

func (n *Network) link(from, to netip.AddrPort) *link {
	key := linkKey{from, to}
	l := n.links[key]
	if l == nil {
		l = newLink(Impairment{})
		n.setLink(key, l)
	}
	return l
}

// sendLink puts b on the link from → to; extra is latency added before
// the link (a group's upstream latency).
func (n *Network) sendLink(from, to netip.AddrPort, b []byte, now int64, extra time.Duration) {
	l := n.link(from, to)
	l.stats.Sent++
	dst := n.ends[to]
	act := l.decide(b, now)
	if act&Drop != 0 {
		l.stats.Dropped++
		n.passHeld(l, dst, now)
		return
	}
	if dst == nil {
		l.stats.Unreachable++
		return
	}
	at := now + int64(extra+l.imp.Latency)
	p := n.newPacket(b, from, at)
	if act&Corrupt != 0 && len(b) > l.imp.CorruptFrom {
		pos := l.imp.CorruptFrom + l.rng.IntN(len(b)-l.imp.CorruptFrom)
		p.buf[pos] ^= byte(1 + l.rng.IntN(255))
		l.stats.Corrupted++
	}
	var dup *packet
	if act&Duplicate != 0 {
		dup = n.newPacket(p.buf[:p.n], from, at)
		l.stats.Duplicated++
	}
	if act&Reorder != 0 {
		n.passHeld(l, dst, now)
		p.left = l.imp.ReorderBy
		p.at = now + int64(l.imp.ReorderMaxHold) // released by time at the latest
		l.held = append(l.held, p)
		l.stats.Reordered++
		if dup != nil {
			dst.inbox.push(dup)
		}
		return
	}
	dst.inbox.push(p)
	if dup != nil {
		dst.inbox.push(dup)
	}
	n.passHeld(l, dst, now)
}

// passHeld counts one datagram passing the held ones and releases those
// that have been overtaken ReorderBy times.
func (n *Network) passHeld(l *link, dst *End, now int64) {
	k := 0
	for _, h := range l.held {
		h.left--
		if h.left <= 0 && dst != nil {
			h.at = now + int64(l.imp.Latency)
			dst.inbox.push(h)
			continue
		}
		l.held[k] = h
		k++
	}
	clear(l.held[k:])
	l.held = l.held[:k]
}

func (n *Network) newPacket(b []byte, src netip.AddrPort, at int64) *packet {
	var p *packet
	if k := len(n.pool); k > 0 {
		p = n.pool[k-1]
		n.pool = n.pool[:k-1]
	} else {
		p = &packet{}
	}
	if cap(p.buf) < len(b) {
		c := 2048
		if len(b) > c {
			c = len(b)
		}
		p.buf = make([]byte, c)
	}
	p.buf = p.buf[:cap(p.buf)]
	p.n = copy(p.buf, b)
	p.src, p.at, p.left = src, at, 0
	return p
}

// Recv moves the datagrams deliverable now (in arrival order) into v,
// up to v.Cap(), each with its source address. It never blocks.
func (e *End) Recv(v *batch.Vec) (int, error) {
	n := e.n
	n.mu.Lock()
	defer n.mu.Unlock()
	v.Reset()
	if e.closed {
		return 0, datapath.ErrClosed
	}
	now := n.clock.Now()
	n.releaseHeld(e, now)
	k := 0
	for k < v.Cap() {
		p := e.inbox.peek()
		if p == nil || p.at > now {
			break
		}
		e.inbox.pop()
		buf := v.Buf(k)
		m := copy(buf, p.buf[:p.n]) // a datagram larger than the slot is truncated, like recvmsg
		v.Set(k, m, p.src)
		k++
		if l := n.links[linkKey{p.src, e.addr}]; l != nil {
			l.stats.Delivered++
		}
		n.pool = append(n.pool, p)
	}
	v.SetLen(k)
	return k, nil
}

// releaseHeld releases reordered datagrams bound for e whose maximum hold
// time has passed.
func (n *Network) releaseHeld(e *End, now int64) {
	for _, key := range n.order {
		l := n.links[key]
		if key.to != e.addr || len(l.held) == 0 {
			continue
		}
		k := 0
		for _, h := range l.held {
			if h.at <= now {
				e.inbox.push(h)
				continue
			}
			l.held[k] = h
			k++
		}
		clear(l.held[k:])
		l.held = l.held[:k]
	}
}

// queue is a FIFO of packets on a growable ring.
type queue struct {
	buf        []*packet
	head, size int
}

func (q *queue) len() int { return q.size }

func (q *queue) push(p *packet) {
	if q.size == len(q.buf) {
		nb := make([]*packet, max(64, 2*len(q.buf)))
		for i := 0; i < q.size; i++ {
			nb[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = nb, 0
	}
	q.buf[(q.head+q.size)%len(q.buf)] = p
	q.size++
}

func (q *queue) peek() *packet {
	if q.size == 0 {
		return nil
	}
	return q.buf[q.head]
}

func (q *queue) pop() {
	q.buf[q.head] = nil
	q.head = (q.head + 1) % len(q.buf)
	q.size--
}
