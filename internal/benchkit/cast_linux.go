package benchkit

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/cast"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/datapath/mmsg"
	"github.com/walcast/walcast/datapath/udp"
	"github.com/walcast/walcast/wal"
	"github.com/walcast/walcast/wire"
)

// ConnectedUDP opens two datapath/udp sockets on loopback connected to
// each other.
func ConnectedUDP() (a, b *udp.Path, err error) {
	if b, err = udp.New(udp.DefaultConfig()); err != nil {
		return nil, nil, err
	}
	ca := udp.DefaultConfig()
	ca.Peer = b.LocalAddr()
	if a, err = udp.New(ca); err != nil {
		b.Close()
		return nil, nil, err
	}
	bl := b.LocalAddr()
	b.Close()
	cb := udp.DefaultConfig()
	cb.Local, cb.Peer = bl, a.LocalAddr()
	if b, err = udp.New(cb); err != nil {
		a.Close()
		return nil, nil, err
	}
	return a, b, nil
}

// ConnectedMmsg opens two datapath/mmsg sockets on loopback connected to
// each other; a sends with GSO when gso is true, b receives with GRO when
// gro is true.
func ConnectedMmsg(gso, gro bool, batch int) (a, b *mmsg.Path, err error) {
	cb := mmsg.DefaultConfig()
	cb.NoGRO, cb.Batch = !gro, batch
	if b, err = mmsg.New(cb); err != nil {
		return nil, nil, err
	}
	ca := mmsg.DefaultConfig()
	ca.NoGSO, ca.Batch, ca.Peer = !gso, batch, b.LocalAddr()
	if a, err = mmsg.New(ca); err != nil {
		b.Close()
		return nil, nil, err
	}
	bl := b.LocalAddr()
	b.Close()
	cb.Local, cb.Peer = bl, a.LocalAddr()
	if b, err = mmsg.New(cb); err != nil {
		a.Close()
		return nil, nil, err
	}
	return a, b, nil
}

// RTTCasting is ping-pong through the casting protocol over datapath/udp:
// a client loop (Sender + Receiver) sends one record, an echo loop
// (Receiver + Sender) sends it back on its own stream, and the client
// times the round trip. Same threads, pins and idle mode as RTTRawUDP;
// both loops receive and flush c.Batch datagrams at a time.
func RTTCasting(c RTTConfig) (Row, error) { return rttCasting(c, "udp") }

// RTTCastingMmsg is RTTCasting over datapath/mmsg (recvmmsg/sendmmsg of
// c.Batch datagrams, no GSO/GRO).
func RTTCastingMmsg(c RTTConfig) (Row, error) { return rttCasting(c, "mmsg") }

func rttCasting(c RTTConfig, kind string) (Row, error) {
	if err := c.Validate(); err != nil {
		return Row{}, err
	}
	if c.Size < wire.HeaderSize+16 {
		return Row{}, fmt.Errorf("benchkit: casting rtt needs size >= %d", wire.HeaderSize+16)
	}
	var a, b datapath.Path
	var err error
	if kind == "mmsg" {
		a, b, err = ConnectedMmsg(false, false, c.Batch)
	} else {
		a, b, err = ConnectedUDP()
	}
	if err != nil {
		return Row{}, err
	}
	ctr := cast.Counters{Off: c.NoCounters}
	echo, err := newEchoLoop(b, affinity.OnCPU(c.CPUs[1]), c.Mode, c.Batch, c.Keys, ctr)
	if err != nil {
		a.Close()
		b.Close()
		return Row{}, err
	}
	defer echo.Close()

	total := c.Warmup + c.N
	s := NewSamples(c.N)
	payload := make([]byte, c.Size-wire.HeaderSize)
	var i int
	var t0 int64
	var outstanding bool
	var pingRefused int // read after the loop stopped
	done := make(chan struct{})
	var sendErr error
	var l *cast.Loop
	ping := func(l *cast.Loop) {
		if i >= total {
			return
		}
		binary.LittleEndian.PutUint64(payload[8:], uint64(i))
		t0 = l.Now()
		if _, err := l.Send(1, payload); err != nil {
			// A full batch, or a window the echo's last Status left shut
			// (its next Status opens it): ping again next iteration.
			if !errors.Is(err, protocol.ErrBatchFull) && !errors.Is(err, protocol.ErrBackpressure) {
				sendErr = err
				close(done)
				i = total
			}
			pingRefused++
			return
		}
		outstanding = true
	}
	var start time.Time
	cfg, err := loopConfig(a, affinity.OnCPU(c.CPUs[0]), c.Mode, true, true)
	if err != nil {
		return Row{}, err
	}
	cfg.Batch, cfg.Keys, cfg.Counters = c.Batch, c.Keys, ctr
	cfg.OnPoll = func(l *cast.Loop, now int64) {
		if !outstanding {
			ping(l)
		}
	}
	cfg.OnRecord = func(l *cast.Loop, h wire.Header, p []byte) {
		if len(p) < 16 || binary.LittleEndian.Uint64(p[8:]) != uint64(i) {
			return
		}
		rtt := l.Now() - t0
		if i >= c.Warmup {
			s.Record(rtt)
		}
		if i == c.Warmup {
			start = time.Now()
		}
		outstanding = false
		i++
		if i == total {
			close(done)
			return
		}
		ping(l)
	}
	if l, err = cast.NewLoop(cfg); err != nil {
		a.Close()
		return Row{}, err
	}
	if err := l.Start(); err != nil {
		a.Close()
		return Row{}, err
	}
	deadline := time.Duration(total) * c.Timeout / 100
	if deadline < 30*time.Second {
		deadline = 30 * time.Second
	}
	var timedOut bool
	select {
	case <-done:
	case <-l.Done():
	case <-time.After(deadline):
		timedOut = true
	}
	el := time.Since(start)
	cerr := l.Close()
	if sendErr != nil {
		return Row{}, sendErr
	}
	if cerr != nil {
		return Row{}, cerr
	}
	if timedOut {
		es, er := echo.SenderStats(), echo.ReceiverStats()
		return Row{}, fmt.Errorf("benchkit: casting rtt timed out after %d of %d pings (client refused %d pings; echo refused %d replies, lost %d, sent %d, delivered %d, backpressured %d, initial-held %d)",
			i, total, pingRefused, echo.refused.Load(), echo.lost.Load(), es.Sent, er.Delivered, es.Backpressured, es.InitialHeld)
	}
	if lost := echo.lost.Load(); lost > 0 {
		return Row{}, fmt.Errorf("benchkit: casting rtt: the echo lost %d replies", lost)
	}
	st := l.ReceiverStats()
	name := "casting-" + kind
	if c.Keys != nil {
		name += "+auth"
	}
	if c.NoCounters {
		name += "+nocounters"
	}
	row := Row{Workload: "rtt", Name: name, Path: kind, Mode: c.Mode.String(), Latency: s.Summarize(), Records: int64(s.Len()), Seconds: el.Seconds()}
	row.RecPerS = float64(s.Len()) / el.Seconds()
	// What one round trip costs the client thread, averaged over every
	// ping (warm-up included): system calls and loop iterations.
	var recvCalls, sendCalls uint64
	switch p := a.(type) {
	case *udp.Path:
		ps := p.Stats()
		recvCalls, sendCalls = ps.RecvCalls, ps.SendCalls
	case *mmsg.Path:
		ps := p.Stats()
		recvCalls, sendCalls = ps.RecvCalls, ps.SendCalls
	}
	per := float64(max(total, 1))
	row.Note = fmt.Sprintf("client per round trip: %.1f recv calls, %.2f send calls, %.1f loop iterations",
		float64(recvCalls)/per, float64(sendCalls)/per, float64(l.Stats().Iterations)/per)
	if st.NaksSent > 0 {
		row.Note += fmt.Sprintf("; naks=%d", st.NaksSent)
	}
	if r := echo.refused.Load(); r > 0 || pingRefused > 0 {
		// A Send refused (full batch or shut window) and sent again later.
		row.Note += fmt.Sprintf("; refused: %d pings, %d replies", pingRefused, r)
	}
	return row, nil
}

// loopConfig is the loop setup the runners share.
func loopConfig(p datapath.Path, pin affinity.Config, mode affinity.Strategy, sender, receiver bool) (cast.LoopConfig, error) {
	cfg := cast.DefaultLoopConfig()
	cfg.Path, cfg.Thread = p, pin
	cfg.RaiseGOMAXPROCS = true
	cfg.Idle.Strategy = mode
	if sender {
		s, err := protocol.NewSender(protocol.DefaultSenderConfig(), nil)
		if err != nil {
			return cfg, err
		}
		cfg.Sender = s
	}
	if receiver {
		r, err := protocol.NewReceiver(protocol.DefaultReceiverConfig())
		if err != nil {
			return cfg, err
		}
		cfg.Receiver = r
	}
	return cfg, nil
}

// castEcho is a loop that sends every record it receives back on its
// own stream. A reply its Sender refuses (a full batch, or flow control:
// the client's window is shut until its next Status) waits in a small
// queue and is sent again on the next iterations, never dropped: a
// dropped reply is a ping lost for good. Refused counts those refusals.
type castEcho struct {
	*cast.Loop
	q       [][]byte // queued replies (payload copies), oldest first
	types   []uint16
	head, n int
	refused atomic.Uint64
	lost    atomic.Uint64 // replies beyond the queue (never in a ping-pong)
}

// echoQueue bounds the replies an echo holds back: a ping-pong has one
// in flight.
const echoQueue = 64

func newEchoLoop(p datapath.Path, pin affinity.Config, mode affinity.Strategy, batch int, keys *cast.Keys, ctr cast.Counters) (*castEcho, error) {
	cfg, err := loopConfig(p, pin, mode, true, true)
	if err != nil {
		return nil, err
	}
	cfg.Keys, cfg.Counters = keys, ctr
	e := &castEcho{q: make([][]byte, echoQueue), types: make([]uint16, echoQueue)}
	for i := range e.q {
		e.q[i] = make([]byte, 0, cfg.Slot)
	}
	cfg.Batch = batch
	cfg.OnRecord = func(l *cast.Loop, h wire.Header, payload []byte) {
		if e.n == 0 && e.send(l, h.Type, payload) {
			return
		}
		if e.n == len(e.q) {
			e.lost.Add(1)
			return
		}
		i := (e.head + e.n) % len(e.q)
		e.q[i], e.types[i] = append(e.q[i][:0], payload...), h.Type
		e.n++
	}
	cfg.OnPoll = func(l *cast.Loop, _ int64) {
		for e.n > 0 && e.send(l, e.types[e.head], e.q[e.head]) {
			e.head = (e.head + 1) % len(e.q)
			e.n--
		}
	}
	if e.Loop, err = cast.NewLoop(cfg); err != nil {
		return nil, err
	}
	return e, e.Start()
}

// send sends one reply; false: refused for now (counted), try again later.
func (e *castEcho) send(l *cast.Loop, typ uint16, payload []byte) bool {
	_, err := l.Send(typ, payload)
	if err == nil {
		return true
	}
	if errors.Is(err, protocol.ErrBatchFull) || errors.Is(err, protocol.ErrBackpressure) {
		e.refused.Add(1)
		return false
	}
	e.lost.Add(1) // a record the Sender can never take
	return true
}

// sameRecord is n views of one payload of size bytes: what the casting
// rows hand Loop.SendBatch each poll (the Sender stamps each record's
// seq into its own frame, not into the payload).
func sameRecord(n, size int) [][]byte {
	p := make([]byte, size)
	ps := make([][]byte, n)
	for i := range ps {
		ps[i] = p
	}
	return ps
}

// castingPoll is one poll of a casting row's producer: one
// Loop.SendBatch of payloads (a whole send call's worth) while at most
// window records are in flight (0: no limit), none beyond: the floors'
// rule. It returns the records sent and the error that ends the row (a
// full batch and WAL backpressure only mean: the next poll).
func castingPoll(l *cast.Loop, payloads [][]byte, inFlight int64, window int) (int64, error) {
	if window > 0 && inFlight > int64(window) {
		return 0, nil
	}
	k, err := l.SendBatch(1, payloads)
	if errors.Is(err, protocol.ErrBatchFull) || errors.Is(err, wal.ErrBackpressure) {
		err = nil
	}
	return int64(k), err
}

// ThroughputCasting blasts Size-byte frames through the casting protocol
// over datapath/mmsg (GSO/GRO per c) for c.Duration and counts the records
// delivered in order. withWAL appends every record to a WAL in a
// temporary directory first (O_DIRECT where the filesystem allows);
// coalesce packs consecutive frames into 1472-byte datagrams. The sender
// is not paced: what the receiver loses is recovered by NAKs, and the
// counts are in Note.
func ThroughputCasting(c ThroughputConfig, withWAL, coalesce bool) (Row, error) {
	if err := c.Validate(); err != nil {
		return Row{}, err
	}
	if c.Size < wire.HeaderSize+8 {
		return Row{}, fmt.Errorf("benchkit: casting frames need size >= %d", wire.HeaderSize+8)
	}
	a, b, err := ConnectedMmsg(c.GSO, c.GRO, c.Batch)
	if err != nil {
		return Row{}, err
	}
	dir := ""
	if withWAL {
		if dir, err = os.MkdirTemp(c.Dir, "walcast-bench-"); err != nil {
			a.Close()
			b.Close()
			return Row{}, err
		}
		defer os.RemoveAll(dir)
	}

	// The receiving end: a Consumer (receiver on its pinned loop, UDP
	// repairs only). What it delivered is its Tip (records arrive in seq
	// order from seq 1), which it publishes once per loop iteration: like
	// the floor rows, which publish their count once per receive call, the
	// row shares no cache line between the threads per record.
	var outcome atomic.Value
	// From names the producer, as the path is connected to it: without
	// it a keyed consumer would listen AuthSettle (250 ms) for the newest
	// sender before it starts (docs/auth.md, Finding the sender), a quarter
	// of a 1 s row in which nothing is delivered, that the rows without
	// keys do not pay (they take the first sender frame).
	cons, err := cast.NewConsumer(cast.ConsumerConfig{Path: b, From: a.LocalAddr(), NoCatchUp: true, Thread: affinity.OnCPU(c.CPUs[1]), Keys: c.Keys,
		Advanced: cast.ConsumerAdvanced{Batch: c.Batch, RaiseGOMAXPROCS: true, Receiver: cast.ReceiverTuning{ReorderSlots: 1 << 16},
			Counters: cast.Counters{Off: c.NoCounters}},
		OnEvent: func(e cast.Event) {
			switch e.Kind {
			case cast.EventFaulted, cast.EventReconnect, cast.EventSenderRestarted:
				outcome.Store(e.Outcome.Kind.String())
			}
		}})
	if err != nil {
		a.Close()
		b.Close()
		return Row{}, err
	}
	runCtx, stopRun := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- cons.Run(runCtx, func(cast.Record) error { return nil }) }()
	delivered := func() int64 { return int64(cons.Tip()) }
	stopConsumer := func() {
		stopRun()
		<-runDone
	}

	// The sending end: a Producer (WAL, sender, pinned loop) that
	// produces from inside its loop, unpaced.
	// With keys a datagram holds 34 bytes fewer of frames: at the
	// default MaxFrame (a 1500-byte MTU) the largest record is 1438
	// bytes, so a larger size is measured at that one, and the row's
	// name says so.
	size := c.Size
	if c.Keys != nil {
		size = min(size, protocol.DefaultMaxFrame-wire.TrailerSize)
	}
	payloads := sameRecord(c.PerSend(), size-wire.HeaderSize)
	var produced atomic.Int64 // stored once per sender loop iteration
	var n64 int64             // sender loop only
	var stop atomic.Bool
	var sendErr error
	sc := cast.SenderTuning{Coalesce: coalesce}
	pr, err := cast.NewProducer(cast.ProducerConfig{Path: a, Dir: dir, Thread: affinity.OnCPU(c.CPUs[0]), Keys: c.Keys, Advanced: cast.ProducerAdvanced{
		Batch: c.Batch, RaiseGOMAXPROCS: true, Counters: cast.Counters{Off: c.NoCounters},
		Sender: sc,
		OnPoll: func(l *cast.Loop, now int64) {
			if stop.Load() {
				return
			}
			// The receiver's count read once per iteration, as the
			// floors read theirs once per send.
			k, err := castingPoll(l, payloads, n64-delivered(), c.Window)
			n64 += k
			if err != nil {
				sendErr = err
				stop.Store(true)
			}
			produced.Store(n64)
		}}})
	if err != nil {
		stopConsumer()
		return Row{}, err
	}
	start := time.Now()
	time.Sleep(c.Duration)
	stop.Store(true)
	sent := produced.Load()
	// Wait for the receiver to catch up (repairs included), or give up
	// after 3 s of no progress.
	last, lastChange := delivered(), time.Now()
	for delivered() < sent && time.Since(lastChange) < 3*time.Second && outcome.Load() == nil {
		time.Sleep(5 * time.Millisecond)
		if d := delivered(); d != last {
			last, lastChange = d, time.Now()
		}
	}
	got := delivered()
	// Measured until the last delivery seen (not the 3 s of waiting).
	el := lastChange.Sub(start)
	if el < c.Duration {
		el = c.Duration
	}
	ws := pr.Stats().WAL // before Close: the WAL's flushes of the run
	if err := pr.Close(); err != nil {
		stopConsumer()
		return Row{}, err
	}
	stopConsumer()
	if sendErr != nil {
		return Row{}, sendErr
	}
	sent = produced.Load()
	ps, cs := pr.Stats(), cons.Stats()
	ss, rs := ps.Sender, cs.Receiver
	name := "casting-mmsg"
	if withWAL {
		name += "+wal"
	}
	if coalesce {
		name += "+coalesce"
	}
	if c.Keys != nil {
		name += "+auth"
		if size != c.Size {
			name += fmt.Sprintf("@%dB", size)
		}
	}
	if c.NoCounters {
		name += "+nocounters"
	}
	row := Row{Workload: "throughput", Name: name, Path: "mmsg"}
	row.fill(got, size, el.Seconds())
	f := a.Features()
	oc, _ := outcome.Load().(string)
	if oc == "" {
		oc = "live"
	}
	row.Note = fmt.Sprintf("size=%d sent=%d delivered=%d gso=%v gro=%v naks=%d retx_hot=%d retx_cold=%d outcome=%v",
		size, sent, got, f.GSO, b.Features().GRO, rs.NaksSent, ss.RetxHot, ss.RetxCold, oc)
	if withWAL {
		row.Note += fmt.Sprintf(" wal: %d flushes (%.0f KiB each, p50 %v, p99 %v), backpressure %d, direct=%v",
			ws.Flushes, float64(sent)*float64(size)/float64(max(ws.Flushes, 1))/1024, ws.FlushP50.Round(time.Microsecond),
			ws.FlushP99.Round(time.Microsecond), ws.Backpressure, ws.Direct)
	}
	ls := ps.Loop
	row.Note += fmt.Sprintf(" sender loop: %d iterations, %.0f%% idle, %d flushes, %d yields to the WAL's I/O", ls.Iterations, 100*float64(ls.IdlePolls)/float64(max(ls.Iterations, 1)), ls.Flushes, ls.IOYields)
	return row, nil
}
