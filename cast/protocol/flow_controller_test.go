package protocol

import (
	"fmt"
	"math"
	"testing"

	"github.com/walcast/walcast/wire"
)

// fcRig is a flow controller with the parts of a Sender it is handed:
// the prober and the event queue, and the counters.
type fcRig struct {
	fc    flowController
	cfg   SenderConfig
	probe prober
	ev    eventQueue[SenderEvent]
	stats SenderStats
}

func newFCRig(hasLog bool, mod func(*SenderConfig)) *fcRig {
	g := &fcRig{cfg: senderCfg()}
	g.cfg.RingSlots = 64
	g.cfg.ReceiverTimeout = 1000
	if mod != nil {
		mod(&g.cfg)
	}
	g.cfg = g.cfg.withDefaults()
	g.fc = newFlowController(&g.cfg, hasLog, &g.stats)
	g.probe = newProber(&g.cfg, &g.stats)
	return g
}

// status hands the controller receiver id's Status from netipPort(id).
func (g *fcRig) status(st wire.Status, now int64) statusNews {
	_, p, _, err := wire.DecodeFrame(statusFrame(st))
	if err != nil {
		panic(err)
	}
	news := g.fc.status(p, netipPort(int(st.ReceiverID)), now, &g.probe, &g.ev)
	return news
}

func (g *fcRig) events() string {
	s := ""
	for e, ok := g.ev.pop(); ok; e, ok = g.ev.pop() {
		s += fmt.Sprintf("%v:%d ", e.Kind, e.Receiver.ID)
	}
	return s
}

// rcv is one receiver's Status in a fold case.
type rcv struct {
	id, delivered, highest uint64
	window                 uint32
	state                  OutcomeKind
	unsynced               bool
	renak                  uint32
}

// TestFlowControllerFold: the limit is the policy's combination of the
// edges of the receivers that throttle (live, synced, not too far behind
// to repair by NAK, counted by the policy), at most RingSlots past what
// one delivered for a sender without a log; the coverage is the lowest
// highest seq of the live ones; the dedup window stays below every
// receiver's re-NAK delay.
func TestFlowControllerFold(t *testing.T) {
	a := rcv{id: 1, delivered: 10, highest: 12, window: 100}
	b := rcv{id: 2, delivered: 10, highest: 11, window: 50}
	c := rcv{id: 3, delivered: 20, highest: 20, window: 60}
	for _, tc := range []struct {
		name    string
		policy  FlowPolicy
		tagged  []uint64
		noLog   bool
		sent    uint64
		rcvs    []rcv
		limit   uint64 // MaxUint64: not limited
		covered uint64
		dedup   int64
	}{
		{name: "no receiver", limit: math.MaxUint64, covered: math.MaxUint64, dedup: 1e6},
		{name: "min: the slowest", rcvs: []rcv{a, b, c}, limit: 60, covered: 11, dedup: 1e6},
		{name: "max: the fastest", policy: FlowMax, rcvs: []rcv{a, b, c}, limit: 110, covered: 11, dedup: 1e6},
		{name: "tagged: the slowest tagged", policy: FlowTagged, tagged: []uint64{1, 3}, rcvs: []rcv{a, b, c}, limit: 80, covered: 11, dedup: 1e6},
		{name: "a faulted receiver does not throttle", rcvs: []rcv{a, {id: 2, delivered: 10, highest: 11, window: 50, state: Faulted}}, limit: 110, covered: 12, dedup: 1e6},
		{name: "an unsynced one does not", rcvs: []rcv{a, {id: 2, window: 50, unsynced: true}}, limit: 110, covered: 0, dedup: 1e6},
		{name: "one too far behind the ring does not", sent: 150, rcvs: []rcv{a, b}, limit: 110, covered: 11, dedup: 1e6},
		{name: "without a log: RingSlots past delivered", noLog: true, rcvs: []rcv{a}, limit: 74, covered: 12, dedup: 1e6},
		{name: "dedup below the re-NAK delays", rcvs: []rcv{{id: 1, delivered: 10, window: 100, renak: 3000}, {id: 2, delivered: 10, window: 100, renak: 1000}}, limit: 110, covered: 0, dedup: 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newFCRig(!tc.noLog, func(c *SenderConfig) { c.FlowPolicy, c.Tagged = tc.policy, tc.tagged })
			for _, r := range tc.rcvs {
				st := wire.Status{ReceiverID: r.id, Delivered: r.delivered, Highest: r.highest, Window: r.window,
					State: uint8(r.state), Serial: 1, Flags: wire.StatusSynced, ReNak: r.renak}
				if r.unsynced {
					st.Flags = 0
				}
				if !g.status(st, 0).accepted {
					t.Fatalf("Status of %d not accepted", r.id)
				}
			}
			dedup := g.fc.fold(tc.sent)
			limit := uint64(math.MaxUint64)
			if g.fc.limited {
				limit = g.fc.limit
			}
			if limit != tc.limit || g.fc.covered != tc.covered || dedup != tc.dedup {
				t.Fatalf("limit %d covered %d dedup %d; want %d %d %d", limit, g.fc.covered, dedup, tc.limit, tc.covered, tc.dedup)
			}
			if tc.limit != math.MaxUint64 && (g.fc.holds(tc.limit, 0) || !g.fc.holds(tc.limit+1, 0)) {
				t.Fatalf("holds wrong at the limit %d", tc.limit)
			}
		})
	}
}

// TestFlowControllerTable follows the receiver table through joins,
// stale and restarted receivers, leaving, silence and a stall, with the
// events each raises.
func TestFlowControllerTable(t *testing.T) {
	g := newFCRig(true, nil)
	st := func(id uint64, serial uint32, delivered uint64, flags uint8) wire.Status {
		return wire.Status{ReceiverID: id, Delivered: delivered, Highest: delivered, Window: 10, Serial: serial, Flags: wire.StatusSynced | flags}
	}
	for _, s := range []struct {
		name     string
		status   *wire.Status
		now      int64
		refuse   bool // a Send refused at now
		tick     bool
		accepted bool
		events   string
		active   int
	}{
		{name: "a receiver joins", status: &wire.Status{ReceiverID: 1, Serial: 1, Delivered: 5, Highest: 5, Window: 10, Flags: wire.StatusSynced}, accepted: true, events: "receiver_joined:1 ", active: 1},
		{name: "an older serial is stale", status: ptr(st(1, 1, 6, 0)), now: 10, events: "", active: 1},
		{name: "a second joins", status: ptr(st(2, 1, 5, 0)), now: 20, accepted: true, events: "receiver_joined:2 ", active: 2},
		{name: "it leaves", status: ptr(st(2, 2, 5, wire.StatusClosing)), now: 30, accepted: true, events: "receiver_left:2 ", active: 1},
		{name: "the first holds the sender back", refuse: true, now: 40, active: 1},
		{name: "it repeats its Status, no progress", status: ptr(st(1, 2, 5, 0)), now: 500, accepted: true, active: 1},
		{name: "before ReceiverTimeout nothing", tick: true, now: 1039, active: 1},
		{name: "held ReceiverTimeout without progress: stalled", tick: true, now: 1040, events: "receiver_stalled:1 ", active: 1},
		{name: "progress again: recovered", status: ptr(st(1, 3, 7, 0)), now: 1050, accepted: true, events: "receiver_recovered:1 ", active: 1},
		{name: "silent for ReceiverTimeout: lost", tick: true, now: 2050, events: "receiver_lost:1 ", active: 0},
	} {
		if s.status != nil {
			news := g.status(*s.status, s.now)
			if news.accepted != s.accepted {
				t.Fatalf("%s: accepted %v", s.name, news.accepted)
			}
			if news.accepted {
				g.fc.fold(20)
			}
		}
		if s.refuse {
			if !g.fc.holds(16, s.now) {
				t.Fatalf("%s: seq 16 not held (limit %d)", s.name, g.fc.limit)
			}
			g.fc.refused(s.now)
		}
		if s.tick && g.fc.tick(s.now, 16, &g.ev) {
			g.fc.fold(20)
		}
		if got := g.events(); got != s.events || g.fc.active != s.active {
			t.Fatalf("%s: events %q, %d active; want %q, %d", s.name, got, g.fc.active, s.events, s.active)
		}
	}
	if g.stats.StaleStatus != 1 || g.stats.ReceiversJoined != 2 || g.stats.ReceiversLost != 1 || g.stats.Backpressured != 1 {
		t.Fatalf("stats %+v", g.stats)
	}
}

func ptr[T any](v T) *T { return &v }
