package cast

import (
	"bytes"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath"
)

// tapPath is a loop's path with a tap on its sends: it keeps a copy of
// every datagram sent and, once armed, withholds the next one (kept
// apart) (it never
// reaches the network, so its counter is one the peer never saw: a bit
// flipped in it fails on the tag, not as a replay).
type tapPath struct {
	datapath.Path
	mu   sync.Mutex
	seen [][]byte
	arm  atomic.Bool
	held []byte
}

func (p *tapPath) Send(v *batch.Vec) (int, error) {
	hold := v.Len() > 0 && p.arm.CompareAndSwap(true, false)
	p.mu.Lock()
	for i := range v.Len() {
		d, _ := v.Msg(i)
		if hold && i == 0 {
			p.held = bytes.Clone(d)
			continue
		}
		p.seen = append(p.seen, bytes.Clone(d))
	}
	p.mu.Unlock()
	if !hold {
		return p.Path.Send(v)
	}
	if v.Len() == 1 {
		return 1, nil
	}
	rest := batch.New(v.Len()-1, protocol.MaxDatagram)
	for i := 1; i < v.Len(); i++ {
		rest.Append(v.Msg(i))
	}
	n, err := p.Path.Send(rest)
	return n + 1, err
}

// withheld arms the tap and waits for the datagram it withholds.
func (p *tapPath) withheld(t *testing.T) []byte {
	t.Helper()
	p.arm.Store(true)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		p.mu.Lock()
		h := p.held
		p.mu.Unlock()
		if h != nil {
			return h
		}
	}
	t.Fatal("the loop sent nothing to withhold")
	return nil
}

func (p *tapPath) sent() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.seen)
}

// Over real sockets: genuine datagrams captured from the nearly idle
// stream in both directions (data, heartbeats and probes to the
// receiver; Status to the sender) and replayed with the sender's or the
// receiver's address, and
// bit flips in the header, payload and every trailer field of a genuine
// datagram, are refused, counted by reason, and change nothing: no record
// delivered twice, no stale heartbeat or Status taken, no NAK served, no
// receiver joined. The stream then completes in order.
func TestLoopAuthReplayUDP(t *testing.T) {
	spoof := newSpoofer(t)
	pa, pb := openPair(t, "udp", false)
	ta, tb := &tapPath{Path: pa}, &tapPath{Path: pb}
	k := startKeyedPair(t, ta, tb)
	rloop, sloop, got, inOrder, target, waitFor := k.rloop, k.sloop, &k.got, &k.inOrder, &k.target, k.waitFor
	target.Store(1000)
	waitFor(1000)
	// The blast of 1000 may have lost datagrams in a socket buffer (the
	// receiver repairs them by NAK): one the peer never received is new
	// to it, not a replay. What is sent from now on, with the stream
	// nearly idle (10 more records, heartbeats, probes, Status), arrives.
	time.Sleep(100 * time.Millisecond)
	markA, markB := len(ta.sent()), len(tb.sent())
	target.Store(1010)
	waitFor(1010)

	// One datagram each way never reaches its peer (a heartbeat or
	// probe, a Status: the stream is idle), to flip bits in.
	heldAB, heldBA := ta.withheld(t), tb.withheld(t)
	ab, ba := ta.sent()[markA:], tb.sent()[markB:] // the withheld ones aside
	var toR, toS [][]byte
	toR = append(toR, ab...) // data, heartbeats, probes
	toS = append(toS, ba...) // Status (and NAKs)
	nReplayR, nReplayS := len(toR), len(toS)
	toR = append(toR, flips(heldAB)...)
	toS = append(toS, flips(heldBA)...)

	r0, s0 := rloop.ReceiverStats(), sloop.SenderStats()
	for _, d := range toR {
		spoof.send(pa.LocalAddr(), pb.LocalAddr(), d)
	}
	for _, d := range toS {
		spoof.send(pb.LocalAddr(), pa.LocalAddr(), d)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if rloop.AuthStats().Refused() >= uint64(len(toR)) && sloop.AuthStats().Refused() >= uint64(len(toS)) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // a tick or more: the stats below are snapshots
	refusals := func(a AuthStats) AuthStats {
		return AuthStats{Short: a.Short, Version: a.Version, KeyID: a.KeyID, Tag: a.Tag, Replay: a.Replay}
	}
	ra, sa := refusals(rloop.AuthStats()), refusals(sloop.AuthStats())
	want := func(replays int) AuthStats {
		return AuthStats{Replay: uint64(replays), Tag: 6, KeyID: 1, Version: 1}
	}
	if ra != want(nReplayR) || sa != want(nReplayS) {
		t.Fatalf("refusals: receiver %+v, want %+v; sender %+v, want %+v", ra, want(nReplayR), sa, want(nReplayS))
	}
	r1, s1 := rloop.ReceiverStats(), sloop.SenderStats()
	if got.Load() != 1010 || r1.Delivered != r0.Delivered || r1.Duplicates != r0.Duplicates || r1.Buffered != r0.Buffered ||
		r1.StaleHeartbeats != r0.StaleHeartbeats || r1.Lowered != r0.Lowered || r1.RestartSuspects != r0.RestartSuspects ||
		r1.NaksSent != r0.NaksSent || r1.Skips != r0.Skips {
		t.Fatalf("the replays changed the receiver: delivered %d\nbefore %+v\nafter  %+v", got.Load(), r0, r1)
	}
	if out := rloop.rcv.Outcome(); out.Kind != protocol.Live {
		t.Fatalf("receiver outcome %+v", out)
	}
	if s1.Naks != s0.Naks || s1.RetxHot != s0.RetxHot || s1.StaleStatus != s0.StaleStatus || s1.StatusRejected != s0.StatusRejected ||
		s1.ReceiversJoined != s0.ReceiversJoined || s1.ReceiversLost != s0.ReceiversLost || len(sloop.Receivers()) != 1 {
		t.Fatalf("the replays changed the sender:\nbefore %+v\nafter  %+v\nreceivers %+v", s0, s1, sloop.Receivers())
	}
	target.Store(2000)
	waitFor(2000)
	if !inOrder.Load() {
		t.Fatal("records out of order")
	}
}
