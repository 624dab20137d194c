package cast

import (
	"bytes"
	"context"
	"encoding/binary"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/wire"
)

var (
	testKeys  = &Keys{Send: wire.Key{ID: 1, Secret: [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}}}
	otherKeys = &Keys{Send: wire.Key{ID: 9, Secret: [16]byte{9}}}
	addrC     = netip.MustParseAddrPort("10.0.0.3:3000")
)

// authRig is a sender Loop on A and a receiver Loop on B, on the mem
// network and its virtual clock, with a forger at C who can send anything
// to either, and a copy of every datagram A sent B.
type authRig struct {
	t         *testing.T
	p         *mem.Pair
	snd, rcv  *Loop
	forger    *mem.End
	produce   int // records the sender's OnPoll sends in all
	produced  int
	delivered []uint64
	events    []Event
	sentAB    [][]byte
	sentBA    [][]byte
}

// The rig's sender and receiver ids are fixed, so that two rigs run on
// the same inputs send the same frames (see TestLoopAuthForgedProbes).
const (
	rigSenderID   = 0x5E4D
	rigReceiverID = 0x2EC7
)

func newAuthRig(t *testing.T, sk, rk *Keys) *authRig {
	t.Helper()
	r := &authRig{t: t, p: mem.NewPair(1_000_000_000)}
	r.p.Net.Impair(mem.AddrA, mem.AddrB, mem.Impairment{Latency: 10 * time.Microsecond,
		Script: func(i int, b []byte) mem.Action {
			r.sentAB = append(r.sentAB, slices.Clone(b))
			return mem.Pass
		}})
	r.p.Net.Impair(mem.AddrB, mem.AddrA, mem.Impairment{Latency: 10 * time.Microsecond,
		Script: func(i int, b []byte) mem.Action {
			r.sentBA = append(r.sentBA, slices.Clone(b))
			return mem.Pass
		}})
	f, err := r.p.Net.Listen(addrC, mem.AddrB)
	if err != nil {
		t.Fatal(err)
	}
	r.forger = f
	sc := protocol.DefaultSenderConfig()
	sc.ID = rigSenderID
	s, err := protocol.NewSender(sc, nil)
	if err != nil {
		t.Fatal(err)
	}
	rcc := protocol.DefaultReceiverConfig()
	rcc.ID = rigReceiverID
	rc, err := protocol.NewReceiver(rcc)
	if err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 64)
	sl := DefaultLoopConfig()
	sl.Path, sl.Sender, sl.Keys = r.p.A, s, sk
	sl.OnPoll = func(l *Loop, _ int64) {
		for r.produced < r.produce {
			binary.LittleEndian.PutUint64(payload[8:], uint64(r.produced))
			if _, err := l.Send(1, payload); err != nil {
				return
			}
			r.produced++
		}
	}
	rl := DefaultLoopConfig()
	rl.Path, rl.Receiver, rl.Keys = r.p.B, rc, rk
	rl.OnRecord = func(_ *Loop, _ wire.Header, p []byte) { r.delivered = append(r.delivered, wire.Seq(p)) }
	rl.OnEvent = func(e Event) { r.events = append(r.events, e) }
	for _, c := range []*LoopConfig{&sl, &rl} {
		l, err := NewLoop(*c)
		if err != nil {
			t.Fatal(err)
		}
		l.vclock = r.p.Clock.Now
		l.now = l.clock()
		l.next = l.now
		t.Cleanup(func() { l.Close() })
		if c == &sl {
			r.snd = l
		} else {
			r.rcv = l
		}
	}
	return r
}

// run iterates both loops every 5 µs of virtual time for d.
func (r *authRig) run(d time.Duration) {
	end := r.p.Clock.Now() + int64(d)
	for r.p.Clock.Now() < end {
		for _, l := range []*Loop{r.snd, r.rcv} {
			if !l.iterate() {
				r.t.Fatalf("loop stopped: %v", l.err)
			}
		}
		r.p.Clock.Advance(5 * time.Microsecond)
	}
	r.snd.snapshot()
	r.rcv.snapshot()
}

// forge sends datagrams from C to addr.
func (r *authRig) forge(to netip.AddrPort, ds ...[]byte) {
	v := batch.New(len(ds), protocol.MaxDatagram)
	for _, d := range ds {
		v.Append(d, to)
	}
	if _, err := r.forger.Send(v); err != nil {
		r.t.Fatal(err)
	}
}

func frame(n int, put func([]byte) int) []byte {
	b := make([]byte, n)
	return b[:put(b)]
}

// forgeries are one frame of every type that steers a stream when
// believed: data, heartbeat, session end, Skip and a probe (a heartbeat
// in its extended form: its timestamp would be echoed, its RTT estimate
// believed) for the receiver; NAK, Status and a probe echo (a Status
// echoing a timestamp: an RTT sample) for the sender.
func forgeries(next uint64) (toReceiver, toSender [][]byte) {
	data := make([]byte, wire.HeaderSize+64)
	binary.LittleEndian.PutUint64(data[wire.HeaderSize:], next)
	_ = wire.Seal(data, 1)
	toReceiver = [][]byte{
		data,
		frame(128, func(b []byte) int { return wire.PutHeartbeatFrame(b, wire.Heartbeat{Highest: next + 1000}) }),
		frame(128, func(b []byte) int { return wire.PutSessionEndFrame(b, wire.SessionEnd{Final: next - 1, SenderID: 7}) }),
		frame(128, func(b []byte) int {
			return wire.PutSkipFrame(b, wire.Skip{Seq: next + 10, From: next, Reason: wire.SkipRepair})
		}),
		frame(128, func(b []byte) int {
			return wire.PutProbeFrame(b, wire.Probe{Highest: next - 1, TS: 1, SenderID: rigSenderID, SRTT: 1e9, RTTVar: 1e8})
		}),
	}
	toSender = [][]byte{
		frame(128, func(b []byte) int { return wire.PutNakFrame(b, wire.Nak{From: 1, Count: next - 1}) }),
		frame(128, func(b []byte) int {
			return wire.PutStatusFrame(b, wire.Status{Delivered: next - 1, Highest: next - 1, ReceiverID: 99, Window: 1 << 20, Serial: 1})
		}),
		frame(128, func(b []byte) int {
			return wire.PutStatusFrame(b, wire.Status{Delivered: next - 1, Highest: next - 1, ReceiverID: rigReceiverID,
				EchoTS: 1, Window: 1 << 20, Serial: 1 << 30, Flags: wire.StatusSynced})
		}),
	}
	return toReceiver, toSender
}

// sealAs seals d as an endpoint holding k would.
func sealAs(t *testing.T, k wire.Key, epoch uint64, d []byte) []byte {
	t.Helper()
	s, err := wire.NewSealer(k, epoch)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, len(d)+wire.TrailerSize)
	copy(b, d)
	return b[:s.Seal(b, len(d))]
}

// flips returns copies of sealed datagram d with one bit flipped in each
// field: frame header, frame payload, the trailer's epoch (its random
// half), counter (upwards: still ahead of the window), key id, version
// and tag (first and last byte). Flips of d refuse, by reason: 6 on the
// tag, 1 on the key id, 1 on the version.
func flips(d []byte) [][]byte {
	t0 := len(d) - wire.TrailerSize
	var out [][]byte
	for _, at := range []int{2, wire.HeaderSize + 3, t0, t0 + 13, t0 + 16, t0 + 17, t0 + 18, t0 + 33} {
		m := bytes.Clone(d)
		m[at] ^= 0x10
		out = append(out, m)
	}
	return out
}

// With keys, no forged, altered or replayed datagram changes either
// side's state: nothing is delivered, retransmitted, joined or ended, and
// each is counted; the genuine stream then goes on, every record once and
// in order.
func TestLoopAuthForgeries(t *testing.T) {
	r := newAuthRig(t, testKeys, testKeys)
	r.produce = 50
	r.run(20 * time.Millisecond)
	if len(r.delivered) != 50 {
		t.Fatalf("delivered %d of 50 before the forgeries", len(r.delivered))
	}
	toR, toS := forgeries(51)
	wrongSecret := wire.Key{ID: testKeys.Send.ID} // the right id, another secret
	var forged [][]byte
	forged = append(forged, toR...) // unsealed
	for _, d := range toR {
		forged = append(forged, sealAs(t, wrongSecret, NewEpoch(), d))
	}
	// Genuine datagrams replayed, and bit flips of one in each field:
	// frame header, payload, and the trailer's epoch, counter, key id,
	// version and tag (first and last byte).
	// The flipped datagram is one the sender's own Sealer tagged and the
	// receiver never saw, so that each flip fails on its tag, not as a
	// replay.
	forged = append(forged, r.sentAB[:10]...)
	hb := frame(128, func(b []byte) int { return wire.PutHeartbeatFrame(b, wire.Heartbeat{Highest: 50}) })
	genuine := make([]byte, len(hb)+wire.TrailerSize)
	copy(genuine, hb)
	genuine = genuine[:r.snd.auth.sealer.Seal(genuine, len(hb))]
	t0 := len(genuine) - wire.TrailerSize
	for _, at := range []int{2, wire.HeaderSize + 3, t0 + 2, t0 + 9, t0 + 16, t0 + 17, t0 + 18, t0 + 33} {
		m := slices.Clone(genuine)
		m[at] ^= 0x10
		forged = append(forged, m)
	}
	var toSender [][]byte
	toSender = append(toSender, toS...)
	for _, d := range toS {
		toSender = append(toSender, sealAs(t, wrongSecret, NewEpoch(), d))
	}

	before := r.rcv.ReceiverStats()
	sBefore := r.snd.SenderStats()
	evBefore := len(r.events)
	r.forge(mem.AddrB, forged...)
	r.forge(mem.AddrA, toSender...)
	r.run(20 * time.Millisecond)

	after, sAfter := r.rcv.ReceiverStats(), r.snd.SenderStats()
	if len(r.delivered) != 50 || after.Delivered != before.Delivered || after.Duplicates != before.Duplicates || after.NaksSent != before.NaksSent {
		t.Fatalf("forgeries changed the receiver: delivered %d; before %+v\nafter %+v", len(r.delivered), before, after)
	}
	if out := r.rcv.rcv.Outcome(); out.Kind != protocol.Live {
		t.Fatalf("receiver outcome %+v after the forgeries", out)
	}
	// Only EventKeyUnknown may come of them: an unsealed frame can read
	// as a trailer naming a key id this endpoint does not hold (it is
	// reported once per id).
	for _, e := range r.events[evBefore:] {
		if e.Kind != EventKeyUnknown {
			t.Fatalf("forgeries raised events %v", r.events[evBefore:])
		}
	}
	if sAfter.RetxHot != sBefore.RetxHot || sAfter.Naks != sBefore.Naks || sAfter.StatusRejected != sBefore.StatusRejected || len(r.snd.Receivers()) != 1 {
		t.Fatalf("forgeries changed the sender: before %+v\nafter %+v\nreceivers %+v", sBefore, sAfter, r.snd.Receivers())
	}
	ra, sa := r.rcv.AuthStats(), r.snd.AuthStats()
	if ra.Refused() != uint64(len(forged)) || sa.Refused() != uint64(len(toSender)) {
		t.Fatalf("refused %d at the receiver (want %d: %+v), %d at the sender (want %d: %+v)",
			ra.Refused(), len(forged), ra, sa.Refused(), len(toSender), sa)
	}
	// The flips: header, payload, epoch, counter and tag fail the tag
	// (6), the key id names one it does not hold, the version is unknown.
	if ra.Replay != 10 || ra.Tag != 6+uint64(len(toR)) || ra.KeyID != 1 || ra.Version < 1 || sa.Tag != uint64(len(toS)) {
		t.Fatalf("refusals by reason: receiver %+v, sender %+v", ra, sa)
	}

	r.produce = 100
	r.run(20 * time.Millisecond)
	if len(r.delivered) != 100 {
		t.Fatalf("delivered %d of 100 after the forgeries", len(r.delivered))
	}
	for i, s := range r.delivered {
		if s != uint64(i+1) {
			t.Fatalf("delivery %d is seq %d", i, s)
		}
	}
}

// The same forgeries without keys are believed: the test above would
// fail without authentication.
func TestLoopUnauthenticatedForgeriesSteer(t *testing.T) {
	r := newAuthRig(t, nil, nil)
	r.produce = 50
	r.run(20 * time.Millisecond)
	sBefore := r.snd.SenderStats()
	toR, toS := forgeries(51)
	r.forge(mem.AddrB, toR[0])
	r.forge(mem.AddrA, toS[0])
	r.run(5 * time.Millisecond)
	if len(r.delivered) != 51 || r.delivered[50] != 51 {
		t.Fatalf("a forged record was not delivered without keys (delivered %d)", len(r.delivered))
	}
	if s := r.snd.SenderStats(); s.RetxHot == sBefore.RetxHot {
		t.Fatalf("a forged NAK made no retransmit without keys: %+v", s)
	}
}

// A receiver whose key file does not hold the sender's key id delivers
// nothing, counts every datagram and says so once.
func TestLoopAuthKeyMismatch(t *testing.T) {
	r := newAuthRig(t, testKeys, otherKeys)
	r.produce = 20
	r.run(20 * time.Millisecond)
	if len(r.delivered) != 0 {
		t.Fatalf("delivered %d records under a key it does not hold", len(r.delivered))
	}
	var unknown int
	for _, e := range r.events {
		if e.Kind == EventKeyUnknown {
			unknown++
		}
	}
	if a := r.rcv.AuthStats(); unknown != 1 || a.KeyID == 0 {
		t.Fatalf("EventKeyUnknown %d times (want 1), refusals %+v, events %v", unknown, a, r.events)
	}
}

// Keys rotate without a restart: the receiver accepts old and new, the
// sender switches, the receiver drops the old key; nothing is lost.
func TestLoopAuthRotation(t *testing.T) {
	oldK, newK := testKeys.Send, wire.Key{ID: 2, Secret: [16]byte{0xEE}}
	r := newAuthRig(t, &Keys{Send: oldK}, &Keys{Send: oldK})
	r.produce = 30
	r.run(10 * time.Millisecond)
	steps := []struct{ snd, rcv *Keys }{
		{nil, &Keys{Send: oldK, Accept: []wire.Key{newK}}},
		{&Keys{Send: newK, Accept: []wire.Key{oldK}}, nil},
		{nil, &Keys{Send: newK}},
	}
	for i, st := range steps {
		if st.snd != nil {
			if err := r.snd.SetKeys(st.snd); err != nil {
				t.Fatal(err)
			}
		}
		if st.rcv != nil {
			if err := r.rcv.SetKeys(st.rcv); err != nil {
				t.Fatal(err)
			}
		}
		r.produce += 30
		r.run(10 * time.Millisecond)
		if len(r.delivered) != r.produce {
			t.Fatalf("step %d: delivered %d of %d; refusals %+v", i, len(r.delivered), r.produce, r.rcv.AuthStats())
		}
	}
	if a := r.rcv.AuthStats(); a.Refused() != 0 {
		t.Fatalf("a rotation refused datagrams: %+v", a)
	}
	plain := newAuthRig(t, nil, nil)
	if err := plain.snd.SetKeys(testKeys); err == nil {
		t.Fatal("SetKeys turned authentication on for a Loop built without keys")
	}
}

// A keyed receiver discovering its sender is not won by a recording: a
// genuine datagram of an earlier run, or of the current run, replayed
// from another address before the sender speaks, loses to the sender's
// own next datagram within AuthSettle.
func TestAwaitSenderAuthReplay(t *testing.T) {
	p := mem.NewPair(1_000_000_000)
	forger, err := p.Net.Listen(addrC, mem.AddrB)
	if err != nil {
		t.Fatal(err)
	}
	hb := frame(128, func(b []byte) int { return wire.PutHeartbeatFrame(b, wire.Heartbeat{Highest: 5}) })
	now := uint64(time.Now().Unix())
	earlier, err := wire.NewSealer(testKeys.Send, (now-100)<<32|0xFFFF_FFFF)
	if err != nil {
		t.Fatal(err)
	}
	current, err := wire.NewSealer(testKeys.Send, now<<32|1)
	if err != nil {
		t.Fatal(err)
	}
	seal := func(s *wire.Sealer) []byte {
		b := make([]byte, len(hb)+wire.TrailerSize)
		copy(b, hb)
		return b[:s.Seal(b, len(hb))]
	}
	recorded := seal(earlier)
	cur1, cur2 := seal(current), seal(current)
	send := func(e *mem.End, ds ...[]byte) {
		v := batch.New(len(ds), protocol.MaxDatagram)
		for _, d := range ds {
			v.Append(d, mem.AddrB)
		}
		if _, err := e.Send(v); err != nil {
			t.Fatal(err)
		}
	}
	send(forger, recorded, cur1) // the replays arrive first
	send(p.A, cur1, cur2)        // cur1 again: a replay now, from the sender
	op, err := wire.NewOpener(testKeys.all()...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, from, _, err := AwaitSender(ctx, p.B, protocol.MaxDatagram, op.Open)
	if err != nil {
		t.Fatal(err)
	}
	if from != mem.AddrA {
		t.Fatalf("sender found at %v, want %v (the replays came from %v)", from, mem.AddrA, addrC)
	}
	if d, f := v.Msg(0); v.Len() != 1 || f != mem.AddrA || !slices.Equal(d, cur2) {
		t.Fatalf("batch holds %d datagrams, the first from %v", v.Len(), f)
	}
}
