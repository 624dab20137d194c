package cast

import (
	"reflect"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/counters"
)

// This file publishes a Loop's counters to the process's counters file
// (package counters). The loop body calls three hooks: beat at the top of
// each iteration (the loop thread's own timing and the receiver's loss
// episodes: a few loads and adds), publishCounters where it snapshots its
// stats (every tick: one atomic store per slot) and closeCounters in
// Close; emit passes events to noteEvent for the error log.

var loopIDs atomic.Uint32

// maxRows is how many receivers of the Sender's flow-control table get
// slots (Loop.Receivers reports as many).
const maxRows = 16

// loopCounters is owned by the loop thread (and by Close once it has
// stopped); only the samplers it registers run elsewhere, each on slots
// of its own.
type loopCounters struct {
	f      *counters.File
	err    error // why there is no file (f nil)
	owned  []counters.Counter
	stops  []func()
	stream uint32
	epoch  int64             // Unix ns at loop clock 0
	roles  map[string]string // role → the labels of this loop's stream slots

	// beat: time between iteration starts.
	spin                     bool  // a parking loop's iterations include the wait: no stall or max
	thresh                   int64 // ns
	last                     int64
	idleSeen                 uint64
	busy, idle, maxIt, stall uint64
	cBusy, cIdle, cMax       counters.Counter
	cStall, cThresh          counters.Counter

	loop, snd, rcv statSet

	// Producer levels.
	lastSeq, edge, limited, nrcv, sSRTT counters.Counter
	rows                                [maxRows]rcvRow
	// Consumer levels.
	delivered, highest, rSRTT, outcome, silent counters.Counter

	cl, pl lossWatch
}

type rcvRow struct {
	id, delivered, highest, edge, window, state, srtt, silence, throttles counters.Counter
}

// lossWatch is one side's loss report: the open episode and the
// aggregates per way it ended (Aeron's LossReport: observations, first
// and last time).
type lossWatch struct {
	open              bool
	ref               counters.LossRef
	e                 counters.Loss
	naks0, a0, b0     uint64 // consumer: NaksSent, Skips; producer: Naks, RetxHot, RetxCold at open
	quiet             int    // producer: ticks without a new NAK
	episodes, seqs    [counters.RepairNone + 1]counters.Counter
	repairNs          [counters.RepairNone + 1]counters.Counter
	maxNs, first, lst counters.Counter
	max               uint64
	firstSet          bool
}

// newLoopCounters takes the loop's slots (nil: counters off).
func newLoopCounters(l *Loop) *loopCounters {
	cfg := l.cfg.Counters
	if cfg.Off {
		return nil
	}
	f, err := counters.Acquire(counters.Config{Dir: cfg.Dir})
	if err != nil {
		return &loopCounters{err: err}
	}
	c := &loopCounters{f: f, err: f.Err(), stream: cfg.Stream, epoch: l.epoch.UnixNano(), spin: !l.idle.Parks(),
		thresh: int64(cfg.StallThreshold)}
	if c.thresh <= 0 {
		c.thresh = int64(time.Millisecond)
	}
	st := u32s(cfg.Stream)
	role := "consumer"
	switch {
	case l.snd != nil && l.rcv != nil:
		role = "producer_consumer"
	case l.snd != nil:
		role = "producer"
	}
	id := strconv.FormatUint(uint64(loopIDs.Add(1)), 10)
	ll := labels("stream", st, "role", role, "loop", id)
	o := &c.owned
	c.roles = map[string]string{}
	claim := func(role string) string {
		lab, release := claimLabels(cfg.Stream, role, id)
		c.roles[role] = lab
		c.stops = append(c.stops, release)
		return lab
	}
	c.loop = newStatSet(f, reflect.TypeFor[LoopStats](), "loop_", ll, statNames{}, o)
	c.cBusy = slot(f, counters.KindCounterNs, "loop_busy_ns"+ll, o)
	c.cIdle = slot(f, counters.KindCounterNs, "loop_idle_ns"+ll, o)
	c.cMax = slot(f, counters.KindGaugeNs, "loop_max_iteration_ns"+ll, o)
	c.cStall = slot(f, counters.KindCounter, "loop_stalls"+ll, o)
	c.cThresh = slot(f, counters.KindGaugeNs, "loop_stall_threshold_ns"+ll, o)
	c.cThresh.Store(uint64(c.thresh))
	if l.snd != nil {
		pl := claim("producer")
		c.snd = newStatSet(f, reflect.TypeFor[protocol.SenderStats](), "", pl, senderNames, o)
		c.lastSeq = slot(f, counters.KindGauge, "last_seq"+pl, o)
		c.edge = slot(f, counters.KindGauge, "window_edge"+pl, o)
		c.limited = slot(f, counters.KindGauge, "window_limited"+pl, o)
		c.nrcv = slot(f, counters.KindGauge, "receivers"+pl, o)
		c.sSRTT = slot(f, counters.KindGaugeNs, "srtt_ns"+pl, o)
		for i := range c.rows {
			rl := pl[:len(pl)-1] + `,slot="` + strconv.Itoa(i) + `"}`
			r := &c.rows[i]
			r.id = slot(f, counters.KindGauge, "receiver_id"+rl, o)
			r.delivered = slot(f, counters.KindGauge, "receiver_delivered_seq"+rl, o)
			r.highest = slot(f, counters.KindGauge, "receiver_highest_seq"+rl, o)
			r.edge = slot(f, counters.KindGauge, "receiver_edge"+rl, o)
			r.window = slot(f, counters.KindGauge, "receiver_window"+rl, o)
			r.state = slot(f, counters.KindGauge, "receiver_state"+rl, o)
			r.srtt = slot(f, counters.KindGaugeNs, "receiver_srtt_ns"+rl, o)
			r.silence = slot(f, counters.KindGaugeNs, "receiver_silence_ns"+rl, o)
			r.throttles = slot(f, counters.KindGauge, "receiver_throttles"+rl, o)
		}
		c.pl.init(f, pl, []counters.Repair{counters.RepairRing, counters.RepairWAL, counters.RepairRingWAL,
			counters.RepairNone, counters.RepairClosed}, o)
	}
	if l.rcv != nil {
		cl := claim("consumer")
		c.rcv = newStatSet(f, reflect.TypeFor[protocol.ReceiverStats](), "", cl, receiverNames, o)
		c.delivered = slot(f, counters.KindGauge, "delivered_seq"+cl, o)
		c.highest = slot(f, counters.KindGauge, "highest_seq"+cl, o)
		c.rSRTT = slot(f, counters.KindGaugeNs, "srtt_ns"+cl, o)
		c.outcome = slot(f, counters.KindGauge, "outcome"+cl, o)
		c.silent = slot(f, counters.KindGauge, "peer_silent"+cl, o)
		c.cl.init(f, cl, []counters.Repair{counters.RepairUDP, counters.RepairReorder, counters.RepairEscalated,
			counters.RepairSkip, counters.RepairClosed}, o)
	}
	return c
}

func (w *lossWatch) init(f *counters.File, sl string, repairs []counters.Repair, o *[]counters.Counter) {
	for _, r := range repairs {
		rl := sl[:len(sl)-1] + `,repair="` + r.String() + `"}`
		w.episodes[r] = slot(f, counters.KindCounter, "loss_episodes"+rl, o)
		w.seqs[r] = slot(f, counters.KindCounter, "loss_seqs"+rl, o)
		w.repairNs[r] = slot(f, counters.KindCounterNs, "loss_repair_ns"+rl, o)
	}
	w.maxNs = slot(f, counters.KindGaugeNs, "loss_repair_max_ns"+sl, o)
	w.first = slot(f, counters.KindGaugeNs, "loss_first_unix_ns"+sl, o)
	w.lst = slot(f, counters.KindGaugeNs, "loss_last_unix_ns"+sl, o)
}

// close ends the open episode as r and adds it to the aggregates.
func (w *lossWatch) close(f *counters.File, r counters.Repair, done int64) {
	w.open = false
	w.e.Repair, w.e.Done = r, done
	switch {
	case w.ref != 0:
		f.CloseLoss(w.ref, w.e)
	case r != counters.RepairReorder:
		f.OpenLoss(w.e)
	}
	ns := uint64(max(done-w.e.At, 0))
	w.episodes[r].Store(w.episodes[r].Load() + 1)
	w.seqs[r].Store(w.seqs[r].Load() + w.e.Count)
	w.repairNs[r].Store(w.repairNs[r].Load() + ns)
	if ns > w.max {
		w.max = ns
		w.maxNs.Store(ns)
	}
	w.lst.Store(uint64(done))
}

// start opens an episode; the ring shows it at once when ring is set,
// else only when it closes (see watchConsumerLoss).
func (w *lossWatch) start(f *counters.File, e counters.Loss, ring bool) {
	w.open, w.e, w.quiet, w.ref = true, e, 0, 0
	if ring {
		w.ref = f.OpenLoss(e)
	}
	if !w.firstSet {
		w.firstSet = true
		w.first.Store(uint64(e.At))
	}
}

// beat runs at the top of every iteration, after the clock read.
func (l *Loop) beat() {
	if c := l.ctr; c != nil && c.f != nil {
		c.beat(l)
	}
}

func (c *loopCounters) beat(l *Loop) {
	now := l.now
	if c.last != 0 {
		d := now - c.last
		if l.ls.IdlePolls != c.idleSeen {
			c.idleSeen = l.ls.IdlePolls
			c.idle += uint64(d)
		} else {
			c.busy += uint64(d)
		}
		if c.spin {
			if uint64(d) > c.maxIt {
				c.maxIt = uint64(d)
			}
			if d > c.thresh {
				c.stall++
			}
		}
	}
	c.last = now
	if r := l.rcv; r != nil && (c.cl.open || r.HighestSeen() >= r.ExpectedSeq()) {
		c.watchConsumerLoss(l, r)
	}
}

// watchConsumerLoss opens an episode when the receiver has a gap (a seq
// above the next expected one was seen) and closes it when none is open.
func (c *loopCounters) watchConsumerLoss(l *Loop, r *protocol.Receiver) {
	w := &c.cl
	exp := r.ExpectedSeq()
	kind := r.Outcome().Kind
	if !w.open {
		if kind != protocol.Live {
			return
		}
		st := r.Stats()
		w.naks0, w.a0 = st.NaksSent, st.Skips
		// Into the ring only when it closes, and only if it was NAKed: a
		// heartbeat announcing seqs still in the socket buffer opens an
		// "episode" too, counted apart as without_nak.
		w.start(c.f, counters.Loss{Stream: c.stream, Role: counters.RoleConsumer, First: exp, At: c.epoch + l.now}, false)
		return
	}
	if kind == protocol.Live && r.HighestSeen() >= exp {
		return
	}
	st := r.Stats()
	w.e.Naks = st.NaksSent - w.naks0
	if exp > w.e.First {
		w.e.Count = exp - w.e.First
	}
	rep := counters.RepairUDP
	switch {
	case kind != protocol.Live:
		rep = counters.RepairEscalated
	case st.Skips != w.a0:
		rep = counters.RepairSkip
	case w.e.Naks == 0:
		rep = counters.RepairReorder
	}
	w.close(c.f, rep, c.epoch+l.now)
}

// watchProducerLoss runs every tick: an episode opens with the first NAK
// and closes once a tick passed without a new one and nothing is left to
// retransmit; it was repaired from the ring, the WAL or both.
func (c *loopCounters) watchProducerLoss(l *Loop, st *protocol.SenderStats) {
	w := &c.pl
	if !w.open {
		if st.Naks > w.naks0 {
			w.a0, w.b0 = st.RetxHot, st.RetxCold
			w.start(c.f, counters.Loss{Stream: c.stream, Role: counters.RoleProducer, At: c.epoch + l.now}, true)
			w.e.Naks = st.Naks - w.naks0
			w.naks0 = st.Naks
		}
		return
	}
	if st.Naks > w.naks0 {
		w.e.Naks += st.Naks - w.naks0
		w.naks0 = st.Naks
		w.quiet = 0
		return
	}
	if w.quiet++; w.quiet < 2 || l.snd.RetxPending() || l.snd.ColdPending() || l.cold.pendOn {
		return
	}
	hot, cold := st.RetxHot-w.a0, st.RetxCold-w.b0
	w.e.Count = hot + cold
	rep := counters.RepairNone
	switch {
	case hot > 0 && cold > 0:
		rep = counters.RepairRingWAL
	case hot > 0:
		rep = counters.RepairRing
	case cold > 0:
		rep = counters.RepairWAL
	}
	w.close(c.f, rep, c.epoch+l.now)
}

// publishCounters copies the stats into the slots (loop thread, every
// tick; and Close).
func (l *Loop) publishCounters() {
	c := l.ctr
	if c == nil || c.f == nil {
		return
	}
	c.loop.publish(unsafe.Pointer(&l.ls))
	c.cBusy.Store(c.busy)
	c.cIdle.Store(c.idle)
	c.cMax.Store(c.maxIt)
	c.cStall.Store(c.stall)
	if s := l.snd; s != nil {
		c.snd.publish(unsafe.Pointer(&l.snap.sender))
		c.lastSeq.Store(s.NextSeq() - 1)
		edge, lim := s.Limit()
		c.edge.Store(edge)
		c.limited.Store(b2u(lim))
		c.nrcv.Store(uint64(l.snap.n))
		c.sSRTT.Store(uint64(max(s.RTT().SRTT(), 0)))
		for i := range c.rows {
			r := &c.rows[i]
			if i >= l.snap.n {
				r.id.Store(0)
				continue
			}
			in := &l.snap.receivers[i]
			r.id.Store(in.ID)
			r.delivered.Store(in.Delivered)
			r.highest.Store(in.Highest)
			r.edge.Store(in.Edge)
			r.window.Store(uint64(in.Window))
			r.state.Store(uint64(in.State))
			r.srtt.Store(uint64(max(in.SRTT, 0)))
			r.silence.Store(uint64(max(l.now-in.LastHeard, 0)))
			r.throttles.Store(b2u(in.Throttles))
		}
		c.watchProducerLoss(l, &l.snap.sender)
	}
	if r := l.rcv; r != nil {
		c.rcv.publish(unsafe.Pointer(&l.snap.receiver))
		c.delivered.Store(r.ExpectedSeq() - 1)
		c.highest.Store(r.HighestSeen())
		c.rSRTT.Store(uint64(max(r.RTT().SRTT(), 0)))
		c.outcome.Store(uint64(r.Outcome().Kind))
		c.silent.Store(b2u(r.PeerSilent()))
	}
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// closeCounters ends open loss episodes, stops the samplers, frees the
// slots and releases the file (Close, after the loop thread stopped).
func (l *Loop) closeCounters() {
	c := l.ctr
	if c == nil || c.f == nil {
		return
	}
	done := c.epoch + l.clock()
	if c.cl.open {
		c.cl.close(c.f, counters.RepairClosed, done)
	}
	if c.pl.open {
		c.pl.close(c.f, counters.RepairClosed, done)
	}
	for _, stop := range c.stops {
		stop()
	}
	for _, s := range c.owned {
		c.f.Free(s)
	}
	c.f.Release()
	c.f = nil
}

// CountersPath is the counters file this loop publishes to ("" when off)
// and, when none could be made, why (the counters then live in process
// memory only, or not at all).
func (l *Loop) CountersPath() (string, error) {
	if l.ctr == nil {
		return "", nil
	}
	return l.ctr.f.Path(), l.ctr.err
}

// noteEvent counts the events that are errors in the file's error log.
func (l *Loop) noteEvent(e *Event) {
	c := l.ctr
	if c == nil || c.f == nil {
		return
	}
	var msg string
	role := counters.RoleConsumer
	switch e.Kind {
	case EventError:
		msg, role = "loop stopped on a datapath error: "+e.Err.Error(), counters.RoleNone
	case EventLogError:
		msg, role = "WAL cannot make records durable: "+e.Err.Error(), counters.RoleProducer
	case EventFaulted:
		msg = "receiver faulted: a gap could not be repaired (retry budget spent)"
		if e.Outcome.Cause == protocol.Silence {
			msg = "receiver faulted: silence with a gap open"
		}
	case EventReconnect:
		msg = "receiver must reconnect: a record lay beyond the reorder window"
	case EventSenderRestarted:
		msg = "sender restarted: its seqs went back"
	case EventSkip:
		if e.Skip.LostTo == 0 {
			return
		}
		msg = "skip: seqs already delivered were never durable at the sender"
	case EventReceiverLost:
		msg, role = "receiver lost: silent for ReceiverTimeout", counters.RoleProducer
	case EventReceiverFaulted:
		msg, role = "receiver reported "+e.Receiver.State.String(), counters.RoleProducer
	case EventReceiverStalled:
		msg, role = "receiver stalled: it held the sender without progress and was released", counters.RoleProducer
	default:
		return
	}
	c.f.Error(c.stream, role, msg, c.epoch+e.At)
}

// sampleStats publishes what get returns, every counters.SampleInterval
// on the file's sampler goroutine, until the loop closes: for stats
// whose owners read them safely from any goroutine (the WAL writer, the
// replay server and client, a Consumer's own counters).
func sampleStats[T any](l *Loop, prefix, role string, n statNames, get func() T) {
	c := l.ctr
	if c == nil || c.f == nil {
		return
	}
	lab, ok := c.roles[role]
	if !ok {
		return
	}
	set := newStatSet(c.f, reflect.TypeFor[T](), prefix, lab, n, &c.owned)
	c.stops = append(c.stops, c.f.OnSample(func() {
		v := get()
		set.publish(unsafe.Pointer(&v))
	}))
}

var senderNames = statNames{
	rename: map[string]string{
		"Sent": "records_sent", "Naks": "naks_received", "Heartbeats": "heartbeats_sent", "Probes": "probes_sent",
		"TailProbes": "tail_probes_sent", "RTTProbes": "rtt_probes_sent", "Ignored": "frames_ignored",
		"BadSource": "naks_bad_source", "Statuses": "status_received",
	},
}

var receiverNames = statNames{
	rename: map[string]string{
		"Delivered": "records_delivered", "Heartbeats": "heartbeats_received", "Probes": "probes_received",
		"Ignored": "frames_ignored", "StatusSent": "status_sent",
	},
	gauges: map[string]bool{"MaxRetries": true},
}
