package main

import (
	"net"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/walcast/walcast/wire"
)

// startTap relays UDP between `cast send` (which sends to the returned
// sender-side address) and a receiver at recv (which NAKs, and sends
// Status, to the returned receiver-side address), recording when each data
// seq first crossed it and whether the receiver sent Status.
type startTap struct {
	toSender, toRecv *net.UDPConn
	mu               sync.Mutex
	first            map[uint64]time.Time
	statuses         int
	probes           int // sender heartbeats in the probe form
}

func newStartTap(t *testing.T, recv string) *startTap {
	t.Helper()
	lo := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}
	a, err := net.ListenUDP("udp4", lo)
	if err != nil {
		t.Fatal(err)
	}
	b, err := net.ListenUDP("udp4", lo)
	if err != nil {
		t.Fatal(err)
	}
	ra, err := net.ResolveUDPAddr("udp4", recv)
	if err != nil {
		t.Fatal(err)
	}
	tp := &startTap{toSender: a, toRecv: b, first: map[uint64]time.Time{}}
	t.Cleanup(func() { a.Close(); b.Close() })
	var sender struct {
		sync.Mutex
		addr *net.UDPAddr
	}
	go func() { // sender → receiver
		buf := make([]byte, 65536)
		for {
			n, from, err := a.ReadFromUDP(buf)
			if err != nil {
				return
			}
			now := time.Now()
			sender.Lock()
			sender.addr = from
			sender.Unlock()
			tp.note(buf[:n], now)
			_, _ = b.WriteToUDP(buf[:n], ra)
		}
	}()
	go func() { // receiver → sender
		buf := make([]byte, 65536)
		for {
			n, _, err := b.ReadFromUDP(buf)
			if err != nil {
				return
			}
			tp.note(buf[:n], time.Now())
			sender.Lock()
			to := sender.addr
			sender.Unlock()
			if to != nil {
				_, _ = a.WriteToUDP(buf[:n], to)
			}
		}
	}()
	return tp
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

// gapBefore is the longest time between the first arrivals of two
// consecutive seqs up to seq last, and the seq after it.
func (tp *startTap) gapBefore(t *testing.T, last uint64) (time.Duration, uint64) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	var worst time.Duration
	var at uint64
	for seq := uint64(2); seq <= last; seq++ {
		a, b := tp.first[seq-1], tp.first[seq]
		if a.IsZero() || b.IsZero() {
			t.Fatalf("seq %d or %d never crossed the tap", seq-1, seq)
		}
		if d := b.Sub(a); d > worst {
			worst, at = d, seq
		}
	}
	return worst, at
}

// TestCLISendToReceiverWithoutStatus: `cast send` towards `cast recv
// -nostatus` (the reference receiver's bytes: it never sends Status) does
// not hold its first window for InitialWait (1 s) before seq 2049; towards
// a walcast receiver it negotiates flow control as before. The bound is
// half of InitialWait, generous for a loaded machine (the virtual-clock
// TestInitialWindowLearnsNoStatus checks the 10 ms target exactly); the
// measured gap is logged.
func TestCLISendToReceiverWithoutStatus(t *testing.T) {
	const n = "4000"
	for _, noStatus := range []bool{true, false} {
		name := "walcast receiver"
		if noStatus {
			name = "recv -nostatus"
		}
		t.Run(name, func(t *testing.T) {
			addr := deadPort(t) // a free port for the receiver
			tap := newStartTap(t, addr)
			args := []string{"recv", "-listen", addr, "-peer", tap.toRecv.LocalAddr().String(), "-n", n}
			if noStatus {
				args = append(args, "-nostatus")
			}
			r := startCast(t, "", args...)
			r.waitOutput(`receiving on (\S+) `, hangBudget)
			// Paced, so that the tap (a plain Go relay) loses nothing
			// itself: 2048 records take about 100 ms.
			s := runCast(t, "send", "-to", tap.toSender.LocalAddr().String(), "-bind", "127.0.0.1:0", "-n", n, "-rate", "20000", "-linger", "2s")
			if s.Code() != 0 {
				t.Fatalf("send exited %d\n%s", s.Code(), s.Dump())
			}
			r.wait(hangBudget)
			r.expect(0, "stdout", `^outcome: live$`)
			gap, seq := tap.gapBefore(t, 2049)
			tap.mu.Lock()
			statuses, probes := tap.statuses, tap.probes
			tap.mu.Unlock()
			t.Logf("largest gap before seq 2049: %v (before seq %d); %d Status, %d probes crossed the tap", gap, seq, statuses, probes)
			if noStatus {
				if statuses != 0 || probes != 0 {
					t.Fatalf("recv -nostatus: %d Status, %d probes on the wire", statuses, probes)
				}
				if gap >= 500*time.Millisecond {
					t.Fatalf("the sender held its first window %v before seq %d for a Status that never comes", gap, seq)
				}
				return
			}
			if statuses == 0 || probes == 0 || !regexp.MustCompile(`flow control held the sender back \d+ times`).MatchString(s.Stdout.String()) {
				t.Fatalf("walcast receiver not under flow control: %d Status, %d probes\n%s", statuses, probes, s.Stdout.String())
			}
		})
	}
}
