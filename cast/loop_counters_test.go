package cast

import (
	"encoding/binary"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/counters"
	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/wire"
)

// parkPath is a mem End that a loop can park on: RecvWait moves the
// virtual clock to the deadline when nothing is waiting, as if the loop
// slept until then.
type parkPath struct {
	*mem.End
	clock *mem.Clock
	epoch time.Time
}

func (p *parkPath) RecvWait(v *batch.Vec, deadline time.Time) (int, error) {
	if p.Pending() == 0 {
		if d := int64(deadline.Sub(p.epoch)); d > p.clock.Now() {
			p.clock.Set(d)
		}
	}
	return p.Recv(v)
}

// TestLoopTiming: whatever the idle strategy, an iteration's work part
// (not a park, not an idle step) is what counts toward the longest
// iteration and the stalls, and only it is busy time: a parked loop that
// works 10 µs per millisecond is about 1 % busy, and one OnPoll that
// takes 3 ms is one stall of 3 ms.
func TestLoopTiming(t *testing.T) {
	for _, st := range []affinity.Strategy{affinity.Park, affinity.Spin, affinity.Backoff} {
		t.Run(st.String(), func(t *testing.T) {
			clock := mem.NewClock(1)
			net := mem.NewNetwork(clock)
			a, _ := net.Listen(mem.AddrA, mem.AddrB)
			net.Listen(mem.AddrB, mem.AddrA)
			sc := protocol.DefaultSenderConfig()
			sc.NoFlowControl = true
			snd, _ := protocol.NewSender(sc, nil)
			path := &parkPath{End: a, clock: clock}
			var worked time.Duration
			calls := 0
			p := make([]byte, 64)
			l, err := NewLoop(LoopConfig{Path: path, Sender: snd, Idle: affinity.Idler{Strategy: st}, Counters: Counters{Dir: t.TempDir()},
				OnPoll: func(l *Loop, now int64) {
					calls++
					d := 10 * time.Microsecond
					if calls == 50 {
						d = 3 * time.Millisecond
					}
					clock.Advance(d)
					worked += d
					if _, err := l.Send(1, p); err != nil {
						t.Fatal(err)
					}
				}})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			path.epoch = l.epoch
			l.vclock = clock.Now
			l.now, l.next = l.clock(), l.clock()
			start := clock.Now()
			for range 200 {
				l.iterate()
			}
			elapsed, work := time.Duration(clock.Now()-start), worked
			c := l.ctr
			l.iterate() // the 200th iteration is accounted at this beat
			busy, idle := time.Duration(c.busy), time.Duration(c.idle)
			if c.stall != 1 || time.Duration(c.maxIt) != 3*time.Millisecond {
				t.Errorf("stalls %d, longest %v; want 1 of 3ms", c.stall, time.Duration(c.maxIt))
			}
			if busy != work {
				t.Errorf("busy %v, worked %v", busy, work)
			}
			if busy+idle != elapsed {
				t.Errorf("busy %v + idle %v ≠ elapsed %v", busy, idle, elapsed)
			}
			if st == affinity.Park && idle < 10*busy {
				t.Errorf("parked: busy %v, idle %v: the parks count as idle", busy, idle)
			}
			t.Logf("busy %v idle %v (%.1f%% busy), longest %v", busy, idle, 100*float64(busy)/float64(busy+idle), time.Duration(c.maxIt))
		})
	}
}

// TestLoopHeartbeatSilent: the loop thread stamps its own heartbeat, so
// a loop stuck in OnPoll shows its process Silent (naming the loop)
// although the process's sampler runs on; it is Live again once the
// loop moves.
func TestLoopHeartbeatSilent(t *testing.T) {
	t.Parallel()
	pair := mem.NewPair(1)
	snd, _ := protocol.NewSender(protocol.DefaultSenderConfig(), nil)
	block, blocked := make(chan struct{}), make(chan struct{})
	var once bool
	l, err := StartLoop(LoopConfig{Path: pair.A, Sender: snd, Idle: quiet, Counters: Counters{Dir: t.TempDir()},
		OnPoll: func(l *Loop, now int64) {
			if !once && l.Stats().Iterations > 0 {
				once = true
				close(blocked)
				<-block
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	f := l.ctr.f
	<-blocked
	deadline := time.Now().Add(counters.SilentAfter + 30*time.Second)
	var s *counters.Snapshot
	for s = f.Snapshot(); s.State != counters.Silent; s = f.Snapshot() {
		if time.Now().After(deadline) {
			t.Fatalf("a loop blocked for %v is still %s", counters.SilentAfter+30*time.Second, s.State)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(s.SilentLoops) != 1 || !strings.HasPrefix(s.SilentLoops[0], "loop_heartbeat_unix_ns{") {
		t.Fatalf("silent loops %v", s.SilentLoops)
	}
	if time.Since(time.Unix(0, s.Heartbeat)) > counters.SilentAfter {
		t.Fatalf("the process's own heartbeat stopped too")
	}
	close(block)
	for s = f.Snapshot(); s.State != counters.Live; s = f.Snapshot() {
		if time.Now().After(deadline) {
			t.Fatalf("the loop moves again, yet the process is %s (%v)", s.State, s.SilentLoops)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchmarkLoopIterateCounters: one iteration of a sender loop and one of
// a receiver loop over a lossy mem link, with counters on and off (the
// beat, the ticks' stores and the loss episodes are the difference), and
// on with keys (the auth slots too; sealing and opening dominate).
func BenchmarkLoopIterateCounters(b *testing.B) {
	for _, c := range []struct {
		name string
		off  bool
		keys *Keys
	}{{"on", false, nil}, {"off", true, nil}, {"on+keys", false, testKeys}} {
		off := c.off
		b.Run(c.name, func(b *testing.B) {
			clock := mem.NewClock(1)
			net := mem.NewNetwork(clock)
			net.Impair(mem.AddrA, mem.AddrB, mem.Impairment{Seed: 1, DropProb: 0.01})
			a, _ := net.Listen(mem.AddrA, mem.AddrB)
			bb, _ := net.Listen(mem.AddrB, mem.AddrA)
			snd, _ := protocol.NewSender(protocol.DefaultSenderConfig(), nil)
			rcv, _ := protocol.NewReceiver(protocol.DefaultReceiverConfig())
			ctr := Counters{Off: off, Dir: b.TempDir()}
			p := make([]byte, 64)
			ls, err := NewLoop(LoopConfig{Path: a, Sender: snd, Counters: ctr, Keys: c.keys, OnPoll: func(l *Loop, now int64) { _, _ = l.Send(1, p) }})
			if err != nil {
				b.Fatal(err)
			}
			lr, err := NewLoop(LoopConfig{Path: bb, Receiver: rcv, Counters: ctr, Keys: c.keys})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { ls.Close(); lr.Close() }()
			for _, l := range []*Loop{ls, lr} {
				l.vclock = clock.Now
				l.now = l.clock()
				l.next = l.now
			}
			b.ReportAllocs()
			for b.Loop() {
				clock.Advance(10 * time.Microsecond)
				ls.iterate()
				lr.iterate()
			}
		})
	}
}

// TestAuthCounters: a keyed loop publishes every AuthStats field:
// auth_sealed, auth_opened and auth_refused{reason=…}, under its stream
// and role; each kind of refused datagram lands in its reason's slot;
// an unkeyed loop has no auth slots.
func TestAuthCounters(t *testing.T) {
	r := newAuthRig(t, testKeys, testKeys)
	r.produce = 50
	r.run(20 * time.Millisecond)
	if len(r.delivered) != r.produce {
		t.Fatalf("delivered %d of %d", len(r.delivered), r.produce)
	}
	toR, _ := forgeries(uint64(r.produce + 1))
	short := make([]byte, wire.HeaderSize+8)
	binary.LittleEndian.PutUint64(short[wire.HeaderSize:], uint64(r.produce+1))
	_ = wire.Seal(short, 1)
	wrongSecret := wire.Key{ID: testKeys.Send.ID, Secret: [16]byte{0xee}}
	r.forge(mem.AddrB,
		short,  // unsealed, shorter than a frame and a trailer
		toR[0], // unsealed: its last bytes read as a trailer of version 0
		sealAs(t, otherKeys.Send, NewEpoch(), toR[1]), // a key id the receiver does not hold
		sealAs(t, wrongSecret, NewEpoch(), toR[2]),    // the right id, the wrong secret
		r.sentAB[0], // a genuine datagram again
	)
	r.run(5 * time.Millisecond)

	want := map[string]uint64{"short": 1, "version": 1, "key_id": 1, "tag": 1, "replay": 1}
	for _, l := range []*Loop{r.snd, r.rcv} {
		role := "producer"
		if l == r.rcv {
			role = "consumer"
		}
		lab := l.ctr.roles[role]
		if lab == "" || !strings.Contains(lab, `role="`+role+`"`) {
			t.Fatalf("%s labels %q", role, lab)
		}
		a := l.AuthStats()
		s := l.ctr.f.Snapshot()
		got := func(label string) uint64 {
			v, ok := s.Find(label)
			if !ok {
				t.Fatalf("no slot %s", label)
			}
			return v
		}
		if v := got("auth_sealed" + lab); v != a.Sealed || v == 0 {
			t.Errorf("%s auth_sealed %d, AuthStats %d", role, v, a.Sealed)
		}
		if v := got("auth_opened" + lab); v != a.Opened || v == 0 {
			t.Errorf("%s auth_opened %d, AuthStats %d", role, v, a.Opened)
		}
		by := map[string]uint64{"short": a.Short, "version": a.Version, "key_id": a.KeyID, "tag": a.Tag, "replay": a.Replay}
		var sum uint64
		for _, rr := range authReasons {
			v := got("auth_refused" + with(lab, "reason", rr.reason))
			if v != by[rr.reason] {
				t.Errorf("%s auth_refused reason %s: slot %d, AuthStats %d", role, rr.reason, v, by[rr.reason])
			}
			if l == r.rcv && v != want[rr.reason] {
				t.Errorf("receiver refused %d for %s, want %d", v, rr.reason, want[rr.reason])
			}
			sum += v
		}
		if sum != a.Refused() {
			t.Errorf("%s: reasons sum to %d, Refused %d", role, sum, a.Refused())
		}
	}
	// Every number of AuthStats has a slot: a field added later must be
	// given one (newAuthSet), or this fails.
	n := 0
	for _, f := range reflect.VisibleFields(reflect.TypeFor[AuthStats]()) {
		if f.Type.Kind() == reflect.Uint64 {
			n++
		}
	}
	if len(r.rcv.ctr.auth.fields) != n {
		t.Errorf("%d auth slots for %d AuthStats fields", len(r.rcv.ctr.auth.fields), n)
	}

	// Without keys: no auth slot.
	pair := mem.NewPair(1)
	snd, _ := protocol.NewSender(protocol.DefaultSenderConfig(), nil)
	l, err := NewLoop(LoopConfig{Path: pair.A, Sender: snd, Counters: Counters{Dir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, v := range l.ctr.f.Snapshot().Values {
		if strings.HasPrefix(v.Name, "auth_") {
			t.Errorf("unkeyed loop has %s", v.Label)
		}
	}
}
