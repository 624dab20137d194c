package xdp

import (
	"encoding/binary"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/bpf"
	"github.com/walcast/walcast/cast"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/datapath/mmsg"
	"github.com/walcast/walcast/datapath/udp"
	"github.com/walcast/walcast/internal/netns"
	"github.com/walcast/walcast/wire"
)

// flowOpts describes one run.
type flowOpts struct {
	kind      string                            // "xdp" (default), "udp" or "mmsg"
	n         int                               // records the default producer sends
	rate      float64                           // records/s, 0 = as fast as the window allows
	sender    func(*protocol.SenderConfig)      // changes to the sender's config
	receiver  func(*protocol.ReceiverConfig)    // changes to the receiver's config
	recvRing  int                               // > 0: deliver through a ring of this many slots (the test consumes)
	rxPath    func(*Config)                     // changes to the receiver's AF_XDP config
	onPoll    func(l *cast.Loop, now int64)     // replaces the producer (n is then ignored)
	impairA   bpf.ImpairConfig                  // at the sender's ingress (Port is set)
	impairB   bpf.ImpairConfig                  // at the receiver's ingress (Port is set)
	startLoss bool                              // the impairs are on from the start (else: after the first delivery)
	wrapRx    func(datapath.Path) datapath.Path // wraps the receiver's path
}

// flowRun is a running sender → receiver pair over AF_XDP.
type flowRun struct {
	t        *testing.T
	pr       *netns.Pair
	imA, imB *bpf.Impair
	sp, rp   datapath.Path
	watch    *leadWatch
	sloop    *cast.Loop
	rloop    *cast.Loop
	rclosed  bool
	produced atomic.Int64 // records the producer sent (the default producer)
	got      atomic.Int64 // records delivered in order (OnRecord)
	bad      atomic.Int64 // out of order or wrong payload

	mu      sync.Mutex
	sEvents []cast.Event
	rEvents []cast.Event
}

// startFlow builds the namespaces, both paths and both loops; everything
// is removed by t.Cleanup.
func startFlow(t *testing.T, o flowOpts) *flowRun {
	t.Helper()
	nc := netns.DefaultConfig()
	nc.Tag = flowTag
	r := &flowRun{t: t, pr: netns.New(t, nc)}
	var err error
	if o.impairA.RecordType == 0 && o.impairA.DropFraction == 0 && o.impairA.EveryNth == 0 {
		o.impairA.RecordType = -1
	}
	if o.impairB.RecordType == 0 && o.impairB.DropFraction == 0 && o.impairB.EveryNth == 0 {
		o.impairB.RecordType = -1
	}
	o.impairA.Port, o.impairB.Port = xdpPort, xdpPort
	first := func(c bpf.ImpairConfig) bpf.ImpairConfig {
		if o.startLoss {
			return c
		}
		return bpf.ImpairConfig{Port: xdpPort, RecordType: -1}
	}
	addrA, addrB := netip.AddrPortFrom(r.pr.A.Addr, xdpPort), netip.AddrPortFrom(r.pr.B.Addr, xdpPort)
	switch o.kind {
	case "", "xdp":
		if r.imA, err = bpf.NewImpair(first(o.impairA)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.imA.Close() })
		if r.imB, err = bpf.NewImpair(first(o.impairB)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.imB.Close() })
		r.rp = open(t, r.pr.B, addrA, func(c *Config) {
			*c = DefaultConfig()
			c.Interface, c.Local, c.Peer, c.Impair = r.pr.B.Link, addrB, addrA, r.imB
			if o.rxPath != nil {
				o.rxPath(c)
			}
		})
		r.sp = open(t, r.pr.A, addrB, func(c *Config) {
			*c = DefaultConfig()
			c.Interface, c.Local, c.Peer, c.Impair = r.pr.A.Link, addrA, addrB, r.imA
		})
	case "udp", "mmsg":
		for _, e := range []struct {
			h  netns.Host
			im **bpf.Impair
			c  bpf.ImpairConfig
		}{{r.pr.A, &r.imA, o.impairA}, {r.pr.B, &r.imB, o.impairB}} {
			im, _, err := e.h.AttachImpair(first(e.c))
			if err != nil {
				t.Fatalf("impair program on %s: %v", e.h.Link, err)
			}
			*e.im = im
			t.Cleanup(func() { im.Close() })
		}
		r.rp = openKernel(t, o.kind, r.pr.B, addrB, addrA)
		r.sp = openKernel(t, o.kind, r.pr.A, addrA, addrB)
	default:
		t.Fatalf("unknown path kind %q", o.kind)
	}

	sc := protocol.DefaultSenderConfig()
	// The sender does not release a receiver that a loaded machine
	// starved for less than the stall budget (the release itself is
	// TestFlowReceiverGone's subject, and exact on the virtual clock).
	sc.ReceiverTimeout = stallBudget
	if o.sender != nil {
		o.sender(&sc)
	}
	snd, err := protocol.NewSender(sc, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc := protocol.DefaultReceiverConfig()
	// As in castRun: the protocol's own budgets are tested on the virtual
	// clock; here a repair may take up to stallBudget.
	rc.MaxNakRetries = max(rc.MaxNakRetries, int(int64(stallBudget)/int64(rc.NakDebounce)))
	rc.SilenceIntervals = max(rc.SilenceIntervals, int(int64(stallBudget)/int64(rc.HeartbeatInterval)))
	if o.receiver != nil {
		o.receiver(&rc)
	}
	rcv, err := protocol.NewReceiver(rc)
	if err != nil {
		t.Fatal(err)
	}
	r.watch = newLeadWatch(r.sp, uint64(sc.InitialWindow))

	rl := cast.DefaultLoopConfig()
	rl.RaiseGOMAXPROCS = true
	rl.Path, rl.Receiver = r.rp, rcv
	if o.wrapRx != nil {
		rl.Path = o.wrapRx(r.rp)
	}
	if o.recvRing > 0 {
		rl.RecvRing = o.recvRing
	} else {
		next := uint64(1)
		rl.OnRecord = func(_ *cast.Loop, h wire.Header, p []byte) {
			if wire.Seq(p) != next || binary.LittleEndian.Uint64(p[8:]) != next-1 {
				r.bad.Add(1)
			}
			next++
			r.got.Add(1)
		}
	}
	rl.OnEvent = func(e cast.Event) { r.mu.Lock(); r.rEvents = append(r.rEvents, e); r.mu.Unlock() }
	if r.rloop, err = cast.StartLoop(rl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.closeReceiver() })

	sl := cast.DefaultLoopConfig()
	sl.RaiseGOMAXPROCS = true
	sl.Path, sl.Sender = r.watch, snd
	sl.OnEvent = func(e cast.Event) { r.mu.Lock(); r.sEvents = append(r.sEvents, e); r.mu.Unlock() }
	if o.onPoll != nil {
		sl.OnPoll = o.onPoll
	} else {
		payload := make([]byte, 128)
		var start int64
		produced := 0
		sl.OnPoll = func(l *cast.Loop, now int64) {
			if start == 0 {
				start = now
			}
			for k := 0; k < 64 && produced < o.n; k++ {
				if o.rate > 0 && float64(produced) > float64(now-start)/1e9*o.rate {
					return
				}
				binary.LittleEndian.PutUint64(payload[8:], uint64(produced))
				if _, err := l.Send(typData, payload); err != nil {
					return // batch full or backpressure: next iteration
				}
				produced++
				r.produced.Store(int64(produced))
			}
		}
	}
	if r.sloop, err = cast.StartLoop(sl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.sloop.Close() })
	if !o.startLoss {
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			// Loss goes on once the receiver has a stream position (it
			// expects seq 1 and NAKs what it missed before its first
			// record, but the figures are of the steady state).
			for r.rloop.ReceiverStats().Delivered == 0 {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
			}
			r.imA.Set(o.impairA)
			r.imB.Set(o.impairB)
		}()
		t.Cleanup(func() { close(stop); <-done })
	}
	return r
}

// openKernel opens a udp or mmsg path (mmsg without GSO/GRO) in h's
// namespace, bound to local and connected to peer.
func openKernel(t *testing.T, kind string, h netns.Host, local, peer netip.AddrPort) datapath.Path {
	t.Helper()
	var p datapath.Path
	if err := h.Do(func() error {
		var err error
		if kind == "udp" {
			c := udp.DefaultConfig()
			c.Local, c.Peer = local, peer
			p, err = udp.New(c)
		} else {
			c := mmsg.DefaultConfig()
			c.Local, c.Peer, c.NoGSO, c.NoGRO = local, peer, true, true
			p, err = mmsg.New(c)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// xdpStats is p's AF_XDP counters (zero for the kernel paths).
func xdpStats(p datapath.Path) Stats {
	if x, ok := p.(*Path); ok {
		return x.Stats()
	}
	return Stats{}
}

func (r *flowRun) closeReceiver() {
	if !r.rclosed {
		r.rclosed = true
		if err := r.rloop.Close(); err != nil {
			r.t.Errorf("receiver loop: %v", err)
		}
	}
}

// waitFor polls cond until it holds, a loop stops, or progress() stayed
// unchanged for stallBudget: a loaded machine makes a run slow, only a
// stall makes it fail. It reports whether cond held.
func (r *flowRun) waitFor(cond func() bool, progress func() int64) bool {
	last, since := int64(-1), time.Now()
	for !cond() {
		if p := progress(); p != last {
			last, since = p, time.Now()
		}
		if time.Since(since) > stallBudget || r.sloop.Err() != nil || (!r.rclosed && r.rloop.Err() != nil) {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
	return true
}

func (r *flowRun) events() (s, rc []cast.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]cast.Event(nil), r.sEvents...), append([]cast.Event(nil), r.rEvents...)
}

// stop closes both loops and returns their final stats.
func (r *flowRun) stop() (protocol.SenderStats, protocol.ReceiverStats) {
	if err := r.sloop.Close(); err != nil {
		r.t.Errorf("sender loop: %v", err)
	}
	r.closeReceiver()
	return r.sloop.SenderStats(), r.rloop.ReceiverStats()
}

// checkClean fails the test on any receiver event (Faulted, Reconnect,
// silence) and any sender event but the receiver's one join.
func (r *flowRun) checkClean() {
	r.t.Helper()
	sev, rev := r.events()
	if len(rev) != 0 {
		r.t.Errorf("receiver events %v", rev)
	}
	if len(sev) != 1 || sev[0].Kind != cast.EventReceiverJoined {
		r.t.Errorf("sender events %v (want one receiver_joined)", sev)
	}
}

// checkLead fails the test if the sender ever sent a record past the edge
// the receiver had granted (Delivered + Window of the newest Status the
// sender could have heard; before any, the initial window).
func (r *flowRun) checkLead() {
	r.t.Helper()
	w := r.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.overruns != 0 {
		r.t.Errorf("the sender overran the receiver's window %d times (first: seq %d past edge %d)", w.overruns, w.firstSeq, w.firstEdge)
	}
	if w.statuses == 0 {
		r.t.Errorf("no Status reached the sender: flow control was not exercised")
	}
}

// leadWatch wraps the sender's path and checks flow control on the wire:
// every data record it sends for the first time must be within the edge
// (Delivered + Window) of the newest Status it has received, or within
// the initial window before the first. It sees a Status before the
// Sender does, so it is never stricter than the Sender may be.
//
// A heartbeat naming a seq above every data record sent is the initial
// window's probe (cast/protocol/flow_initial.go): it announces the
// window's last record in place of sending it, so that seq counts as sent
// then, against the edge of that moment. The record itself goes out
// later, at the receiver's NAK or once the edge passes it, and is no
// longer a first send: a receiver whose first Status advertises an edge
// below it may well ask for it (it NAKs what its reorder window holds).
type leadWatch struct {
	datapath.Path
	initEdge uint64

	mu        sync.Mutex
	edge      uint64 // highest edge heard
	delivered uint64 // highest Delivered heard
	statuses  uint64
	highest   uint64 // highest data seq sent
	maxLead   uint64 // largest seq − delivered at the time it was sent
	overruns  uint64
	firstSeq  uint64
	firstEdge uint64
}

func newLeadWatch(p datapath.Path, initEdge uint64) *leadWatch {
	return &leadWatch{Path: p, initEdge: initEdge}
}

func (w *leadWatch) Send(v *batch.Vec) (int, error) {
	w.mu.Lock()
	for i := range v.Len() {
		b, _ := v.Msg(i)
		frames(b, func(h wire.Header, p []byte) {
			var seq uint64
			switch h.Type {
			case typData:
				seq = wire.Seq(p)
			case wire.TypeHeartbeat:
				hb, err := wire.ParseHeartbeat(p)
				if err != nil {
					return
				}
				seq = hb.Highest
			default:
				return
			}
			if seq <= w.highest {
				return // a retransmit, or a heartbeat naming what was sent
			}
			w.highest = seq
			edge := w.initEdge
			if w.statuses > 0 {
				edge = w.edge
			}
			if seq > edge {
				w.overruns++
				if w.overruns == 1 {
					w.firstSeq, w.firstEdge = seq, edge
				}
			}
			w.maxLead = max(w.maxLead, seq-min(seq, w.delivered))
		})
	}
	w.mu.Unlock()
	return w.Path.Send(v)
}

func (w *leadWatch) Recv(v *batch.Vec) (int, error) {
	n, err := w.Path.Recv(v)
	if n == 0 {
		return n, err
	}
	w.mu.Lock()
	for i := range n {
		b, _ := v.Msg(i)
		frames(b, func(h wire.Header, p []byte) {
			if h.Type != wire.TypeStatus {
				return
			}
			st, err := wire.ParseStatus(p)
			if err != nil {
				return
			}
			w.statuses++
			w.edge = max(w.edge, st.Edge())
			w.delivered = max(w.delivered, st.Delivered)
		})
	}
	w.mu.Unlock()
	return n, err
}

func (w *leadWatch) lead() (maxLead, delivered, edge uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.maxLead, w.delivered, w.edge
}

// frames calls f for each whole frame of datagram b.
func frames(b []byte, f func(wire.Header, []byte)) {
	for len(b) >= wire.HeaderSize {
		h, p, size, err := wire.DecodeFrame(b)
		if err != nil || size <= 0 {
			return
		}
		f(h, p)
		b = b[size:]
	}
}

// TestFlowLoss: 10 000 records over AF_XDP (1 % and 10 %) and over udp
// and mmsg (10 %), unpaced, with that fraction of the datagrams arriving
// at each end dropped by the BPF injector (data, retransmits and probes
// one way; Status and NAKs the other): every record once and in order, no
// Faulted, no Reconnect, and the sender never sent a record past the edge
// its receiver had granted.
