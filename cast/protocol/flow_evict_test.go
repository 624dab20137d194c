package protocol

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wire"
)

// probeTSs returns the timestamps of the probes in out, and resets it.
func probeTSs(out *batch.Vec) []uint64 {
	var ts []uint64
	for i := 0; i < out.Len(); i++ {
		m, _ := out.Msg(i)
		for len(m) >= wire.HeaderSize {
			h, p, n, err := wire.DecodeFrame(m)
			if err != nil {
				break
			}
			if h.Type == wire.TypeHeartbeat {
				if pr, err := wire.ParseProbe(p); err == nil && pr.TS != 0 {
					ts = append(ts, pr.TS)
				}
			}
			m = m[n:]
		}
	}
	out.Reset()
	return ts
}

// statusFeed hands a Sender the Status frames of synced receivers (10
// records delivered, a window of 100), each receiver id with a serial of
// its own.
type statusFeed struct {
	s      *Sender
	out    *batch.Vec
	serial map[uint64]uint32
}

// send handles receiver id's next Status from from at now, echoing echo.
func (f *statusFeed) send(id uint64, from netip.AddrPort, echo uint64, now int64) {
	if f.serial == nil {
		f.serial = map[uint64]uint32{}
	}
	f.serial[id]++
	b := make([]byte, wire.ControlFrameSize)
	wire.PutStatusFrame(b, wire.Status{Delivered: 10, Highest: 10, ReceiverID: id, Window: 100,
		Serial: f.serial[id], Flags: wire.StatusSynced, EchoTS: echo})
	f.s.Handle(b, from, now, f.out)
}

// A flood of Status frames from forged ids and addresses (which never
// echo a probe) cannot lock real receivers out of a full table: a real
// receiver that echoed a probe is never evicted by a newcomer, and one
// that joins during the flood takes an unproven slot, is probed, echoes
// and stays.
func TestFlowForgedFloodNoLockout(t *testing.T) {
	cfg := senderCfg()
	cfg.AcceptAnyNakSource = true
	cfg.MaxReceivers = 4
	s, out := newTestSender(t, cfg, newFakeLog(1))
	sendN(t, s, out, 10)
	out.Reset()
	now := int64(1_000_000)
	feed := statusFeed{s: s, out: out}
	status := func(id uint64, from netip.AddrPort, echo uint64) { feed.send(id, from, echo, now) }
	// join: a real receiver's Status, the probe it triggers, its echo.
	join := func(id uint64, from netip.AddrPort) {
		status(id, from, 0)
		now += 1000
		s.Tick(now, out)
		ts := probeTSs(out)
		if len(ts) == 0 {
			t.Fatalf("no probe after receiver %d joined", id)
		}
		now += 1000
		status(id, from, ts[len(ts)-1])
	}
	ids := func() []uint64 {
		rs := make([]ReceiverInfo, 16)
		var got []uint64
		for _, r := range rs[:s.Receivers(rs)] {
			got = append(got, r.ID)
		}
		slices.Sort(got)
		return got
	}
	real1, real2, real3 := netipPort(1), netipPort(2), netipPort(3)
	join(1, real1)
	join(2, real2)
	rng := rand.New(rand.NewPCG(1, 2))
	flood := func(n int) {
		for range n {
			from := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 66, byte(rng.IntN(256)), byte(rng.IntN(256))}), uint16(rng.IntN(65536)))
			// A guessed echo: any timestamp but the probes'.
			status(1000+rng.Uint64N(1<<40), from, uint64(now-rng.Int64N(now)))
			now += 10
		}
	}
	flood(1000)
	if got := ids(); !slices.Contains(got, 1) || !slices.Contains(got, 2) || len(got) != 4 {
		t.Fatalf("after the flood the table holds %v", got)
	}
	join(3, real3) // mid-flood
	flood(1000)
	if got := ids(); len(got) != 4 || got[0] != 1 || got[1] != 2 || got[2] != 3 {
		t.Fatalf("after a receiver joined mid-flood the table holds %v", got)
	}
	st := s.Stats()
	if st.ReceiversEvicted < 1900 || st.StatusRejected != 0 {
		t.Fatalf("evicted %d, rejected %d", st.ReceiversEvicted, st.StatusRejected)
	}
	// The real receivers still steer flow control: their window holds.
	if e, l := s.Limit(); !l || e > 110+100 {
		t.Fatalf("limit %d %v", e, l)
	}
}

// A real receiver whose round trip spans many sender ticks still proves
// itself while forged Status frames from new ids and addresses arrive
// every tick, each of which makes a probe due: the sender keeps every
// probe younger than a heartbeat interval, so the real receiver's echo
// of the probe it was sent on joining is recognised, and the flood that
// follows cannot evict it.
func TestFlowForgedFloodSlowEcho(t *testing.T) {
	cfg := senderCfg()
	cfg.AcceptAnyNakSource = true
	cfg.MaxReceivers = 4
	s, out := newTestSender(t, cfg, newFakeLog(1))
	sendN(t, s, out, 10)
	now := int64(1_000_000)
	feed := statusFeed{s: s, out: out}
	status := func(id uint64, from netip.AddrPort, echo uint64) { feed.send(id, from, echo, now) }
	rng := rand.New(rand.NewPCG(3, 4))
	probes := 0
	// tick runs one sender tick of 100 µs with one forged join in it.
	tick := func() {
		from := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 66, byte(rng.IntN(256)), byte(rng.IntN(256))}), uint16(rng.IntN(65536)))
		status(1000+rng.Uint64N(1<<40), from, uint64(now-rng.Int64N(now)))
		now += 100_000
		s.Tick(now, out)
		probes += len(probeTSs(out))
	}
	real := netipPort(1)
	status(1, real, 0)
	now += 100_000
	s.Tick(now, out)
	ts := probeTSs(out)
	if len(ts) != 1 {
		t.Fatalf("%d probes after the real receiver joined, want 1", len(ts))
	}
	for range 40 { // the echo is 40 ticks on its way
		tick()
	}
	if probes < 17 {
		t.Fatalf("the flood made only %d probes due: the test does not push the join probe out of a 16-entry memory", probes)
	}
	status(1, real, ts[0])
	for range 2000 {
		tick()
		// The real receiver's regular Status, without a new echo.
		if rng.IntN(50) == 0 {
			status(1, real, 0)
		}
	}
	rs := make([]ReceiverInfo, 8)
	found := false
	for _, r := range rs[:s.Receivers(rs)] {
		found = found || r.ID == 1
	}
	if !found {
		t.Fatal("the real receiver was evicted by the flood: its slow echo did not prove it")
	}
	// The flood cannot make the sender probe faster than its memory
	// allows: at most probeRing per heartbeat interval, plus the idle heartbeats.
	span := time.Duration(2040 * 100_000)
	if limit := int(span/cfg.HeartbeatInterval+1) * (probeRing + 1); probes > limit {
		t.Fatalf("%d probes in %v, want at most %d", probes, span, limit)
	}
}
