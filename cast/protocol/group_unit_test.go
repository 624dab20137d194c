package protocol

import (
	"bytes"
	"math"
	"net/netip"
	"testing"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wire"
)

// goldenGroupNakHex is a NAK (from 2, count 3) of receiver
// 0x0123456789abcdef in a group: the reference's NAK with the receiver id
// in the padding at payload offset 16. docs/protocol.md shows the same
// bytes. The CRC was cross-checked with a bitwise CRC-32C.
const goldenGroupNakHex = "01001100 40000000 c6c4dd24 00000000" +
	"0200000000000000 0300000000000000 efcdab8967452301" +
	"00000000000000000000000000000000000000000000000000000000000000000000000000000000"

var (
	testControl = netip.MustParseAddrPort("239.0.0.2:3000")
	testPeerID  = uint64(0xabcdef)
)

func groupReceiver(t testing.TB, id uint64) *Receiver {
	t.Helper()
	rc := DefaultReceiverConfig()
	rc.Sender, rc.ID = testControl, id
	r, err := NewReceiver(rc)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func dataFrame(seq uint64) []byte {
	f := make([]byte, wire.HeaderSize+64)
	le.PutUint64(f[wire.HeaderSize:], seq)
	_ = wire.Seal(f, 100)
	return f
}

func groupNakFrame(from, count, id uint64) []byte {
	f := make([]byte, wire.ControlFrameSize)
	wire.PutNakFrame(f, wire.Nak{From: from, Count: count})
	le.PutUint64(f[wire.HeaderSize+16:], id)
	_ = wire.Seal(f, wire.TypeNak)
	return f
}

// naks returns the NAK records in out, and resets it.
func naks(out *batch.Vec) []wire.Nak {
	var ns []wire.Nak
	for i := range out.Len() {
		m, _ := out.Msg(i)
		if h, p, _, err := wire.DecodeFrame(m); err == nil && h.Type == wire.TypeNak {
			n, _ := wire.ParseNak(p)
			ns = append(ns, n)
		}
	}
	out.Reset()
	return ns
}

func nop(wire.Header, []byte) {}

func TestGroupNakGolden(t *testing.T) {
	r := groupReceiver(t, 0x0123456789abcdef)
	buf := make([]byte, wire.ControlFrameSize)
	// Before the sender speaks probes: the reference's bytes.
	r.loss.putNak(buf, 2, 4, r.peer.probes)
	plain := make([]byte, wire.ControlFrameSize)
	wire.PutNakFrame(plain, wire.Nak{From: 2, Count: 3})
	if !bytes.Equal(buf, plain) {
		t.Fatalf("un-negotiated group NAK %x differs from the reference's %x", buf, plain)
	}
	r.peer.probes = true
	r.loss.putNak(buf, 2, 4, r.peer.probes)
	if want := unhex(t, goldenGroupNakHex); !bytes.Equal(buf, want) {
		t.Fatalf("group NAK\n got  %x\n want %x", buf, want)
	}
	// A reference sender reads from and count only.
	_, p, _, err := wire.DecodeFrame(buf)
	if n, _ := wire.ParseNak(p); err != nil || n.From != 2 || n.Count != 3 {
		t.Fatalf("reference view %+v %v", n, err)
	}
	// A unicast receiver never adds the id.
	u, _ := NewReceiver(DefaultReceiverConfig())
	u.peer.probes = true
	u.loss.putNak(buf, 2, 4, u.peer.probes)
	if !bytes.Equal(buf, plain) {
		t.Fatalf("unicast NAK carries extra bytes: %x", buf)
	}
}

func TestBackoff(t *testing.T) {
	if b := backoff(1, 5, 0, 1, 1e6); b != 0 {
		t.Errorf("alone: %d", b)
	}
	if b := backoff(1, 5, 0, 8, 0); b != 0 {
		t.Errorf("no limit: %d", b)
	}
	first, again := backoff(1, 5, 0, 8, 1e6), backoff(1, 5, 0, 8, 1e6)
	if first != again {
		t.Error("not deterministic")
	}
	mean := func(g int) float64 {
		s := 0.0
		for i := range uint64(20000) {
			b := backoff(i*7919+1, i, uint16(i%3), g, 1e6)
			if b < 0 || b > 1e6 {
				t.Fatalf("backoff %d outside [0, 1e6]", b)
			}
			s += float64(b)
		}
		return s / 20000
	}
	// Truncated exponential, λ = ln g + 1: E[x]/T = 1/(1−e^−λ) − 1/λ.
	for _, g := range []int{2, 8, 64} {
		l := math.Log(float64(g)) + 1
		want := 1e6 * (1/(1-math.Exp(-l)) - 1/l)
		if m := mean(g); math.Abs(m-want) > 0.02e6 {
			t.Errorf("g %d: mean %.0f, want %.0f", g, m, want)
		}
	}
	// Different receivers draw differently for the same run.
	same := 0
	for id := range uint64(100) {
		if backoff(id, 42, 0, 8, 1e6) == backoff(id+1, 42, 0, 8, 1e6) {
			same++
		}
	}
	if same > 2 {
		t.Errorf("%d of 100 neighbouring ids drew the same back-off", same)
	}
}

func TestPeerSet(t *testing.T) {
	p := peerSet{ttl: 100}
	if p.group(0) != 1 {
		t.Fatal("empty set")
	}
	p.heard(1, 0)
	p.heard(2, 10)
	p.heard(1, 20)
	if g := p.group(50); g != 3 {
		t.Fatalf("group %d, want 3", g)
	}
	if g := p.group(115); g != 2 {
		t.Fatalf("after receiver 2 went silent: group %d, want 2", g)
	}
	for id := range uint64(200) {
		p.heard(id+10, 200+int64(id))
	}
	if p.n != maxPeers || p.group(400) != maxPeers+1 {
		t.Fatalf("full set: n %d group %d", p.n, p.group(400))
	}
}

// inGroup builds a receiver that heard another receiver's Status and a
// probe with a 100 µs RTT, and has delivered seq 1.
func inGroup(t *testing.T, id uint64) (*Receiver, *batch.Vec) {
	t.Helper()
	r := groupReceiver(t, id)
	out := batch.New(64, 2048)
	r.Handle(statusFrame(wire.Status{ReceiverID: testPeerID, Serial: 1, Window: 1024, Flags: wire.StatusSynced}), 10, out, nop)
	r.Handle(probeFrame(wire.Probe{TS: 1, SenderID: 7, SRTT: 100_000, RTTVar: 25_000}), 10, out, nop)
	r.Handle(dataFrame(1), 20, out, nop)
	out.Reset()
	if g := r.GroupSize(20); g != 2 {
		t.Fatalf("group %d after a peer's Status", g)
	}
	return r, out
}

func TestGroupBackoffThenNak(t *testing.T) {
	r, out := inGroup(t, 1)
	now := int64(1000)
	r.Handle(dataFrame(4), now, out, nop) // 2, 3 missing
	if n := naks(out); len(n) != 0 {
		t.Fatalf("NAKed at once in a group: %+v", n)
	}
	limit := r.backoffLimit()
	if limit <= 0 || limit > 1_600_000 {
		t.Fatalf("back-off limit %d ns", limit)
	}
	due := now + backoff(r.ID(), 2, 0, 2, limit)
	if due > now {
		r.Tick(due-1, out)
		if n := naks(out); len(n) != 0 {
			t.Fatalf("NAKed before the back-off: %+v", n)
		}
	}
	r.Tick(due, out)
	if n := naks(out); len(n) != 1 || n[0] != (wire.Nak{From: 2, Count: 2}) {
		t.Fatalf("after the back-off: %+v", n)
	}
}

func TestGroupHeardNakSuppresses(t *testing.T) {
	r, out := inGroup(t, 1)
	now := int64(1000)
	r.Handle(dataFrame(4), now, out, nop)
	// Another receiver's NAK for 2..3 arrives within the back-off.
	r.Handle(groupNakFrame(2, 2, testPeerID), now+1, out, nop)
	if st := r.Stats(); st.GroupNaks != 1 || st.Suppressed != 2 {
		t.Fatalf("stats %+v", st)
	}
	// No NAK of its own while the repair may still come.
	wait := r.renakDelay(1)
	for at := now + 1; at < now+1+wait; at += wait / 16 {
		r.Tick(at, out)
		if n := naks(out); len(n) != 0 {
			t.Fatalf("NAKed at +%d ns despite the heard NAK: %+v", at-now, n)
		}
	}
	// The repair comes: never NAKed.
	r.Handle(dataFrame(2), now+wait/2, out, nop)
	r.Handle(dataFrame(3), now+wait/2, out, nop)
	r.Tick(now+10*wait, out)
	if n := naks(out); len(n) != 0 || r.ExpectedSeq() != 5 {
		t.Fatalf("NAKs %+v, expected %d", n, r.ExpectedSeq())
	}
	if r.SharedLoss() <= 0.5 {
		t.Errorf("shared-loss estimate %.2f after a shared loss", r.SharedLoss())
	}

	// Not repaired: after the heard NAK's repair time it NAKs itself.
	r2, out2 := inGroup(t, 1)
	r2.Handle(dataFrame(4), now, out2, nop)
	r2.Handle(groupNakFrame(2, 2, testPeerID), now+1, out2, nop)
	r2.Tick(now+1+wait+r2.backoffLimit(), out2)
	if n := naks(out2); len(n) != 1 || n[0] != (wire.Nak{From: 2, Count: 2}) {
		t.Fatalf("no own NAK once the heard one went unanswered: %+v", n)
	}
}

func TestGroupOwnNakLoopedBack(t *testing.T) {
	r, out := inGroup(t, 1)
	r.peer.probes = true
	r.Handle(dataFrame(4), 1000, out, nop)
	r.Handle(groupNakFrame(2, 2, r.ID()), 1001, out, nop)
	if st := r.Stats(); st.OwnNaks != 1 || st.GroupNaks != 0 || st.Suppressed != 0 {
		t.Fatalf("own NAK counted as another's: %+v", st)
	}
}

func TestGroupHostileNaks(t *testing.T) {
	r, out := inGroup(t, 1)
	r.Handle(dataFrame(4), 1000, out, nop)
	for _, n := range []wire.Nak{{From: 0, Count: 0}, {From: 2, Count: math.MaxUint64}, {From: math.MaxUint64, Count: math.MaxUint64},
		{From: 1, Count: 1 << 40}, {From: 1 << 62, Count: 5}, {From: 3, Count: 0}} {
		r.Handle(groupNakFrame(n.From, n.Count, testPeerID), 1001, out, nop)
	}
	if r.Outcome().Kind != Live {
		t.Fatalf("outcome %v", r.Outcome().Err())
	}
	if st := r.Stats(); st.Suppressed != 2 {
		t.Fatalf("suppressed %d seqs, want the 2 missing ones", st.Suppressed)
	}
	// A short NAK payload is counted, not trusted.
	f := groupNakFrame(2, 2, testPeerID)[:wire.HeaderSize+8]
	le.PutUint16(f[4:], 8)
	_ = wire.Seal(f, wire.TypeNak)
	r.Handle(f, 1002, out, nop)
	if r.Stats().Bad.ShortPayload == 0 {
		t.Fatal("short NAK payload not counted")
	}
}

func TestGroupZeroAllocs(t *testing.T) {
	r, out := inGroup(t, 1)
	r.Handle(dataFrame(4), 1000, out, nop)
	nak, st := groupNakFrame(2, 2, testPeerID), statusFrame(wire.Status{ReceiverID: testPeerID + 1, Serial: 1, Window: 1024, Flags: wire.StatusSynced})
	now := int64(2000)
	if a := testing.AllocsPerRun(200, func() {
		now++
		r.Handle(nak, now, out, nop)
		r.Handle(st, now, out, nop)
		r.Tick(now, out)
		out.Reset()
	}); a != 0 {
		t.Fatalf("%v allocs per heard NAK, Status and Tick", a)
	}
}
