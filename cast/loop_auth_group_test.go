package cast

import (
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/wire"
)

var addrGroupForger = netip.MustParseAddrPort("10.0.9.9:3000")

// groupRig is a keyed multicast stream on a mem.Fanout and its virtual
// clock: a sender Loop sending to the group and hearing the control
// group, two receiver Loops on the group sending NAKs and Status to the
// control group (and hearing each other's there), and a forger that
// joined both groups: it records every datagram sent to them (a tap on
// the LAN) and can send anything anywhere.
type groupRig struct {
	t         *testing.T
	f         *mem.Fanout
	snd       *Loop
	rcv       []*Loop
	forger    *mem.End
	produce   int
	produced  int
	delivered [][]uint64
	heard     map[netip.AddrPort][][]byte // what the forger recorded, by source
	hold      bool                        // withhold receiver 0's next control datagram from the group
	held      []byte
}

func newGroupRig(t *testing.T, k *Keys) *groupRig {
	t.Helper()
	r := &groupRig{t: t, f: mem.NewFanout(1_000_000_000, 2), heard: map[netip.AddrPort][][]byte{}}
	r.delivered = make([][]uint64, 2)
	f, err := r.f.Net.Listen(addrGroupForger, r.f.Control)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []netip.AddrPort{r.f.Group, r.f.Control} {
		if err := r.f.Net.Join(g, f); err != nil {
			t.Fatal(err)
		}
	}
	r.forger = f
	// Receiver 0's control datagrams cross this upstream link: a
	// withheld one reaches no member.
	r.f.Net.Impair(mem.FanoutReceiver(0), r.f.Control, mem.Impairment{Script: func(_ int, b []byte) mem.Action {
		if r.hold {
			r.hold, r.held = false, slices.Clone(b)
			return mem.Drop
		}
		return mem.Pass
	}})
	sc := protocol.DefaultSenderConfig()
	sc.Dest, sc.AcceptAnyNakSource, sc.MaxReceivers, sc.ID = r.f.Group, true, 8, rigSenderID
	s, err := protocol.NewSender(sc, nil)
	if err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 64)
	sl := DefaultLoopConfig()
	sl.Path, sl.Sender, sl.Keys = r.f.S, s, k
	sl.OnPoll = func(l *Loop, _ int64) {
		for r.produced < r.produce {
			if _, err := l.Send(1, payload); err != nil {
				return
			}
			r.produced++
		}
	}
	cfgs := []LoopConfig{sl}
	for i := range 2 {
		rc := protocol.DefaultReceiverConfig()
		rc.Sender, rc.ID = r.f.Control, uint64(1000+i)
		rcv, err := protocol.NewReceiver(rc)
		if err != nil {
			t.Fatal(err)
		}
		c := DefaultLoopConfig()
		c.Path, c.Receiver, c.Keys, c.Source = r.f.R[i], rcv, k, mem.FanoutSender
		c.OnRecord = func(_ *Loop, _ wire.Header, p []byte) { r.delivered[i] = append(r.delivered[i], wire.Seq(p)) }
		cfgs = append(cfgs, c)
	}
	for i, c := range cfgs {
		l, err := NewLoop(c)
		if err != nil {
			t.Fatal(err)
		}
		l.vclock = r.f.Clock.Now
		l.now = l.clock()
		l.next = l.now
		t.Cleanup(func() { l.Close() })
		if i == 0 {
			r.snd = l
		} else {
			r.rcv = append(r.rcv, l)
		}
	}
	return r
}

// run iterates every loop every 5 µs of virtual time for d; the forger
// records what reached it.
func (r *groupRig) run(d time.Duration) {
	end := r.f.Clock.Now() + int64(d)
	v := batch.New(64, protocol.MaxDatagram)
	for r.f.Clock.Now() < end {
		for _, l := range append([]*Loop{r.snd}, r.rcv...) {
			if !l.iterate() {
				r.t.Fatalf("loop stopped: %v", l.err)
			}
		}
		for {
			n, err := r.forger.Recv(v)
			if err != nil {
				r.t.Fatal(err)
			}
			for i := range n {
				d, from := v.Msg(i)
				r.heard[from] = append(r.heard[from], slices.Clone(d))
			}
			if n < v.Cap() {
				break
			}
		}
		r.f.Clock.Advance(5 * time.Microsecond)
	}
	r.snd.snapshot()
	for _, l := range r.rcv {
		l.snapshot()
	}
}

// forge sends datagrams from the forger to addr (a group or a member).
func (r *groupRig) forge(to netip.AddrPort, ds ...[]byte) {
	for len(ds) > 0 {
		v := batch.New(64, protocol.MaxDatagram)
		for len(ds) > 0 && !v.Full() {
			v.Append(ds[0], to)
			ds = ds[1:]
		}
		if _, err := r.forger.Send(v); err != nil {
			r.t.Fatal(err)
		}
	}
}

// groupState is what the forged rig and its twin must agree on.
type groupState struct {
	Snd       protocol.SenderStats
	SndRTT    protocol.RTT
	Receivers []protocol.ReceiverInfo
	Rcv       []protocol.ReceiverStats
	Outcomes  []protocol.Outcome
	Groups    []int
	Delivered [][]uint64
}

func (r *groupRig) state() groupState {
	s := groupState{Snd: r.snd.snd.Stats(), SndRTT: r.snd.snd.RTT(), Receivers: r.snd.Receivers()}
	for i, l := range r.rcv {
		s.Rcv = append(s.Rcv, l.rcv.Stats())
		s.Outcomes = append(s.Outcomes, l.rcv.Outcome())
		s.Groups = append(s.Groups, l.rcv.GroupSize(r.f.Clock.Now()))
		s.Delivered = append(s.Delivered, slices.Clone(r.delivered[i]))
	}
	return s
}

// On a keyed multicast stream, forged NAK and Status frames sent to the
// control group (a NAK for every record, a new receiver joining, a
// Closing Status in a real receiver's name), the same under a wrong
// secret, the members' genuine control datagrams and the sender's data
// recorded by a tap and replayed, and bit flips of a genuine Status
// withheld from the group change nothing anywhere: the sender and both
// receivers end in exactly the state of a twin stream that was sent
// nothing (same virtual clock, same ids), each refusal is counted by
// reason at every member that got it, and the genuine group stream
// completes in order at both receivers. Without keys the same forgeries
// steer the sender and the receivers.
func TestLoopAuthGroupForgeries(t *testing.T) {
	for _, keyed := range []bool{true, false} {
		name := "keyed"
		k := testKeys
		if !keyed {
			name, k = "without keys", nil
		}
		t.Run(name, func(t *testing.T) {
			forged, twin := newGroupRig(t, k), newGroupRig(t, k)
			for _, r := range []*groupRig{forged, twin} {
				r.produce = 50
				r.run(200 * time.Millisecond)
				r.hold = true
				r.run(200 * time.Millisecond) // receiver 0 sends a Status within
			}
			if forged.held == nil {
				t.Fatal("receiver 0 sent nothing to the control group to withhold")
			}
			if s := forged.state(); !reflect.DeepEqual(s, twin.state()) {
				t.Fatalf("the twins differ before any forgery:\n%+v\n%+v", s, twin.state())
			}
			r0, r1 := mem.FanoutReceiver(0), mem.FanoutReceiver(1)
			ctl0, ctl1, data := forged.heard[r0], forged.heard[r1], forged.heard[mem.FanoutSender]
			if len(ctl0) == 0 || len(ctl1) == 0 || len(data) == 0 {
				t.Fatalf("the tap heard %d, %d control and %d data datagrams", len(ctl0), len(ctl1), len(data))
			}

			fresh := [][]byte{
				frame(128, func(b []byte) int { return wire.PutNakFrame(b, wire.Nak{From: 1, Count: 50}) }),
				frame(128, func(b []byte) int {
					return wire.PutStatusFrame(b, wire.Status{Delivered: 50, Highest: 50, ReceiverID: 77, Window: 1 << 20, Serial: 1, Flags: wire.StatusSynced})
				}),
				frame(128, func(b []byte) int {
					return wire.PutStatusFrame(b, wire.Status{Delivered: 50, Highest: 50, ReceiverID: 1000, Serial: 1 << 30, Flags: wire.StatusSynced | wire.StatusClosing})
				}),
			}
			toControl := slices.Clone(fresh)
			if keyed {
				wrong := wire.Key{ID: testKeys.Send.ID}
				for _, d := range fresh {
					toControl = append(toControl, sealAs(t, wrong, NewEpoch(), d))
				}
				toControl = append(toControl, flips(forged.held)...)
			}
			forged.forge(forged.f.Control, toControl...)
			if keyed {
				// Recordings go to the members that heard them: a
				// receiver never heard its own (the mem network does not
				// loop a member's datagrams back to it), so to it they
				// would be new, not replays.
				forged.forge(mem.FanoutSender, append(slices.Clone(ctl0), ctl1...)...)
				forged.forge(r0, ctl1...)
				forged.forge(r1, ctl0...)
				forged.forge(forged.f.Group, data...)
			}
			for _, r := range []*groupRig{forged, twin} {
				r.run(50 * time.Millisecond)
				r.produce = 100
				r.run(300 * time.Millisecond)
			}
			fs, ts := forged.state(), twin.state()
			if !keyed {
				if fs.Snd.RetxHot == ts.Snd.RetxHot || fs.Snd.ReceiversJoined == ts.Snd.ReceiversJoined || fs.Rcv[0].GroupNaks == ts.Rcv[0].GroupNaks {
					t.Fatalf("forgeries without keys changed nothing (the test cannot see a change):\n%+v\n%+v", fs, ts)
				}
				return
			}
			if !reflect.DeepEqual(fs, ts) {
				t.Fatalf("forgeries on the control group changed state:\nforged %+v\ntwin   %+v", fs, ts)
			}
			for i, d := range fs.Delivered {
				if len(d) != 100 {
					t.Fatalf("receiver %d delivered %d of 100", i, len(d))
				}
				for j, s := range d {
					if s != uint64(j+1) {
						t.Fatalf("receiver %d: delivery %d is seq %d", i, j, s)
					}
				}
			}
			if len(fs.Receivers) != 2 {
				t.Fatalf("the sender's table: %+v", fs.Receivers)
			}
			// Every member got the fresh forgeries (3 unsealed, 3 under
			// the wrong secret: those fail the tag) and the flips (6
			// fail the tag, 1 names an unknown key id, 1 an unknown
			// version), and the recordings sent to it.
			for i, c := range []struct {
				l       *Loop
				replays int
			}{
				{forged.snd, len(ctl0) + len(ctl1)},
				{forged.rcv[0], len(ctl1) + len(data)},
				{forged.rcv[1], len(ctl0) + len(data)},
			} {
				a := c.l.AuthStats()
				if a.Refused() != uint64(len(toControl)+c.replays) || a.Replay != uint64(c.replays) || a.Tag != 3+6 || a.KeyID < 1 || a.Version < 1 {
					t.Fatalf("member %d refused %+v; want %d in all, %d replays, 9 on the tag", i, a, len(toControl)+c.replays, c.replays)
				}
			}
			for _, l := range append([]*Loop{twin.snd}, twin.rcv...) {
				if a := l.AuthStats(); a.Refused() != 0 {
					t.Fatalf("the twin refused genuine datagrams: %+v", a)
				}
			}
		})
	}
}
