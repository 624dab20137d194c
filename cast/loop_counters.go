package cast

import (
	"reflect"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/counters"
)

// This file publishes a Loop's counters to the process's counters file
// (package counters). The loop body calls four hooks: beat at the top of
// each iteration (the loop thread's own timing and the receiver's loss
// episodes: a few loads and adds), woke when a park returns, idling
// before an idle step, and publishCounters where it snapshots its stats
// (every tick: one atomic store per slot); Close calls closeCounters.
// emit passes events to noteEvent for the error log and the faults by
// cause.

var loopIDs atomic.Uint32

// maxRows is how many receivers of the Sender's flow-control table get
// slots (Loop.Receivers reports as many).
const maxRows = 16

// loopCounters is owned by the loop thread (and by Close once it has
// stopped); only the samplers it registers run elsewhere, each on slots
// of its own.
type loopCounters struct {
	f       *counters.File
	err     error // why there is no file (f nil, or memory only)
	owned   []counters.Counter
	stops   []func()
	finals  []func() // the samplers, run once more at Close
	unclaim []func() // gives this loop's stream labels back (not when kept)
	stream  uint32
	epoch   int64             // Unix ns at loop clock 0
	roles   map[string]string // role → the labels of this loop's stream slots
	keep    bool              // Counters.Keep: Close leaves the slots

	// The previous iteration, for beat: when it began, when its park
	// returned (0: it did not park), when its idle step began (0: none
	// that may block), and whether it found no work (and only ticked).
	last, wokeAt, idleAt int64
	noWork, ticked       bool
	idleBlocks           bool  // the idle step may yield or sleep: idling reads the clock
	thresh               int64 // ns
	busy, idle           uint64
	maxIt, stall         uint64
	cBusy, cIdle, cMax   counters.Counter
	cStall, cThresh, cHB counters.Counter

	loop, snd, rcv statSet
	auth           statSet // a keyed loop's AuthStats (empty without keys)

	// Producer levels.
	lastSeq, edge, limited, nrcv, sSRTT counters.Counter
	rowLab                              string // the producer's labels, for the rows
	rows                                [maxRows]rcvRow
	drops                               [nDropCauses]cause
	// Consumer levels.
	delivered, highest, rSRTT, outcome, silent counters.Counter
	faults                                     [nFaultCauses]cause

	cl, pl lossWatch
}

// rcvRow is the slots of one receiver of the flow-control table,
// labelled with its id (none while the row is unused).
type rcvRow struct {
	id                                            uint64 // 0: unused
	seen                                          bool   // in the table at this tick
	delivered, highest, edge, window, state, srtt counters.Counter
	silence, throttles                            counters.Counter
}

// cause is one counter of faults (or dropped receivers) by cause.
type cause struct {
	n uint64
	c counters.Counter
}

func (x *cause) add() { x.n++; x.c.Store(x.n) }

// The consumer's faults by cause, and the producer's receivers dropped
// from flow control by cause.
const (
	faultRetryBudget = iota
	faultSilence
	faultOverrun
	faultSenderRestarted
	nFaultCauses
)

const (
	dropLost = iota
	dropFaulted
	dropStalled
	nDropCauses
)

var (
	faultNames = [nFaultCauses]string{"retry_budget", "silence", "overrun", "sender_restarted"}
	dropNames  = [nDropCauses]string{"lost", "faulted", "stalled"}
)

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
	c := &loopCounters{f: f, err: f.Err(), stream: cfg.Stream, epoch: l.epoch.UnixNano(), thresh: int64(cfg.StallThreshold), keep: cfg.Keep,
		idleBlocks: l.idle.Strategy == affinity.SpinYield || l.idle.Strategy == affinity.Backoff || l.io != nil}
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
		c.unclaim = append(c.unclaim, release)
		return lab
	}
	c.loop = newStatSet(f, reflect.TypeFor[LoopStats](), "loop_", ll, statNames{}, o)
	c.cBusy = slot(f, counters.KindCounterNs, "loop_busy_ns"+ll, o)
	c.cIdle = slot(f, counters.KindCounterNs, "loop_idle_ns"+ll, o)
	c.cMax = slot(f, counters.KindGaugeNs, "loop_max_iteration_ns"+ll, o)
	c.cStall = slot(f, counters.KindCounter, "loop_stalls"+ll, o)
	c.cThresh = slot(f, counters.KindGaugeNs, "loop_stall_threshold_ns"+ll, o)
	c.cThresh.Store(uint64(c.thresh))
	c.cHB = slot(f, counters.KindHeartbeat, "loop_heartbeat_unix_ns"+ll, o)
	c.cHB.Store(uint64(time.Now().UnixNano()))
	if l.snd != nil {
		pl := claim("producer")
		c.snd = newStatSet(f, reflect.TypeFor[protocol.SenderStats](), "", pl, senderNames, o)
		c.lastSeq = slot(f, counters.KindGauge, "last_seq"+pl, o)
		c.edge = slot(f, counters.KindGauge, "window_edge"+pl, o)
		c.limited = slot(f, counters.KindGauge, "window_limited"+pl, o)
		c.nrcv = slot(f, counters.KindGauge, "receivers"+pl, o)
		c.sSRTT = slot(f, counters.KindGaugeNs, "srtt_ns"+pl, o)
		c.rowLab = pl
		for i := range c.drops {
			c.drops[i].c = slot(f, counters.KindCounter, "receivers_dropped"+with(pl, "cause", dropNames[i]), o)
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
		for i := range c.faults {
			c.faults[i].c = slot(f, counters.KindCounter, "faults_by_cause"+with(cl, "cause", faultNames[i]), o)
		}
		c.cl.init(f, cl, []counters.Repair{counters.RepairUDP, counters.RepairReorder, counters.RepairEscalated,
			counters.RepairSkip, counters.RepairClosed}, o)
	}
	if l.auth != nil {
		// The loop's role: one stream role's labels, or with both the
		// loop's own (role="producer_consumer").
		lab := ll
		switch {
		case l.snd != nil && l.rcv == nil:
			lab = c.roles["producer"]
		case l.rcv != nil && l.snd == nil:
			lab = c.roles["consumer"]
		}
		c.auth = newAuthSet(f, lab, o)
	}
	return c
}

// authReasons are the AuthStats fields of refused datagrams and their
// reason label on auth_refused; authSlots adds the other two.
var authReasons = [...]struct {
	reason string
	off    uintptr
}{
	{"short", unsafe.Offsetof(AuthStats{}.Short)},
	{"version", unsafe.Offsetof(AuthStats{}.Version)},
	{"key_id", unsafe.Offsetof(AuthStats{}.KeyID)},
	{"tag", unsafe.Offsetof(AuthStats{}.Tag)},
	{"replay", unsafe.Offsetof(AuthStats{}.Replay)},
}

// newAuthSet gives every AuthStats field a slot: auth_sealed,
// auth_opened and auth_refused{reason=…} (a family with a reason label,
// as Prometheus wants one measure split by a dimension).
func newAuthSet(f *counters.File, lab string, owned *[]counters.Counter) statSet {
	var s statSet
	add := func(off uintptr, label string) {
		s.fields = append(s.fields, statField{off: off, size: 8, c: slot(f, counters.KindCounter, label, owned)})
	}
	add(unsafe.Offsetof(AuthStats{}.Sealed), "auth_sealed"+lab)
	add(unsafe.Offsetof(AuthStats{}.Opened), "auth_opened"+lab)
	for _, r := range authReasons {
		add(r.off, "auth_refused"+with(lab, "reason", r.reason))
	}
	return s
}

// with is the labels lab ({…}) with k="v" added.
func with(lab, k, v string) string { return lab[:len(lab)-1] + "," + k + `="` + v + `"}` }

// beat runs at the top of every iteration, after the clock read.
func (l *Loop) beat() {
	if c := l.ctr; c != nil && c.f != nil {
		c.beat(l)
	}
}

// woke notes that the iteration's park returned (l.now is its end).
func (l *Loop) woke() {
	if c := l.ctr; c != nil {
		c.wokeAt = l.now
	}
}

// idling notes that the iteration found no work (it ticked, or not),
// and reads the clock before an idle step that may yield or sleep.
func (l *Loop) idling(ticked bool) {
	if c := l.ctr; c != nil && c.f != nil {
		c.noWork, c.ticked = true, ticked
		if c.idleBlocks || l.backpressured {
			c.idleAt = l.clock()
		}
	}
}

// beat accounts the iteration that just ended: its work part runs from
// its start (or the end of its park) to this beat (or the start of its
// idle step). The work part is what counts toward the maximum and the
// stalls, whatever the idle strategy; it is busy time when the iteration
// found work or ticked, and the rest (parks, idle steps, empty polls) is
// idle time.
func (c *loopCounters) beat(l *Loop) {
	now := l.now
	from := max(c.last, c.wokeAt)
	if c.last != 0 {
		end := now
		if c.idleAt > from {
			end = c.idleAt
		}
		work, total := uint64(max(end-from, 0)), uint64(max(now-c.last, 0))
		if c.noWork && !c.ticked {
			c.idle += total
		} else {
			c.busy += work
			c.idle += total - work
		}
		if work > c.maxIt {
			c.maxIt = work
		}
		if int64(work) > c.thresh {
			c.stall++
		}
	}
	c.last, c.wokeAt, c.idleAt, c.noWork, c.ticked = now, 0, 0, false, false
	if r := l.rcv; r != nil {
		c.watchConsumerLoss(l, r, from)
	}
}

// publishCounters copies the stats into the slots and stamps the loop's
// heartbeat (loop thread, every tick; and Close).
func (l *Loop) publishCounters() {
	c := l.ctr
	if c == nil || c.f == nil {
		return
	}
	c.cHB.Store(uint64(c.epoch + l.now))
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
		c.publishRows(l)
		c.watchProducerLoss(l, &l.snap.sender)
	}
	if a := l.auth; a != nil {
		c.auth.publish(unsafe.Pointer(&a.stats))
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

// publishRows gives each receiver of the flow-control table a row of
// slots labelled receiver="id" and frees the rows of receivers gone. A
// row is taken or freed only when a receiver joins or leaves (that
// allocates its labels); a tick with the same receivers allocates
// nothing.
func (c *loopCounters) publishRows(l *Loop) {
	for i := range c.rows {
		c.rows[i].seen = false
	}
	n := min(l.snap.n, maxRows)
	for i := 0; i < n; i++ {
		in := &l.snap.receivers[i]
		r := c.row(in.ID)
		if r == nil {
			continue
		}
		r.seen = true
		r.delivered.Store(in.Delivered)
		r.highest.Store(in.Highest)
		r.edge.Store(in.Edge)
		r.window.Store(uint64(in.Window))
		r.state.Store(uint64(in.State))
		r.srtt.Store(uint64(max(in.SRTT, 0)))
		r.silence.Store(uint64(max(l.now-in.LastHeard, 0)))
		r.throttles.Store(b2u(in.Throttles))
	}
	for i := range c.rows {
		if r := &c.rows[i]; r.id != 0 && !r.seen {
			c.freeRow(r)
		}
	}
}

// row is the row of receiver id, taken from the free ones if it has
// none (nil: every row is taken).
func (c *loopCounters) row(id uint64) *rcvRow {
	var free *rcvRow
	for i := range c.rows {
		r := &c.rows[i]
		if r.id == id && id != 0 {
			return r
		}
		if r.id == 0 && free == nil {
			free = r
		}
	}
	if free == nil {
		return nil
	}
	f, lab := c.f, with(c.rowLab, "receiver", strconv.FormatUint(id, 10))
	take := func(kind counters.Kind, name string) counters.Counter {
		s, err := f.Counter(kind, name+lab)
		if err != nil {
			return counters.Counter{}
		}
		return s
	}
	*free = rcvRow{id: id,
		delivered: take(counters.KindGauge, "receiver_delivered_seq"),
		highest:   take(counters.KindGauge, "receiver_highest_seq"),
		edge:      take(counters.KindGauge, "receiver_edge"),
		window:    take(counters.KindGauge, "receiver_window"),
		state:     take(counters.KindGauge, "receiver_state"),
		srtt:      take(counters.KindGaugeNs, "receiver_srtt_ns"),
		silence:   take(counters.KindGaugeNs, "receiver_silence_ns"),
		throttles: take(counters.KindGauge, "receiver_throttles")}
	return free
}

func (c *loopCounters) freeRow(r *rcvRow) {
	for _, s := range [...]counters.Counter{r.delivered, r.highest, r.edge, r.window, r.state, r.srtt, r.silence, r.throttles} {
		c.f.Free(s)
	}
	*r = rcvRow{}
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// closeCounters ends open loss episodes, runs the samplers a last time
// and stops them, frees the slots (unless kept) and releases the file
// (Close, after the loop thread stopped).
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
	for _, fn := range c.finals {
		fn()
	}
	for _, stop := range c.stops {
		stop()
	}
	if !c.keep {
		for _, fn := range c.unclaim {
			fn()
		}
		for i := range c.rows {
			if c.rows[i].id != 0 {
				c.freeRow(&c.rows[i])
			}
		}
		for _, s := range c.owned {
			c.f.Free(s)
		}
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

// noteEvent counts the events that are errors in the file's error log,
// and the faults by cause.
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
		cause := faultRetryBudget
		if e.Outcome.Cause == protocol.Silence {
			msg, cause = "receiver faulted: silence with a gap open", faultSilence
		}
		c.faults[cause].add()
	case EventReconnect:
		msg = "receiver must reconnect: a record lay beyond the reorder window"
		c.faults[faultOverrun].add()
	case EventSenderRestarted:
		msg = "sender restarted: its seqs went back"
		c.faults[faultSenderRestarted].add()
	case EventSkip:
		if e.Skip.LostTo == 0 {
			return
		}
		msg = "skip: seqs already delivered were never durable at the sender"
	case EventReceiverLost:
		msg, role = "receiver lost: silent for ReceiverTimeout", counters.RoleProducer
		c.drops[dropLost].add()
	case EventReceiverFaulted:
		msg, role = "receiver reported "+e.Receiver.State.String(), counters.RoleProducer
		c.drops[dropFaulted].add()
	case EventReceiverStalled:
		msg, role = "receiver stalled: it held the sender without progress and was released", counters.RoleProducer
		c.drops[dropStalled].add()
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
	fn := func() {
		v := get()
		set.publish(unsafe.Pointer(&v))
	}
	c.finals = append(c.finals, fn)
	c.stops = append(c.stops, c.f.OnSample(fn))
}

var senderNames = statNames{
	rename: map[string]string{
		"Sent": "records_sent", "Naks": "naks_received", "Heartbeats": "heartbeats_sent", "Probes": "probes_sent",
		"TailProbes": "tail_probes_sent", "RTTProbes": "rtt_probes_sent", "Ignored": "frames_ignored",
		"BadSource": "naks_bad_source", "Statuses": "status_received",
	},
	gauges: map[string]bool{"InitialReleased": true},
}

var receiverNames = statNames{
	rename: map[string]string{
		"Delivered": "records_delivered", "Heartbeats": "heartbeats_received", "Probes": "probes_received",
		"Ignored": "frames_ignored", "StatusSent": "status_sent",
	},
	gauges: map[string]bool{"MaxRetries": true},
}
