package fanout

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/cast"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/datapath/mmsg"
	"github.com/walcast/walcast/datapath/udp"
	"github.com/walcast/walcast/internal/latency"
	"github.com/walcast/walcast/internal/netns"
	"github.com/walcast/walcast/internal/pace"
	"github.com/walcast/walcast/replay"
	"github.com/walcast/walcast/wal"
	"github.com/walcast/walcast/wire"
)

// dataType is the record type the producer sends.
const dataType = 100

// receiver is one receiving host's state.
type receiver struct {
	i     int
	host  netns.Host
	port  uint16
	tap   *receiverTap
	loop  *cast.Loop
	lat   *latency.Samples
	clk   Clock
	total uint64

	mu         sync.Mutex // guards the delivery state across the kill switch-over
	last       uint64     // last seq delivered
	delivered  atomic.Uint64
	outOfOrder uint64
	udp, tcp   uint64
	killed     bool
	outcome    string
	ended      atomic.Bool // EventEnded: the session end marker came and everything before it
	oldTaps    []*receiverTap
	done       chan struct{}
	doneOnce   sync.Once
}

func (r *receiver) deliver(p []byte, viaTCP bool) {
	seq := binary.LittleEndian.Uint64(p)
	ts := int64(binary.LittleEndian.Uint64(p[8:]))
	now := r.clk.Now()
	r.mu.Lock()
	if seq <= r.last {
		r.mu.Unlock()
		return // a catch-up overlapping the live stream: not delivered twice
	}
	if seq != r.last+1 {
		r.outOfOrder++
	}
	r.last = seq
	if viaTCP {
		r.tcp++
	} else {
		r.udp++
		r.lat.Record(now - ts)
	}
	r.mu.Unlock()
	if r.delivered.Add(1) == r.total {
		r.doneOnce.Do(func() { close(r.done) })
	}
}

// Run performs one fan-out run. It needs root (namespaces, BPF) and
// removes everything it created before returning.
func Run(ctx context.Context, c Config) (Result, error) {
	if err := c.Validate(); err != nil {
		return Result{}, err
	}
	res := Result{Config: c}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()

	env, err := NewEnv(c.Receivers, c.Loss)
	if err != nil {
		return res, err
	}
	defer env.Close()
	r := &run{cfg: c, env: env, clk: env.Clock}
	defer r.close()
	if err := r.setup(); err != nil {
		return res, err
	}
	start := time.Now()
	if err := r.start(ctx); err != nil {
		return res, err
	}
	err = r.wait(ctx)
	res.Elapsed = time.Since(start)
	r.stop()
	r.collect(&res)
	res.Load = env.Load()
	return res, err
}

type run struct {
	cfg  Config
	env  *Env
	clk  Clock
	port uint16

	senders []*sender
	rcv     []*receiver

	walDir string
	srv    *replay.Server
	srvLn  net.Listener
	srvErr chan error

	samples []sample
	killAt  atomic.Int64 // clock when the receiver was killed
	killDel atomic.Int64 // records it had delivered then

	killErr chan error
	kill    context.CancelFunc
	killWG  sync.WaitGroup
}

// sample is the producer's progress at one moment (kill runs).
type sample struct {
	at       int64
	produced int64
}

type sender struct {
	tap      *senderTap
	loop     *cast.Loop
	w        *wal.Writer
	sent     int
	produced atomic.Int64 // sent, readable from other goroutines
	ended    bool         // Loop.End called
	lostAt   atomic.Int64 // clock when the first ReceiverLost event came (0: none)
	err      atomic.Value // error that stopped production
}

func (r *run) openPath(h netns.Host, local netip.AddrPort, mc datapath.Multicast) (datapath.Path, error) {
	var p datapath.Path
	err := h.Do(func() error {
		switch r.cfg.Path {
		case "udp":
			c := udp.DefaultConfig()
			c.Local, c.Multicast = local, mc
			u, err := udp.New(c)
			p = u
			return err
		default:
			c := mmsg.DefaultConfig()
			c.Local, c.Multicast = local, mc
			m, err := mmsg.New(c)
			p = m
			return err
		}
	})
	return p, err
}

func (r *run) setup() error {
	c := r.cfg
	any := netip.AddrPortFrom(netip.IPv4Unspecified(), c.Group.Port())
	if c.WAL {
		dir, err := os.MkdirTemp("", "walcast-mc-fanout-")
		if err != nil {
			return err
		}
		r.walDir = dir
	}
	// Senders first: the multicast sender's bound port is the group's.
	if c.Mode == Multicast {
		control := datapath.ControlGroup(c.Group)
		if !control.IsValid() {
			return fmt.Errorf("fanout: group %v has no control group next to it", c.Group)
		}
		p, err := r.openPath(r.env.Sender(), any, datapath.Multicast{Iface: r.env.Sender().Link, Groups: []netip.Addr{control.Addr()}, TTL: 1})
		if err != nil {
			return fmt.Errorf("fanout: sender: %w", err)
		}
		r.port = p.LocalAddr().Port()
		s, err := r.newSender(p, netip.AddrPortFrom(c.Group.Addr(), r.port), "")
		if err != nil {
			p.Close()
			return err
		}
		r.senders = append(r.senders, s)
	}
	for i := range c.Receivers {
		h := r.env.Receiver(i)
		rv := &receiver{i: i, host: h, lat: latency.NewSamples(c.Records), clk: r.clk, total: uint64(c.Records), done: make(chan struct{})}
		r.rcv = append(r.rcv, rv)
		var p datapath.Path
		var err error
		var nakTo netip.AddrPort
		if c.Mode == Multicast {
			control := datapath.ControlGroup(netip.AddrPortFrom(c.Group.Addr(), r.port))
			p, err = r.openPath(h, netip.AddrPortFrom(netip.IPv4Unspecified(), r.port),
				datapath.Multicast{Iface: h.Link, Groups: []netip.Addr{c.Group.Addr(), control.Addr()}, TTL: 1})
			nakTo = control
		} else {
			p, err = r.openPath(h, netip.AddrPortFrom(h.Addr, 0), datapath.Multicast{})
			if err == nil {
				var sp datapath.Path
				sp, err = r.openPath(r.env.Sender(), netip.AddrPortFrom(r.env.Sender().Addr, 0), datapath.Multicast{})
				if err == nil {
					nakTo = sp.LocalAddr()
					var s *sender
					if s, err = r.newSender(sp, p.LocalAddr(), strconv.Itoa(i)); err != nil {
						sp.Close()
					} else {
						r.senders = append(r.senders, s)
					}
				}
			}
		}
		if err != nil {
			if p != nil {
				p.Close()
			}
			return fmt.Errorf("fanout: receiver %d: %w", i, err)
		}
		rv.port = p.LocalAddr().Port()
		if err := r.env.Impair(i, rv.port); err != nil {
			p.Close()
			return err
		}
		if err := r.startReceiver(rv, p, nakTo); err != nil {
			return err
		}
	}
	if c.Kill >= 0 {
		srv, err := replay.NewServer(replay.ServerConfig{Plaintext: true, HandshakeTimeout: 5 * time.Second, WriteTimeout: 10 * time.Second,
			BufferBytes: 256 << 10, KeepaliveInterval: time.Second}, replay.NewWriterSource(r.senders[0].w, r.walDir, 0))
		if err != nil {
			return err
		}
		// The replay server listens in this process's own namespace, on
		// loopback: Go dials from whatever thread runs the goroutine, and
		// those threads stay in the root namespace (only netns.Host.Do
		// enters another one). The catch-up is TCP either way.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		r.srv, r.srvLn, r.srvErr = srv, ln, make(chan error, 1)
		go func() { r.srvErr <- srv.Serve(ln) }()
	}
	return nil
}

// receiverTuning is every receiver's tuning, with id its Status id.
func (r *run) receiverTuning(id uint64) cast.ReceiverTuning {
	t := cast.ReceiverTuning{ID: id, NakDebounce: 5 * time.Millisecond, ReorderSlots: 32768, MaxFrame: r.maxFrame()}
	if r.cfg.NakDebounce > 0 {
		t.NakDebounce = r.cfg.NakDebounce
	}
	if r.cfg.ReorderSlots > 0 {
		t.ReorderSlots = r.cfg.ReorderSlots
	}
	// A loop starved for 100 ms and more on a loaded 2-vCPU machine must
	// not turn a repairable gap into a fault.
	t.MaxNakRetries = 400
	silence := 10 * time.Second
	if r.cfg.Silence > 0 {
		silence = r.cfg.Silence
	}
	t.SilenceIntervals = int(max(silence/protocol.DefaultHeartbeatInterval, 1))
	return t
}

// receiverConfig is a hand-built receiver's config: NAKs to nakTo.
func (r *run) receiverConfig(nakTo netip.AddrPort, id uint64) protocol.ReceiverConfig {
	rc := r.receiverTuning(id).Config()
	rc.Sender = nakTo
	return rc
}

// maxFrame is the run's only frame size: small slots make deep rings cheap.
func (r *run) maxFrame() int { return max(wire.HeaderSize+r.cfg.Payload, 128) }

func (r *run) startReceiver(rv *receiver, p datapath.Path, nakTo netip.AddrPort) error {
	rcv, err := protocol.NewReceiver(r.receiverConfig(nakTo, ReceiverID(rv.i)))
	if err != nil {
		p.Close()
		return err
	}
	// The stream starts at seq 1: without this the Receiver would start
	// at the first record it hears, and a lost seq 1 would never be asked
	// for.
	rcv.ResetAfterReplay(0)
	rv.tap = newReceiverTap(p, r.cfg.Records)
	lc := cast.DefaultLoopConfig()
	lc.Path, lc.Receiver = rv.tap, rcv
	lc.RaiseGOMAXPROCS = true
	lc.Idle.Strategy = affinity.Park
	lc.OnRecord = func(_ *cast.Loop, _ wire.Header, payload []byte) { rv.deliver(payload, false) }
	lc.OnEvent = func(e cast.Event) {
		switch e.Kind {
		case cast.EventEnded:
			rv.ended.Store(true)
		case cast.EventFaulted, cast.EventReconnect, cast.EventSenderRestarted, cast.EventError:
			rv.mu.Lock()
			rv.outcome = e.Kind.String()
			if e.Outcome.Kind != protocol.Live {
				rv.outcome += ": " + e.Outcome.Err().Error()
			}
			rv.mu.Unlock()
		}
	}
	l, err := cast.NewLoop(lc)
	if err != nil {
		p.Close()
		return err
	}
	rv.loop = l
	return nil
}

func (r *run) newSender(p datapath.Path, dest netip.AddrPort, walSub string) (*sender, error) {
	s := &sender{tap: &senderTap{Path: p}}
	var log protocol.Log
	var cold cast.ColdReader
	if r.cfg.WAL {
		wc := wal.DefaultConfig(r.walDir + "/" + walSub)
		w, err := wal.Open(wc)
		if err != nil {
			return nil, err
		}
		s.w, log, cold = w, w, w
	}
	sc := protocol.DefaultSenderConfig()
	sc.Dest = dest
	sc.MaxFrame = r.maxFrame()
	sc.RingSlots = 65536 // every record of the reorder window stays hot
	sc.AcceptAnyNakSource = r.cfg.Mode == Multicast
	sc.MaxReceivers = max(sc.MaxReceivers, r.cfg.Receivers)
	sc.FlowPolicy, sc.Tagged = r.cfg.Policy, r.cfg.Tagged
	sc.ReceiverTimeout = 10 * time.Second
	if r.cfg.ReceiverTimeout > 0 {
		sc.ReceiverTimeout = r.cfg.ReceiverTimeout
	}
	snd, err := protocol.NewSender(sc, log)
	if err != nil {
		return nil, err
	}
	lc := cast.DefaultLoopConfig()
	lc.Path, lc.Sender, lc.Cold = s.tap, snd, cold
	lc.RaiseGOMAXPROCS = true
	lc.Idle.Strategy = affinity.Park
	payload := make([]byte, r.cfg.Payload)
	// A token bucket, not a schedule: after a stall (a closed window, a
	// descheduled loop) the sender resumes at the rate instead of racing
	// to catch up, which would time the burst, not the protocol.
	bucket := pace.New(float64(r.cfg.Rate))
	total := r.cfg.Records
	lc.OnEvent = func(e cast.Event) {
		if e.Kind == cast.EventReceiverLost {
			s.lostAt.CompareAndSwap(0, r.clk.Now())
		}
	}
	lc.OnPoll = func(l *cast.Loop, _ int64) {
		if s.sent >= total && !s.ended {
			s.ended = true
			_ = l.End() // receivers that negotiated hear where the stream ends
		}
		if s.sent >= total || s.err.Load() != nil {
			return
		}
		now := r.clk.Now()
		for s.sent < total && bucket.Ready(now) {
			binary.LittleEndian.PutUint64(payload[8:], uint64(r.clk.Now()))
			_, err := l.Send(dataType, payload)
			if err != nil {
				if errors.Is(err, protocol.ErrBatchFull) || errors.Is(err, wal.ErrBackpressure) {
					return // the path or the WAL is behind: next iteration
				}
				s.err.Store(err)
				return
			}
			bucket.Spend()
			s.sent++
			s.produced.Store(int64(s.sent))
		}
	}
	l, err := cast.NewLoop(lc)
	if err != nil {
		return nil, err
	}
	s.loop = l
	return s, nil
}

func (r *run) start(ctx context.Context) error {
	for _, rv := range r.rcv {
		if err := rv.loop.Start(); err != nil {
			return err
		}
	}
	for _, s := range r.senders {
		if err := s.loop.Start(); err != nil {
			return err
		}
	}
	if r.cfg.Kill >= 0 {
		kctx, cancel := context.WithCancel(ctx)
		r.kill = cancel
		r.killErr = make(chan error, 1)
		r.killWG.Add(1)
		go func() {
			defer r.killWG.Done()
			r.killErr <- r.killAndRestart(kctx, r.rcv[r.cfg.Kill])
		}()
	}
	return nil
}

// killAndRestart closes receiver rv's loop and socket once it has
// delivered KillAt records, waits Down, and brings it back as a
// cast.Consumer: a TCP catch-up from its tip, then the live group.
func (r *run) killAndRestart(ctx context.Context, rv *receiver) error {
	tick := time.NewTicker(200 * time.Microsecond)
	defer tick.Stop()
	for rv.delivered.Load() < uint64(r.cfg.KillAt) {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
	// A kill, not a leave: nothing more goes out (Loop.Close would send a
	// closing Status, and the sender would drop the receiver at once).
	rv.tap.dead.Store(true)
	r.killDel.Store(int64(rv.delivered.Load()))
	r.killAt.Store(r.clk.Now())
	if err := rv.loop.Close(); err != nil && !errors.Is(err, datapath.ErrClosed) {
		return fmt.Errorf("fanout: kill receiver %d: %w", rv.i, err)
	}
	rv.mu.Lock()
	rv.killed = true
	tip := rv.last
	rv.oldTaps = append(rv.oldTaps, rv.tap)
	rv.mu.Unlock()
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(r.cfg.Down):
	}
	control := datapath.ControlGroup(netip.AddrPortFrom(r.cfg.Group.Addr(), r.port))
	p, err := r.openPath(rv.host, netip.AddrPortFrom(netip.IPv4Unspecified(), r.port),
		datapath.Multicast{Iface: rv.host.Link, Groups: []netip.Addr{r.cfg.Group.Addr(), control.Addr()}, TTL: 1})
	if err != nil {
		return fmt.Errorf("fanout: restart receiver %d: %w", rv.i, err)
	}
	rv.mu.Lock()
	rv.tap = newReceiverTap(p, r.cfg.Records)
	tap := rv.tap
	rv.mu.Unlock()
	cc := cast.ConsumerConfig{
		Path: tap, Replay: []string{r.srvLn.Addr().String()}, Plaintext: true,
		Idle:     affinity.Idler{Strategy: affinity.Backoff, Spins: 1, Yields: 1, MinSleep: 20 * time.Microsecond, MaxSleep: 20 * time.Microsecond},
		Advanced: cast.ConsumerAdvanced{Receiver: r.receiverTuning(ReceiverID(rv.i) + 0x100), Control: control, StartTip: tip, RaiseGOMAXPROCS: true},
	}
	cons, err := cast.NewConsumer(cc)
	if err != nil {
		p.Close()
		return err
	}
	defer p.Close()
	err = cons.Run(ctx, func(rec cast.Record) error {
		payload := rec.Payload
		st := cons.Stats()
		// Records of the bootstrap come over TCP until the first catch-up
		// completes; the rest from UDP (a later escalation counts as TCP
		// too: the Consumer reports which path delivered each record
		// through its counters, read here before and after).
		rv.deliver(payload, st.CatchUps == 0)
		if rv.delivered.Load() >= rv.total {
			return errStop
		}
		return nil
	})
	if errors.Is(err, errStop) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

var errStop = errors.New("fanout: done")

// wait returns when every receiver has delivered every record; it fails
// when a loop stopped on an error, a receiver raised a sticky outcome
// (not the killed one, whose restart handles it), nothing was delivered
// anywhere for Stall, or ctx ended.
func (r *run) wait(ctx context.Context) error {
	stall := r.cfg.Stall
	if stall == 0 {
		stall = 20 * time.Second
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var last uint64
	lastMove := time.Now()
	var doneAt time.Time
	for {
		done, ended, total := true, true, uint64(0)
		for _, rv := range r.rcv {
			d := rv.delivered.Load()
			total += d
			done = done && d >= rv.total
			ended = ended && (rv.ended.Load() || rv.i == r.cfg.Kill)
			rv.mu.Lock()
			o, killed := rv.outcome, rv.killed
			rv.mu.Unlock()
			if o != "" && !killed && !(r.cfg.Kill == rv.i) {
				return fmt.Errorf("fanout: receiver %d stopped after %d of %d records: %s", rv.i, d, r.cfg.Records, o)
			}
		}
		// Every record delivered is not yet the end: the end marker may
		// still be on its way or in repair (it is lost like any datagram),
		// and Result.Ended reports it. Wait for it as long as a stall.
		if done && doneAt.IsZero() {
			doneAt = time.Now()
		}
		if done && (ended || time.Since(doneAt) > stall) {
			return nil
		}
		if len(r.senders) > 0 {
			r.samples = append(r.samples, sample{at: r.clk.Now(), produced: r.senders[0].produced.Load()})
		}
		for _, s := range r.senders {
			if e, _ := s.err.Load().(error); e != nil {
				return fmt.Errorf("fanout: producer: %w", e)
			}
		}
		if total != last {
			last, lastMove = total, time.Now()
		} else if time.Since(lastMove) > stall {
			return fmt.Errorf("fanout: no record delivered for %v: %s", stall, r.progress())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("fanout: %w: %s", ctx.Err(), r.progress())
		case err := <-r.killErr:
			if err != nil {
				return err
			}
			r.killErr = nil
		case <-tick.C:
		}
	}
}

// progress says where every receiver stands.
func (r *run) progress() string {
	s := ""
	for _, rv := range r.rcv {
		rv.mu.Lock()
		o := rv.outcome
		rv.mu.Unlock()
		if o == "" {
			o = "live"
		}
		s += fmt.Sprintf("receiver %d %d/%d (%s); ", rv.i, rv.delivered.Load(), r.cfg.Records, o)
	}
	for i, sd := range r.senders {
		s += fmt.Sprintf("sender %d sent %d; ", i, sd.produced.Load())
	}
	return s
}

func (r *run) stop() {
	if r.kill != nil {
		r.kill()
		r.killWG.Wait()
	}
	for _, rv := range r.rcv {
		if rv.loop != nil {
			rv.loop.Close()
		}
	}
	for _, s := range r.senders {
		if s.loop != nil {
			s.loop.Close()
		}
	}
}

func (r *run) close() {
	r.stop()
	if r.srv != nil {
		r.srv.Close()
	}
	for _, s := range r.senders {
		if s.w != nil {
			s.w.Close()
		}
	}
	if r.walDir != "" {
		os.RemoveAll(r.walDir)
	}
}

func (r *run) collect(res *Result) {
	var events LostEvents
	for _, s := range r.senders {
		st := s.loop.SenderStats()
		if len(r.senders) == 1 {
			res.SenderStats = st
			st = protocol.SenderStats{} // not counted twice below
		}
		res.SenderStats.Naks += st.Naks
		res.SenderStats.RetxHot += st.RetxHot
		res.SenderStats.RetxCold += st.RetxCold
		res.SenderStats.RetxDedup += st.RetxDedup
		res.SenderStats.BadSource += st.BadSource
		res.SenderStats.Ignored += st.Ignored
		res.SenderStats.Heartbeats += st.Heartbeats
		res.SenderStats.ColdRejected += st.ColdRejected
		res.SenderDatagrams += s.tap.datagrams.Load()
		res.SenderData += s.tap.data.Load()
		res.Repairs += s.tap.repairs.Load()
	}
	for _, rv := range r.rcv {
		rv.mu.Lock()
		rr := ReceiverResult{Delivered: rv.delivered.Load(), OutOfOrder: rv.outOfOrder, UDP: rv.udp, TCP: rv.tcp, Killed: rv.killed, Ended: rv.ended.Load()}
		if rv.last < uint64(r.cfg.Records) {
			rr.Missing = uint64(r.cfg.Records) - rr.Delivered
		}
		rr.Latency = rv.lat.Summarize()
		if rv.loop != nil {
			rr.Stats = rv.loop.ReceiverStats()
		}
		rr.Outcome = rv.outcome
		taps := append(append([]*receiverTap(nil), rv.oldTaps...), rv.tap)
		rv.mu.Unlock()
		for _, t := range taps {
			rr.Repairs += t.Repairs()
			rr.Duplicates += t.Duplicates()
			rr.NakFrames += t.nakFrames.Load()
			rr.NakSeqs += t.nakSeqs.Load()
			rr.Status += t.status.Load()
		}
		if !rv.killed {
			// A killed receiver's gap is caught up over TCP, not lost on
			// the wire: only the others' losses make events.
			rr.Lost = events.Add(rv.tap.Tracker)
		}
		rr.Dropped = r.env.Dropped(rv.i)
		res.NakFrames += rr.NakFrames
		res.Receivers = append(res.Receivers, rr)
	}
	res.LostEvents = events.Count()
	if k := r.killAt.Load(); k != 0 && len(r.senders) > 0 {
		if lost := r.senders[0].lostAt.Load(); lost != 0 {
			res.LostAfter = time.Duration(lost - k)
			res.HeldRate = rateBetween(r.samples, k, lost)
			res.ProducedAtLost = producedBy(r.samples, lost)
		}
		if len(r.samples) > 0 {
			res.PreRate = rateBetween(r.samples, r.samples[0].at, k)
		}
		res.Stall, res.ResumeRate = stallAfter(r.samples, k, r.cfg.Rate)
		res.KilledDelivered = uint64(r.killDel.Load())
	}
	if res.Elapsed > 0 {
		res.Throughput = float64(r.cfg.Records) / res.Elapsed.Seconds()
	}
}

// stallAfter finds, in the producer's progress after kill, the longest
// stretch during which it produced less than a tenth of the offered rate
// (the sender held back by flow control), and the rate over the 500 ms
// after that stretch ended (records/s; above the offered rate while the
// producer catches up on its schedule).
func stallAfter(ss []sample, kill int64, rate int) (time.Duration, float64) {
	var stall time.Duration
	var end int
	for i := 0; i < len(ss); i++ {
		if ss[i].at < kill {
			continue
		}
		j := i
		for j+1 < len(ss) && float64(ss[j+1].produced-ss[i].produced) < 0.1*float64(rate)*float64(ss[j+1].at-ss[i].at)/1e9 {
			j++
		}
		if d := time.Duration(ss[j].at - ss[i].at); d > stall {
			stall, end = d, j
		}
		i = j
	}
	if stall == 0 {
		return 0, 0
	}
	k := end
	for k+1 < len(ss) && ss[k].at-ss[end].at < int64(500*time.Millisecond) {
		k++
	}
	if k == end {
		return stall, 0
	}
	return stall, float64(ss[k].produced-ss[end].produced) / (float64(ss[k].at-ss[end].at) / 1e9)
}

// rateBetween is the producer's rate (records/s) between the last sample
// at or before from and the first at or after to (0 without two samples).
func rateBetween(ss []sample, from, to int64) float64 {
	i, j := -1, -1
	for k, x := range ss {
		if x.at <= from {
			i = k
		}
		if x.at >= to && j < 0 {
			j = k
		}
	}
	if i < 0 || j <= i {
		return 0
	}
	return float64(ss[j].produced-ss[i].produced) / (float64(ss[j].at-ss[i].at) / 1e9)
}

// producedBy is the producer's count at the last sample at or before t.
func producedBy(ss []sample, t int64) int64 {
	n := int64(0)
	for _, x := range ss {
		if x.at > t {
			break
		}
		n = x.produced
	}
	return n
}
