package cast

import (
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/counters"
)

// lossWatch is one side's loss report: the open episode and the
// aggregates per way it ended (Aeron's LossReport: observations, first
// and last time).
//
// An episode's NAKs and retransmits are counted from baselines taken
// before the iteration (consumer) or tick (producer) that began it: the
// first NAK of a gap goes out in the very iteration that finds the gap,
// and the producer answers it before its next tick, so a baseline taken
// when the episode is first noticed would leave them out (and file a
// gap repaired by one NAK as without_nak, its repair as none).
type lossWatch struct {
	open           bool
	ref            counters.LossRef
	e              counters.Loss
	naks0          uint64 // consumer: NaksSent before the gap; producer: Naks at the last tick
	a0, b0         uint64 // consumer: Skips at open; producer: RetxHot, RetxCold before the episode
	quiet          int    // producer: ticks without a new NAK
	episodes, seqs [counters.RepairNone + 1]counters.Counter
	repairNs       [counters.RepairNone + 1]counters.Counter
	maxNs, first   counters.Counter
	lst            counters.Counter
	max            uint64
	firstSet       bool
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

// watchConsumerLoss runs at the top of every iteration (beat): an
// episode opens when the receiver has a gap (a seq above the next
// expected one was seen, in the last iteration: at) and closes when none
// is open. Outside an episode it keeps the NAK baseline.
func (c *loopCounters) watchConsumerLoss(l *Loop, r *protocol.Receiver, at int64) {
	w := &c.cl
	exp := r.ExpectedSeq()
	live := r.Outcome().Kind == protocol.Live
	gap := live && r.HighestSeen() >= exp
	if !w.open {
		if !gap {
			w.naks0 = r.NaksSent()
			return
		}
		w.a0 = r.Stats().Skips
		// Into the ring only when it closes, and only if it was NAKed: a
		// gap filled before its first NAK (reordering, a heartbeat that
		// announced seqs still in the socket buffer) is counted apart as
		// without_nak.
		w.start(c.f, counters.Loss{Stream: c.stream, Role: counters.RoleConsumer, First: exp, At: c.epoch + at}, false)
		return
	}
	if gap {
		return
	}
	naks := r.NaksSent()
	w.e.Naks = naks - w.naks0
	w.naks0 = naks
	if exp > w.e.First {
		w.e.Count = exp - w.e.First
	}
	rep := counters.RepairUDP
	switch {
	case !live:
		rep = counters.RepairEscalated
	case r.Stats().Skips != w.a0:
		rep = counters.RepairSkip
	case w.e.Naks == 0:
		rep = counters.RepairReorder
	}
	w.close(c.f, rep, c.epoch+l.now)
}

// watchProducerLoss runs every tick: an episode opens with the first NAK
// and closes once a tick passed without a new one and nothing is left to
// retransmit; it was repaired from the ring, the WAL or both. Its first
// seq is the first one the first NAK of the episode asked for (the
// Sender keeps it from one tick to the next: FirstNaked). Outside an
// episode it keeps the retransmit baselines.
func (c *loopCounters) watchProducerLoss(l *Loop, st *protocol.SenderStats) {
	w := &c.pl
	first := l.snd.FirstNaked() // the NAKs since the last tick's
	if !w.open {
		if st.Naks == w.naks0 {
			w.a0, w.b0 = st.RetxHot, st.RetxCold
			return
		}
		w.start(c.f, counters.Loss{Stream: c.stream, Role: counters.RoleProducer, First: first, At: c.epoch + l.now}, true)
		w.e.Naks = st.Naks - w.naks0
		w.naks0 = st.Naks
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
	w.a0, w.b0 = st.RetxHot, st.RetxCold
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
