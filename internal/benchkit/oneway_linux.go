package benchkit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/cast"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/datapath/drop"
	"github.com/walcast/walcast/wal"
	"github.com/walcast/walcast/wire"
)

// OneWayPaced sends c.Warmup+c.N records at c.Rate from inside the
// sender's loop and times each from just before its Send to its delivery
// inside the receiver's loop. The receiver loses lossPct percent of the
// datagrams it gets (datapath/drop, seeded): data, retransmits and
// heartbeats alike. Records the pacer could not send on time are sent as
// soon as it can, stamped when they are sent (Note counts them).
func OneWayPaced(c OneWayConfig, lossPct float64) (Row, error) {
	if lossPct < 0 || lossPct >= 100 {
		return Row{}, fmt.Errorf("benchkit: oneway loss %v%% outside 0..100", lossPct)
	}
	return oneWay(c, LossRandom, lossPct)
}

// OneWayBursts sends c.Bursts bursts of c.Burst records back to back,
// each once the previous one is delivered and c.Pause has passed, and
// times one record per burst: the last (LossTail), whose first
// transmission the receiver loses, or the middle one (LossGap), likewise
// lost once, or the middle one with nothing lost (LossNone). A lost tail
// is found only by the sender's tail-loss probe; a single gap by the
// record after it. A single gap's repair cost is its LossGap latency less
// the LossNone latency of the same record: the middle record of a burst
// flushed in one sendmmsg waits for the datagrams before it even without
// loss.
func OneWayBursts(c OneWayConfig, m LossMode) (Row, error) {
	if m != LossTail && m != LossGap && m != LossNone {
		return Row{}, fmt.Errorf("benchkit: oneway bursts need LossTail, LossGap or LossNone, not %v", m)
	}
	return oneWay(c, m, 0)
}

func oneWay(c OneWayConfig, mode LossMode, lossPct float64) (Row, error) {
	if err := c.Validate(); err != nil {
		return Row{}, err
	}
	var a, b datapath.Path
	var err error
	if c.Path == "mmsg" {
		a, b, err = ConnectedMmsg(false, false, c.Batch)
	} else {
		a, b, err = ConnectedUDP()
	}
	if err != nil {
		return Row{}, err
	}
	var rp datapath.Path
	var randDrop *drop.Path
	var seqDrop *seqDropper
	switch mode {
	case LossRandom:
		randDrop = drop.New(b, drop.Config{RecvPct: lossPct, Seed: c.Seed}, c.Batch, protocol.DefaultMaxFrame)
		rp = randDrop
	case LossTail:
		seqDrop = &seqDropper{Path: b, every: uint64(c.Burst), at: 0}
		rp = seqDrop
	default: // LossGap, LossNone: the same wrapper, so both rows do the same receive work
		seqDrop = &seqDropper{Path: b, every: uint64(c.Burst), at: uint64(c.Burst / 2), none: mode == LossNone}
		rp = seqDrop
	}

	// One clock for both threads: ns since base (monotonic).
	base := time.Now()
	stamp := func() int64 { return int64(time.Since(base)) }

	total, measured := c.Warmup+c.N, c.N
	if mode != LossRandom {
		total, measured = c.Burst*c.Bursts, c.Bursts
	}
	s := NewSamples(measured)
	var delivered atomic.Uint64 // highest seq delivered
	var outcome atomic.Value    // the receiver's sticky outcome, if any
	var lastAt int64            // stamp of the last delivery (receiver thread)
	// The longest time each loop thread went without an iteration (it
	// was not run): what the machine, not the protocol, adds.
	var rcvPoll, rcvStall, sndPoll, sndStall int64

	// The consumer, inside the receiver's loop.
	rcfg, err := loopConfig(rp, affinity.OnCPU(c.CPUs[1]), affinity.Spin, false, true)
	if err != nil {
		a.Close()
		rp.Close()
		return Row{}, err
	}
	rcfg.Batch = c.Batch
	rcfg.OnRecord = func(l *cast.Loop, h wire.Header, p []byte) {
		if len(p) < 16 {
			return
		}
		now := stamp()
		seq := wire.Seq(p)
		switch mode {
		case LossRandom:
			if seq > uint64(c.Warmup) {
				s.Record(now - int64(binary.LittleEndian.Uint64(p[8:])))
			}
		default:
			if seq%uint64(c.Burst) == seqDrop.at {
				s.Record(now - int64(binary.LittleEndian.Uint64(p[8:])))
			}
		}
		lastAt = now
		delivered.Store(seq)
	}
	rcfg.OnPoll = func(*cast.Loop, int64) {
		t := stamp()
		if rcvPoll != 0 {
			rcvStall = max(rcvStall, t-rcvPoll)
		}
		rcvPoll = t
	}
	rcfg.OnEvent = func(e cast.Event) {
		switch e.Kind {
		case cast.EventFaulted, cast.EventReconnect, cast.EventSenderRestarted:
			outcome.Store(e.Kind.String())
		}
	}
	rl, err := cast.NewLoop(rcfg)
	if err != nil {
		a.Close()
		rp.Close()
		return Row{}, err
	}
	if err := rl.Start(); err != nil {
		a.Close()
		rp.Close()
		return Row{}, err
	}

	// The producer, inside the sender's loop.
	payload := make([]byte, c.Size)
	period := int64(time.Second) / int64(c.Rate)
	var k int         // records sent
	var t0 int64 = -1 // paced: when record 0 was due
	var readyAt int64 // bursts: when the next burst may start (0: not yet known)
	var late int      // paced: records sent more than 100 µs after they were due
	var maxLag int64  // paced: the most a record was sent after it was due
	var held int      // Sends refused (window, batch, WAL): retried on a later iteration
	var sendErr error // a Send error that is not a retry (read after the loop stopped)
	var sendFailed atomic.Bool
	send := func(l *cast.Loop, t int64) bool {
		binary.LittleEndian.PutUint64(payload[8:], uint64(t))
		if _, err := l.Send(1, payload); err != nil {
			if errors.Is(err, protocol.ErrBatchFull) || errors.Is(err, wal.ErrBackpressure) {
				held++ // protocol.ErrBackpressure matches wal.ErrBackpressure too
				return false
			}
			sendErr = err
			k = total
			sendFailed.Store(true)
			return false
		}
		k++
		return true
	}
	scfg, err := loopConfig(a, affinity.OnCPU(c.CPUs[0]), affinity.Spin, true, false)
	if err != nil {
		rl.Close()
		a.Close()
		return Row{}, err
	}
	scfg.Batch = c.Batch
	snd := scfg.Sender
	srtts := NewSamples(c.Bursts)
	inBurst := 0 // bursts: 1 once the burst's first record is due
	scfg.OnPoll = func(l *cast.Loop, _ int64) {
		if t := stamp(); sndPoll != 0 {
			sndStall = max(sndStall, t-sndPoll)
			sndPoll = t
		} else {
			sndPoll = t
		}
		if k >= total {
			return
		}
		if mode == LossRandom {
			t := stamp()
			if t0 < 0 {
				t0 = t
			}
			for i := 0; i < c.Batch && k < total; i++ {
				due := t0 + int64(k)*period
				if t < due {
					return
				}
				if !send(l, t) {
					return
				}
				if t-due > 100_000 {
					late++
				}
				maxLag = max(maxLag, t-due)
				t = stamp()
			}
			return
		}
		if k%c.Burst == 0 { // between bursts
			if delivered.Load() < uint64(k) {
				return
			}
			t := stamp()
			if readyAt == 0 {
				readyAt = t + int64(c.Pause)
			}
			if t < readyAt {
				return
			}
			if inBurst == 0 {
				srtts.Record(snd.RTT().SRTT()) // the tail-loss probe waits 2·srtt
			}
			inBurst = 1
		}
		for {
			if !send(l, stamp()) {
				return
			}
			if k%c.Burst == 0 || k >= total {
				readyAt, inBurst = 0, 0
				return
			}
		}
	}
	sl, err := cast.NewLoop(scfg)
	if err != nil {
		rl.Close()
		a.Close()
		return Row{}, err
	}
	start := time.Now()
	if err := sl.Start(); err != nil {
		rl.Close()
		a.Close()
		return Row{}, err
	}

	// Wait for every record, a receiver outcome, a loop error or Stall
	// without a delivery.
	last, lastChange := delivered.Load(), time.Now()
	var failure error
	for delivered.Load() < uint64(total) {
		time.Sleep(5 * time.Millisecond)
		if d := delivered.Load(); d != last {
			last, lastChange = d, time.Now()
		}
		if o, ok := outcome.Load().(string); ok {
			failure = fmt.Errorf("receiver %s after delivering %d of %d records", o, delivered.Load(), total)
			break
		}
		if sendFailed.Load() {
			break
		}
		select {
		case <-sl.Done():
			failure = fmt.Errorf("sender loop stopped: %v", sl.Err())
		case <-rl.Done():
			failure = fmt.Errorf("receiver loop stopped: %v", rl.Err())
		default:
		}
		if failure != nil {
			break
		}
		if time.Since(lastChange) > c.Stall {
			failure = fmt.Errorf("nothing delivered for %v: %d of %d records delivered", c.Stall, delivered.Load(), total)
			break
		}
	}
	serr := sl.Close()
	rerr := rl.Close()
	if sendErr != nil {
		return Row{}, fmt.Errorf("benchkit: oneway send: %w", sendErr)
	}
	if failure != nil {
		return Row{}, fmt.Errorf("benchkit: oneway %v: %w", mode, failure)
	}
	if err := errors.Join(serr, rerr); err != nil {
		return Row{}, err
	}
	el := time.Duration(lastAt) - start.Sub(base)
	ss, rs := sl.SenderStats(), rl.ReceiverStats()
	row := Row{Workload: "oneway", Name: "casting-" + c.Path, Path: c.Path, Latency: s.Summarize(), Records: int64(total), Seconds: el.Seconds()}
	if el > 0 {
		row.RecPerS = float64(total) / el.Seconds()
	}
	var dropped uint64
	if randDrop != nil {
		row.Mode = fmt.Sprintf("loss %g%%", lossPct)
		dropped, _ = randDrop.Dropped()
	} else {
		row.Mode = mode.String()
		dropped = seqDrop.dropped
	}
	row.Note = fmt.Sprintf("delivered=%d dropped=%d naks=%d retx=%d tail_probes=%d status_sent=%d status_heard=%d held=%d (window %d, initial %d)",
		delivered.Load(), dropped, rs.NaksSent, ss.RetxHot+ss.RetxCold, ss.TailProbes, rs.StatusSent, ss.Statuses, held, ss.Backpressured, ss.InitialHeld)
	var renaks uint64
	for _, n := range rs.NakRounds[2:] {
		renaks += n
	}
	row.Note += fmt.Sprintf(" renaks=%d renak_delay_at_end=%v", renaks, time.Duration(rcfg.Receiver.NakDelay()).Round(time.Microsecond))
	row.Note += fmt.Sprintf(" longest_unrun: sender %v receiver %v", time.Duration(sndStall).Round(time.Microsecond),
		time.Duration(rcvStall).Round(time.Microsecond))
	if mode != LossRandom {
		sr := srtts.Summarize()
		row.Note += fmt.Sprintf(" sender_srtt_at_burst: p50 %v max %v", time.Duration(sr.P50).Round(time.Microsecond),
			time.Duration(sr.Max).Round(time.Microsecond))
	}
	if mode == LossRandom {
		row.Note += fmt.Sprintf(" sent_late_100us=%d max_lag=%v", late, time.Duration(maxLag).Round(time.Microsecond))
	}
	return row, nil
}

// seqDropper loses the first transmission of every data record whose
// seq % every == at (retransmits of it carry a seq it has already
// dropped and pass), on receive; with none set it loses nothing.
type seqDropper struct {
	datapath.Path
	every, at uint64
	none      bool   // lose nothing (the burst-lossless baseline)
	last      uint64 // highest seq dropped
	dropped   uint64 // read after the loop stopped
}

func (p *seqDropper) Recv(v *batch.Vec) (int, error) {
	n, err := p.Path.Recv(v)
	k := 0
	for i := 0; i < n; i++ {
		m, a := v.Msg(i)
		if p.lose(m) {
			p.dropped++
			continue
		}
		if k != i {
			c := copy(v.Buf(k), m)
			v.Set(k, c, a)
		}
		k++
	}
	v.SetLen(k)
	return k, err
}

func (p *seqDropper) lose(m []byte) bool {
	if len(m) < wire.HeaderSize+8 || binary.LittleEndian.Uint16(m[2:]) != 1 {
		return false
	}
	seq := binary.LittleEndian.Uint64(m[wire.HeaderSize:])
	if p.none || seq%p.every != p.at || seq <= p.last {
		return false
	}
	p.last = seq
	return true
}
