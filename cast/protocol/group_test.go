package protocol

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/wire"
)

// groupHarness runs one Sender and N Receivers of one multicast stream
// on a mem.Fanout, stepping every side like its loop would, on the
// virtual clock. Data, retransmits and heartbeats go to the group; NAKs
// and Status to the control group, which the sender and every receiver
// hear.
type groupHarness struct {
	t      testing.TB
	f      *mem.Fanout
	s      *Sender
	rs     []*Receiver
	log    *fakeLog
	sOut   *batch.Vec
	rOut   *batch.Vec
	in     *batch.Vec
	cold   []ColdRequest
	buf    []byte
	pay    []byte
	del    []groupDelivery
	lost   []map[uint64]bool // per receiver: data seqs dropped on their first transmission
	shared map[uint64]bool   // seqs dropped upstream (every receiver)
	sent   map[uint64]bool   // seqs already transmitted once on the upstream link
	lat    [][]int64         // per receiver: send → deliver, ns
	sentAt map[uint64]int64
	stall  func(i int, now int64) bool // receiver i is not run now (groupOpt.stall)
	// heard, when set, sees every datagram receiver i reads, at now,
	// before its Receiver does.
	heard func(i int, b []byte, now int64)
}

type groupDelivery struct {
	n, last uint64
	err     error
}

type groupOpt struct {
	n       int           // receivers
	latency time.Duration // one way, every link
	loss    float64       // independent, per receiver link (data and control to it)
	shared  float64       // upstream, shared by all receivers
	ctlLoss float64       // receiver → control group (its NAKs and Status)
	backoff int           // ReceiverConfig.NakBackoff
	seed    uint64
	unicast bool // one receiver on a plain pair instead (the unicast twin)
	// dropFirst, when set, also drops the first transmission of a data
	// seq on the way to receiver i when it returns true.
	dropFirst func(i int, seq uint64) bool
	debounce  int64
	// stall, when set, says receiver i is not run at now (a loaded host
	// descheduled its loop): its datagrams queue until it runs again.
	stall func(i int, now int64) bool
}

func newGroupHarness(t testing.TB, o groupOpt) *groupHarness {
	t.Helper()
	h := &groupHarness{t: t, f: mem.NewFanout(1_000_000_000, o.n), log: newFakeLog(1),
		shared: map[uint64]bool{}, sent: map[uint64]bool{}, sentAt: map[uint64]int64{}, stall: o.stall}
	sc := DefaultSenderConfig()
	sc.Dest, sc.AcceptAnyNakSource, sc.MaxReceivers = h.f.Group, true, max(8, o.n)
	if o.unicast {
		sc.Dest, sc.AcceptAnyNakSource = mem.FanoutReceiver(0), false
	}
	var err error
	if h.s, err = NewSender(sc, h.log); err != nil {
		t.Fatal(err)
	}
	up := rand.New(rand.NewPCG(o.seed, 99))
	for i := range o.n {
		rng := rand.New(rand.NewPCG(o.seed, uint64(i)))
		rc := DefaultReceiverConfig()
		rc.Sender, rc.ID, rc.NakBackoff = h.f.Control, uint64(1000+i), o.backoff
		if o.unicast {
			rc.Sender = mem.FanoutSender
		}
		if o.debounce != 0 {
			rc.NakDebounce = time.Duration(o.debounce)
		}
		r, err := NewReceiver(rc)
		if err != nil {
			t.Fatal(err)
		}
		h.rs = append(h.rs, r)
		h.del = append(h.del, groupDelivery{})
		h.lat = append(h.lat, nil)
		lost := map[uint64]bool{}
		h.lost = append(h.lost, lost)
		seen := map[uint64]bool{}
		p := o.loss
		h.f.Net.Impair(mem.FanoutSender, mem.FanoutReceiver(i), mem.Impairment{Latency: o.latency, Script: func(_ int, b []byte) mem.Action {
			seq := dataSeq(b)
			data := seq != 0
			if data && !seen[seq] && o.dropFirst != nil && o.dropFirst(i, seq) {
				lost[seq], seen[seq] = true, true
				return mem.Drop
			}
			if rng.Float64() >= p {
				if data {
					seen[seq] = true
				}
				return mem.Pass
			}
			if data && !seen[seq] {
				lost[seq] = true
			}
			if data {
				seen[seq] = true
			}
			return mem.Drop
		}})
		// Control frames from this receiver: to the sender and to the
		// other receivers (one link each).
		h.f.Net.Impair(mem.FanoutReceiver(i), mem.FanoutSender, mem.Impairment{Latency: o.latency, Seed: o.seed + uint64(i) + 1, DropProb: o.ctlLoss})
		for j := range o.n {
			if j != i {
				h.f.Net.Impair(mem.FanoutReceiver(i), mem.FanoutReceiver(j), mem.Impairment{Latency: o.latency, Seed: o.seed + uint64(100*i+j), DropProb: o.ctlLoss})
			}
		}
	}
	h.f.Net.Impair(mem.FanoutSender, mem.FanoutGroup, mem.Impairment{Script: func(_ int, b []byte) mem.Action {
		seq := dataSeq(b)
		data := seq != 0
		if !data {
			return mem.Pass
		}
		first := !h.sent[seq]
		h.sent[seq] = true
		if up.Float64() < o.shared {
			if first {
				h.shared[seq] = true
			}
			return mem.Drop
		}
		return mem.Pass
	}})
	h.sOut, h.rOut, h.in = batch.New(64, 2048), batch.New(64, 2048), batch.New(64, 2048)
	h.cold, h.buf, h.pay = make([]ColdRequest, 8), make([]byte, sc.MaxColdRecords*sc.MaxFrame), make([]byte, 64)
	return h
}

func (h *groupHarness) now() int64 { return h.f.Clock.Now() }

func (h *groupHarness) flush(e *mem.End, v *batch.Vec) {
	if _, err := e.Send(v); err != nil {
		h.t.Fatal(err)
	}
	v.Reset()
}

// send sends n records (flow control permitting); it returns how many.
func (h *groupHarness) send(n int) int {
	k := 0
	for ; k < n; k++ {
		h.sentAt[h.s.NextSeq()] = h.now()
		_, err := h.s.Send(100, h.pay, h.now(), h.sOut)
		if errors.Is(err, ErrBatchFull) {
			h.flush(h.f.S, h.sOut)
			k--
			continue
		}
		if errors.Is(err, ErrBackpressure) {
			break
		}
		if err != nil {
			h.t.Fatal(err)
		}
	}
	h.flush(h.f.S, h.sOut)
	return k
}

func (h *groupHarness) step() {
	now := h.now()
	for {
		n, _ := h.f.S.Recv(h.in)
		for i := range n {
			b, from := h.in.Msg(i)
			if h.sOut.Full() {
				h.flush(h.f.S, h.sOut)
			}
			h.s.Handle(b, from, now, h.sOut)
		}
		if n < h.in.Cap() {
			break
		}
	}
	k := h.s.ColdRequests(h.cold)
	for _, req := range h.cold[:k] {
		_, nb, _ := h.log.ReadRange(req.From, req.Count, h.buf)
		rest := h.s.ColdDone(req, h.buf[:nb], now, h.sOut)
		for len(rest) > 0 {
			h.flush(h.f.S, h.sOut)
			rest = h.s.ColdDone(req, rest, now, h.sOut)
		}
	}
	h.s.Tick(now, h.sOut)
	for h.s.RetxPending() {
		h.flush(h.f.S, h.sOut)
		h.s.Tick(now, h.sOut)
	}
	h.flush(h.f.S, h.sOut)
	for i, r := range h.rs {
		d := &h.del[i]
		deliver := func(_ wire.Header, p []byte) {
			seq := wire.Seq(p)
			if d.err == nil && d.n > 0 && seq != d.last+1 {
				d.err = fmt.Errorf("receiver %d: seq %d after %d", i, seq, d.last)
			}
			d.n++
			d.last = seq
			h.lat[i] = append(h.lat[i], now-h.sentAt[seq])
		}
		if h.stall != nil && h.stall(i, now) {
			continue // descheduled: its input waits in its socket
		}
		for {
			n, _ := h.f.R[i].Recv(h.in)
			r.SetBacklog(n == h.in.Cap(), now) // as the loop does
			for j := range n {
				b, _ := h.in.Msg(j)
				if h.rOut.Full() {
					h.flush(h.f.R[i], h.rOut)
				}
				if h.heard != nil {
					h.heard(i, b, now)
				}
				r.Handle(b, now, h.rOut, deliver)
			}
			if n < h.in.Cap() {
				break
			}
		}
		r.Tick(now, h.rOut)
		h.flush(h.f.R[i], h.rOut)
	}
}

// run sends records at perStep records every step of dt, then steps
// until every receiver has them all or limit passes.
func (h *groupHarness) run(records, perStep int, dt, limit time.Duration) {
	h.t.Helper()
	end := h.now() + int64(limit)
	sent := 0
	for h.now() < end {
		if sent < records {
			sent += h.send(min(perStep, records-sent))
		}
		h.step()
		if sent == records && h.done(records) {
			return
		}
		h.f.Advance(dt)
	}
	for i, d := range h.del {
		h.t.Logf("receiver %d: %d delivered, outcome %v, stats %+v", i, d.n, h.rs[i].Outcome(), h.rs[i].Stats())
	}
	h.t.Fatalf("not every receiver got %d records within %v (sender %+v)", records, limit, h.s.Stats())
}

func (h *groupHarness) done(records int) bool {
	for _, d := range h.del {
		if d.n < uint64(records) {
			return false
		}
	}
	return true
}

// figures: NAK frames and repairs per lost-record event (a seq lost on
// its first transmission by at least one receiver).
func (h *groupHarness) figures() (events int, naksPerEvent, repairsPerLost float64) {
	all := map[uint64]bool{}
	for s := range h.shared {
		all[s] = true
	}
	for _, l := range h.lost {
		for s := range l {
			all[s] = true
		}
	}
	naks := uint64(0)
	for _, r := range h.rs {
		naks += r.Stats().NaksSent
	}
	st := h.s.Stats()
	if len(all) == 0 {
		return 0, 0, 0
	}
	return len(all), float64(naks) / float64(len(all)), float64(st.RetxHot+st.RetxCold) / float64(len(all))
}

func (h *groupHarness) check(records int) {
	h.t.Helper()
	for i, d := range h.del {
		if d.err != nil || d.n != uint64(records) {
			h.t.Errorf("receiver %d: %d of %d delivered, %v", i, d.n, records, d.err)
		}
		if o := h.rs[i].Outcome(); o.Kind != Live {
			h.t.Errorf("receiver %d: %v", i, o.Err())
		}
	}
}

func p99(vs ...[]int64) int64 {
	w := slices.Concat(vs...)
	if len(w) == 0 {
		return 0
	}
	slices.Sort(w)
	return w[(len(w)*99)/100]
}

func TestGroupIndependentLoss(t *testing.T) {
	const records = 20_000
	h := newGroupHarness(t, groupOpt{n: 8, latency: 50 * time.Microsecond, loss: 0.01, ctlLoss: 0.01, seed: 1})
	h.run(records, 1, 10*time.Microsecond, 60*time.Second)
	h.check(records)
	ev, npe, rpl := h.figures()
	t.Logf("8 receivers, 1%% independent loss: %d lost-record events, %.2f NAK frames/event, %.2f repairs/lost seq, sender %+v", ev, npe, rpl, h.s.Stats())
	if npe > 1.5 || rpl > 1.2 {
		t.Errorf("NAK frames/event %.2f (want ≤ 1.5), repairs/lost seq %.2f (want ≤ 1.2)", npe, rpl)
	}
	// Latency: every receiver's p99 within 2× that of one unicast
	// receiver under the same loss (virtual time, so exact).
	u := newGroupHarness(t, groupOpt{n: 1, latency: 50 * time.Microsecond, loss: 0.01, ctlLoss: 0.01, seed: 1, unicast: true})
	u.run(records, 1, 10*time.Microsecond, 60*time.Second)
	u.check(records)
	base := p99(u.lat...)
	for i, l := range h.lat {
		if p := p99(l); p > 2*base {
			t.Errorf("receiver %d: p99 %v, more than 2× the unicast receiver's %v", i, time.Duration(p), time.Duration(base))
		}
	}
	t.Logf("p99: unicast %v, group worst %v", time.Duration(base), time.Duration(slices.Max(mapSlice(h.lat, func(l []int64) int64 { return p99(l) }))))
}

func mapSlice[T, U any](s []T, f func(T) U) []U {
	out := make([]U, len(s))
	for i, x := range s {
		out[i] = f(x)
	}
	return out
}

// TestGroupSharedLoss loses records upstream, where every receiver
// misses them: without suppression each of the 8 receivers NAKs every
// one; with it about one NAK per lost record goes out and the others
// wait for the repair it brings.
func TestGroupSharedLoss(t *testing.T) {
	const records = 20_000
	res := map[string]float64{}
	for _, c := range []struct {
		name    string
		backoff int
	}{{"suppression", 0}, {"no back-off", -1}} {
		h := newGroupHarness(t, groupOpt{n: 8, latency: 50 * time.Microsecond, shared: 0.01, backoff: c.backoff, seed: 2})
		h.run(records, 1, 10*time.Microsecond, 60*time.Second)
		h.check(records)
		ev, npe, rpl := h.figures()
		sup := uint64(0)
		for _, r := range h.rs {
			sup += r.Stats().Suppressed
		}
		t.Logf("%s: %d shared loss events, %.2f NAK frames/event, %.2f repairs/lost seq, %d seqs suppressed, p99 %v",
			c.name, ev, npe, rpl, sup, time.Duration(p99(h.lat...)))
		res[c.name] = npe
		if c.backoff == 0 && (npe > 1.5 || rpl > 1.2) {
			t.Errorf("with suppression: NAK frames/event %.2f (want ≤ 1.5), repairs/lost seq %.2f (want ≤ 1.2)", npe, rpl)
		}
	}
	if res["no back-off"] < 3*res["suppression"] {
		t.Errorf("suppression saves too little: %.2f NAKs/event without back-off vs %.2f with", res["no back-off"], res["suppression"])
	}
}

// TestGroupOfOneIsUnicast: a receiver alone in a group NAKs at once, so
// its NAKs, retransmits and delivery times equal a unicast receiver's
// under the same loss.
func TestGroupOfOneIsUnicast(t *testing.T) {
	const records = 5000
	h := newGroupHarness(t, groupOpt{n: 1, latency: 50 * time.Microsecond, loss: 0.02, seed: 3})
	h.run(records, 10, 100*time.Microsecond, 30*time.Second)
	h.check(records)
	if g := h.rs[0].GroupSize(h.now()); g != 1 {
		t.Fatalf("group size %d", g)
	}
	st := h.rs[0].Stats()
	if st.Suppressed != 0 || st.GroupNaks != 0 {
		t.Errorf("a receiver alone suppressed %d seqs, heard %d NAKs", st.Suppressed, st.GroupNaks)
	}
	// The same loss decisions on a unicast stream (data to the receiver's
	// address, NAKs to the sender's): identical NAKs, repairs and latency.
	u := newGroupHarness(t, groupOpt{n: 1, latency: 50 * time.Microsecond, loss: 0.02, seed: 3, unicast: true})
	u.run(records, 10, 100*time.Microsecond, 30*time.Second)
	u.check(records)
	if a, b := h.rs[0].Stats().NaksSent, u.rs[0].Stats().NaksSent; a != b || a == 0 {
		t.Errorf("NAKs: group of one %d, unicast %d", a, b)
	}
	if a, b := h.s.Stats().RetxHot, u.s.Stats().RetxHot; a != b {
		t.Errorf("repairs: group of one %d, unicast %d", a, b)
	}
	if a, b := p99(h.lat...), p99(u.lat...); a != b {
		t.Errorf("p99: group of one %v, unicast %v", time.Duration(a), time.Duration(b))
	}
}
