package main

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/walcast/walcast/wire"
)

// startTap relays UDP between `cast send` (which sends to the tap's
// sender-side address) and a receiver (which NAKs, and sends Status, to
// the tap's receiver-side address), recording when each data seq first
// crossed it and whether the receiver sent Status. It is how the
// Status-off start is measured over real processes: the test
// TestCLISendToReceiverWithoutStatus and `cast bench latency -nostatus`.
type startTap struct {
	toSender, toRecv *net.UDPConn
	mu               sync.Mutex
	first            map[uint64]time.Time
	statuses         int
	probes           int // sender heartbeats in the probe form
	sender           *net.UDPAddr
}

// newStartTap opens the tap's two loopback sockets; relay starts it.
func newStartTap() (*startTap, error) {
	lo := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}
	a, err := net.ListenUDP("udp4", lo)
	if err != nil {
		return nil, err
	}
	b, err := net.ListenUDP("udp4", lo)
	if err != nil {
		a.Close()
		return nil, err
	}
	// Deep buffers: the relay is a plain Go loop, and a loaded machine
	// must not make it drop what the measured pair would have exchanged.
	for _, c := range []*net.UDPConn{a, b} {
		_ = c.SetReadBuffer(8 << 20)
		_ = c.SetWriteBuffer(8 << 20)
	}
	return &startTap{toSender: a, toRecv: b, first: map[uint64]time.Time{}}, nil
}

// senderSide is where `cast send -to` sends; recvSide is the receiver's
// -peer.
func (tp *startTap) senderSide() string { return tp.toSender.LocalAddr().String() }
func (tp *startTap) recvSide() string   { return tp.toRecv.LocalAddr().String() }

// relay forwards the sender's datagrams to recv and the receiver's back
// to the sender until close.
func (tp *startTap) relay(recv netip.AddrPort) {
	ra := net.UDPAddrFromAddrPort(recv)
	go func() { // sender → receiver
		buf := make([]byte, 65536)
		for {
			n, from, err := tp.toSender.ReadFromUDP(buf)
			if err != nil {
				return
			}
			now := time.Now()
			tp.mu.Lock()
			tp.sender = from
			tp.mu.Unlock()
			tp.note(buf[:n], now)
			_, _ = tp.toRecv.WriteToUDP(buf[:n], ra)
		}
	}()
	go func() { // receiver → sender
		buf := make([]byte, 65536)
		for {
			n, _, err := tp.toRecv.ReadFromUDP(buf)
			if err != nil {
				return
			}
			tp.note(buf[:n], time.Now())
			tp.mu.Lock()
			to := tp.sender
			tp.mu.Unlock()
			if to != nil {
				_, _ = tp.toSender.WriteToUDP(buf[:n], to)
			}
		}
	}()
}

func (tp *startTap) close() {
	tp.toSender.Close()
	tp.toRecv.Close()
}

func (tp *startTap) note(d []byte, now time.Time) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	for len(d) > 0 {
		h, p, n, err := wire.DecodeFrame(d)
		if err != nil {
			return
		}
		d = d[n:]
		switch {
		case h.Type == wire.TypeStatus:
			tp.statuses++
		case h.Type == wire.TypeHeartbeat:
			if pr, err := wire.ParseProbe(p); err == nil && pr.TS != 0 {
				tp.probes++
			}
		case !wire.Reserved(h.Type) && len(p) >= 8:
			if seq := wire.Seq(p); tp.first[seq].IsZero() {
				tp.first[seq] = now
			}
		}
	}
}

// startGap is what the tap saw of the stream's start up to seq last.
type startGap struct {
	last     uint64        // the seq the start was measured up to
	gap      time.Duration // the longest time between the first arrivals of two consecutive seqs
	before   uint64        // the later seq of that pair
	edge     time.Duration // last-2's first arrival to last's: the window's last record (the probe) and the release after it
	span     time.Duration // seq 1's first arrival to last's
	statuses int           // Status frames the receiver sent
	probes   int           // probe heartbeats the sender sent
}

func (g startGap) String() string {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/1e6) }
	return fmt.Sprintf("largest gap before seq %d: %s, between seq %d and %d; seq %d → %d (the probe and the release): %s; seqs 1…%d crossed the tap in %s; %d Status, %d probes",
		g.last, ms(g.gap), g.before-1, g.before, g.last-2, g.last, ms(g.edge), g.last, ms(g.span), g.statuses, g.probes)
}

// gapBefore is the longest time between the first arrivals of two
// consecutive seqs up to seq last, and where it was; an error when a seq
// up to last never crossed the tap.
func (tp *startTap) gapBefore(last uint64) (startGap, error) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	g := startGap{last: last, statuses: tp.statuses, probes: tp.probes}
	for seq := uint64(2); seq <= last; seq++ {
		a, b := tp.first[seq-1], tp.first[seq]
		if a.IsZero() || b.IsZero() {
			return g, fmt.Errorf("seq %d or %d never crossed the tap", seq-1, seq)
		}
		if d := b.Sub(a); d > g.gap {
			g.gap, g.before = d, seq
		}
	}
	g.span = tp.first[last].Sub(tp.first[1])
	if last > 2 {
		g.edge = tp.first[last].Sub(tp.first[last-2])
	}
	return g, nil
}
