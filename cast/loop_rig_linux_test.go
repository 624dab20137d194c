package cast

import (
	"encoding/binary"
	"math"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/datapath/drop"
	"github.com/walcast/walcast/datapath/mmsg"
	"github.com/walcast/walcast/datapath/udp"
	"github.com/walcast/walcast/wal"
	"github.com/walcast/walcast/wire"
)

// openPair opens two connected sockets of the given datapath on loopback.
func openPair(t testing.TB, kind string, noGSO bool) (a, b datapath.Path) {
	t.Helper()
	switch kind {
	case "udp":
		pb, err := udp.New(udp.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		c := udp.DefaultConfig()
		c.Peer = pb.LocalAddr()
		pa, err := udp.New(c)
		if err != nil {
			t.Fatal(err)
		}
		// Connect b back to a now that a's address is known.
		pb.Close()
		cb := udp.DefaultConfig()
		cb.Local, cb.Peer = pb.LocalAddr(), pa.LocalAddr()
		if pb, err = udp.New(cb); err != nil {
			t.Fatal(err)
		}
		return pa, pb
	case "mmsg":
		pb, err := mmsg.New(mmsg.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		c := mmsg.DefaultConfig()
		c.Peer = pb.LocalAddr()
		c.NoGSO = noGSO
		pa, err := mmsg.New(c)
		if err != nil {
			t.Fatal(err)
		}
		pb.Close()
		cb := mmsg.DefaultConfig()
		cb.Local, cb.Peer = pb.LocalAddr(), pa.LocalAddr()
		if pb, err = mmsg.New(cb); err != nil {
			t.Fatal(err)
		}
		return pa, pb
	}
	t.Fatalf("unknown datapath %q", kind)
	return nil, nil
}

// rigOpts describes one sender→receiver run over real sockets.
type rigOpts struct {
	path       string
	n          int     // records to send
	payload    int     // payload bytes (≥ 8)
	rate       float64 // records/s, 0 = as fast as the path takes them
	recvDrop   float64 // percent lost at the receiver
	sendDrop   float64 // percent lost at the sender
	dup        float64 // percent duplicated by the sender
	withWAL    bool
	ringSlots  int // sender hot ring (default 4096)
	noGSO      bool
	coalesce   bool
	viaRings   bool          // publish and consume through the SPSC rings instead of callbacks
	consumeMax int           // viaRings: records the consumer takes per pass (0: all), a slow consumer
	noFlow     bool          // the sender ignores Status (the reference's behaviour)
	debounce   time.Duration // NAK debounce (default: the protocol's; the re-NAK delay follows the RTT below it)
	reorder    int
	maxRetries int
	timeout    time.Duration // give up when no record was delivered for this long (default 20 s)
	idle       affinity.Strategy
	flood      float64 // NAK{1, 2^64−1} datagrams per second sent from the receiver's socket
	coldRate   int64   // sender's ColdRate (0: default)
	keys       *Keys   // both loops authenticate every datagram with these
	sendBatch  int     // records per Loop.SendBatch call (0: Send, up to 64 a poll)
}

type rigResult struct {
	delivered []uint64
	inOrder   bool
	events    []Event
	sStats    protocol.SenderStats
	rStats    protocol.ReceiverStats
	sLoop     LoopStats
	rLoop     LoopStats
	sAuth     AuthStats
	rAuth     AuthStats
	sRcv      []protocol.ReceiverInfo // the sender's flow-control table at the end
	elapsed   time.Duration           // first send to the last delivery (or the deadline)
	sendLife  time.Duration           // from before the sender loop started to after it closed
	floods    uint64                  // flood NAK datagrams sent
}

func runRig(t testing.TB, o rigOpts) rigResult {
	t.Helper()
	if o.payload == 0 {
		o.payload = 128
	}
	if o.timeout == 0 {
		o.timeout = 20 * time.Second
	}
	o.rate /= raceSlowdown
	o.flood /= raceSlowdown // a flood as heavy next to the stream as without the race detector
	pa, pb := openPair(t, o.path, o.noGSO)
	var sp, rp datapath.Path = pa, pb
	if o.sendDrop > 0 || o.dup > 0 {
		sp = drop.New(pa, drop.Config{SendPct: o.sendDrop, DupPct: o.dup, Seed: 1}, 64, protocol.DefaultMaxFrame)
	}
	if o.recvDrop > 0 {
		rp = drop.New(pb, drop.Config{RecvPct: o.recvDrop, Seed: 2}, 64, protocol.DefaultMaxFrame)
	}
	var fp *floodPath
	if o.flood > 0 {
		fp = newFloodPath(rp, o.flood)
		rp = fp
	}
	sc := protocol.DefaultSenderConfig()
	sc.Coalesce = o.coalesce
	sc.NoFlowControl = o.noFlow
	if o.coldRate > 0 {
		sc.ColdRate = o.coldRate
	}
	if o.ringSlots > 0 {
		sc.RingSlots = o.ringSlots
	}
	var log protocol.Log
	var cold ColdReader
	if o.withWAL {
		w, err := wal.Open(wal.DefaultConfig(t.TempDir()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		log, cold = w, w
	}
	if o.maxRetries == 0 {
		// As tolerateStalls below: the sender does not drop a receiver
		// starved by a loaded machine from flow control meanwhile.
		sc.ReceiverTimeout = stallBudget
	}
	snd, err := protocol.NewSender(sc, log)
	if err != nil {
		t.Fatal(err)
	}
	// Protocol defaults: flow control keeps the sender within the
	// receiver's window however long a loop is descheduled, and the
	// re-NAK delay follows the RTT.
	rc := protocol.DefaultReceiverConfig()
	if o.debounce > 0 {
		rc.NakDebounce = o.debounce
	}
	if o.reorder > 0 {
		rc.ReorderSlots = o.reorder
	}
	if o.maxRetries > 0 {
		rc.MaxNakRetries = o.maxRetries
	} else {
		tolerateStalls(&rc)
	}
	rcv, err := protocol.NewReceiver(rc)
	if err != nil {
		t.Fatal(err)
	}

	res := rigResult{inOrder: true, delivered: make([]uint64, 0, o.n)}
	var got atomic.Int64
	check := func(seq uint64) {
		if len(res.delivered) > 0 && seq != res.delivered[len(res.delivered)-1]+1 {
			res.inOrder = false
		}
		res.delivered = append(res.delivered, seq)
		got.Add(1)
	}
	rl := DefaultLoopConfig()
	rl.Path, rl.Receiver, rl.Keys = rp, rcv, o.keys
	rl.Idle.Strategy = o.idle
	if o.viaRings {
		rl.RecvRing = 1024
	} else {
		rl.OnRecord = func(_ *Loop, h wire.Header, p []byte) { check(wire.Seq(p)) }
	}
	var evs []Event
	rl.OnEvent = func(e Event) { evs = append(evs, e) }
	rloop, err := StartLoop(rl)
	if err != nil {
		t.Fatal(err)
	}

	sl := DefaultLoopConfig()
	sl.Path, sl.Sender, sl.Cold, sl.Keys = sp, snd, cold, o.keys
	sl.Idle.Strategy = o.idle
	payload := make([]byte, o.payload)
	var produced int
	var start int64
	switch {
	case o.viaRings:
		sl.SendRing = 1024
	case o.sendBatch > 0:
		// One call a poll, larger than the loop's batch (64) so that
		// SendBatch flushes part way; each record carries its index.
		bufs := make([][]byte, o.sendBatch)
		for i := range bufs {
			bufs[i] = make([]byte, o.payload)
		}
		sl.OnPoll = func(l *Loop, now int64) {
			if start == 0 {
				start = now
			}
			k := min(len(bufs), o.n-produced)
			if o.rate > 0 {
				k = min(k, int(float64(now-start)/1e9*o.rate)+1-produced)
			}
			for i := 0; i < k; i++ {
				binary.LittleEndian.PutUint64(bufs[i][8:], uint64(produced+i))
			}
			if k > 0 {
				n, _ := l.SendBatch(1, bufs[:k]) // ErrBatchFull or backpressure: the rest next poll
				produced += n
			}
		}
	default:
		sl.OnPoll = func(l *Loop, now int64) {
			if start == 0 {
				start = now
			}
			for k := 0; k < 64 && produced < o.n; k++ {
				if o.rate > 0 && float64(produced) > float64(now-start)/1e9*o.rate {
					return
				}
				binary.LittleEndian.PutUint64(payload[8:], uint64(produced))
				if _, err := l.Send(1, payload); err != nil {
					return // ErrBatchFull or backpressure: next iteration
				}
				produced++
			}
		}
	}
	born := time.Now()
	sloop, err := StartLoop(sl)
	if err != nil {
		rloop.Close()
		t.Fatal(err)
	}

	t0 := time.Now()
	// The run ends when no record was delivered for o.timeout: a slow
	// machine makes a run slow, only a stall makes it fail.
	var lastGot int64
	progress := t0
	stalled := func() bool {
		if g := got.Load(); g != lastGot {
			lastGot, progress = g, time.Now()
		}
		return time.Since(progress) > o.timeout
	}
	if o.viaRings {
		// Producer and consumer on this goroutine, alternating.
		ring := rloop.Received()
		pub := 0
		for got.Load() < int64(o.n) && !stalled() {
			for pub < o.n {
				if o.rate > 0 && float64(pub) > time.Since(t0).Seconds()*o.rate {
					break
				}
				binary.LittleEndian.PutUint64(payload[8:], uint64(pub))
				if sloop.Publish(1, payload) != nil {
					break
				}
				pub++
			}
			for k := 0; o.consumeMax == 0 || k < o.consumeMax; k++ {
				_, seq, p, ok := ring.Peek()
				if !ok {
					break
				}
				if binary.LittleEndian.Uint64(p) != seq {
					t.Errorf("ring seq %d, payload seq %d", seq, binary.LittleEndian.Uint64(p))
				}
				check(seq)
				ring.Pop()
			}
			if rcv := rloop.Err(); rcv != nil {
				break
			}
			if o.consumeMax > 0 {
				time.Sleep(100 * time.Microsecond)
			}
		}
	} else {
		for got.Load() < int64(o.n) && !stalled() && rloop.Err() == nil && sloop.Err() == nil {
			time.Sleep(2 * time.Millisecond)
			if len(rloop.Events()) > 0 && o.maxRetries > 0 {
				break // a sticky outcome: the caller checks it
			}
		}
	}
	res.elapsed = time.Since(t0)
	if err := sloop.Close(); err != nil {
		t.Errorf("sender loop: %v", err)
	}
	res.sendLife = time.Since(born)
	if err := rloop.Close(); err != nil {
		t.Errorf("receiver loop: %v", err)
	}
	res.events = evs
	res.sStats, res.rStats = sloop.SenderStats(), rloop.ReceiverStats()
	res.sLoop, res.rLoop = sloop.Stats(), rloop.Stats()
	res.sAuth, res.rAuth = sloop.AuthStats(), rloop.AuthStats()
	res.sRcv = sloop.Receivers()
	if fp != nil {
		res.floods = fp.sent
	}
	return res
}

// floodPath wraps a receiver's path and, on the loop's thread, sends
// NAK{1, 2^64−1} datagrams to the connected sender at rate per second
// from the receiver's own socket (the one source a sender serves).
type floodPath struct {
	datapath.Path
	rate  float64
	start time.Time
	nak   []byte
	v     *batch.Vec
	sent  uint64
}

func newFloodPath(p datapath.Path, rate float64) *floodPath {
	f := &floodPath{Path: p, rate: rate, nak: make([]byte, wire.ControlFrameSize), v: batch.New(64, wire.ControlFrameSize)}
	wire.PutNakFrame(f.nak, wire.Nak{From: 1, Count: math.MaxUint64})
	return f
}

func (f *floodPath) Recv(v *batch.Vec) (int, error) {
	if f.start.IsZero() {
		f.start = time.Now()
	}
	if due := uint64(time.Since(f.start).Seconds() * f.rate); due > f.sent {
		f.v.Reset()
		for k := due - f.sent; k > 0 && !f.v.Full(); k-- {
			f.v.Append(f.nak, netip.AddrPort{})
		}
		if n, err := f.Path.Send(f.v); err == nil {
			f.sent += uint64(n)
		}
	}
	return f.Path.Recv(v)
}

// stallBudget is how long a real-socket test lets the receiver go without
// a repair, or without hearing the sender at all, before the protocol
// gives up (Faulted). On a loaded 2-vCPU machine a spinning loop, or the
// softirq that carries its datagrams, can be descheduled for a good part
// of a second; the protocol's own budgets (24 NAKs, 1 s of silence) are
// tested exactly on the virtual clock (cast/protocol), so tests that are
// about delivery over real sockets give the machine this much room.
const stallBudget = 10 * time.Second * raceSlowdown

// tolerateStalls widens rc's retry and silence budgets to stallBudget.
func tolerateStalls(rc *protocol.ReceiverConfig) {
	if rc.NakDebounce > 0 {
		rc.MaxNakRetries = max(rc.MaxNakRetries, int(int64(stallBudget)/int64(rc.NakDebounce)))
	}
	rc.SilenceIntervals = max(rc.SilenceIntervals, int(int64(stallBudget)/int64(rc.HeartbeatInterval)))
}

func (r rigResult) complete(t *testing.T, n int) {
	t.Helper()
	if len(r.delivered) != n || !r.inOrder || (n > 0 && (r.delivered[0] != 1 || r.delivered[n-1] != uint64(n))) {
		first, last := uint64(0), uint64(0)
		if len(r.delivered) > 0 {
			first, last = r.delivered[0], r.delivered[len(r.delivered)-1]
		}
		t.Fatalf("delivered %d of %d (in order %v, %d..%d); events %v; receiver %+v; sender %+v", len(r.delivered), n, r.inOrder, first, last, r.events, r.rStats, r.sStats)
	}
	if r.rStats.Delivered != uint64(n) {
		t.Fatalf("receiver counted %d", r.rStats.Delivered)
	}
}
