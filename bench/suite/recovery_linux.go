package suite

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/bench/harness"
	"github.com/walcast/walcast/bench/report"
	"github.com/walcast/walcast/cast"
	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/internal/benchkit"
	"github.com/walcast/walcast/wire"
)

// gapPath loses the first arrival of the first record of every burst
// (seq ≡ 1 mod burst) at the receiver and notes, per burst, when the gap
// became detectable: the arrival of the first later record of the burst.
type gapPath struct {
	datapath.Path
	burst  uint64
	detect []int64 // ns since base, per burst; 0 = not yet
	lost   []bool  // the burst's first record was dropped once
	base   time.Time
}

func (g *gapPath) Recv(v *batch.Vec) (int, error) {
	n, err := g.Path.Recv(v)
	if n == 0 {
		return n, err
	}
	k := 0
	for i := 0; i < n; i++ {
		m, a := v.Msg(i)
		if h, perr := wire.ParseHeader(m); perr == nil && h.Type == 1 && len(m) >= wire.HeaderSize+8 {
			seq := wire.Seq(m[wire.HeaderSize:])
			b := int((seq - 1) / g.burst)
			if b < len(g.lost) {
				if (seq-1)%g.burst == 0 && !g.lost[b] {
					g.lost[b] = true
					continue // lost on the wire
				}
				if (seq-1)%g.burst != 0 && g.detect[b] == 0 {
					g.detect[b] = int64(time.Since(g.base))
				}
			}
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

// runLossRecovery injects one gap per burst and times detect → deliver:
// the gap is detectable when the next record of the burst arrives and
// repaired when the lost record is delivered. "hot" serves the NAK from
// the send ring (4096 slots); "cold" shrinks the ring to 16 slots so the
// 63 records sent behind the lost one evict it and the NAK must be served
// from the WAL (its unflushed buffer or disk, on the WAL's I/O
// goroutine). Sender and receiver are cast.Loops on datapath/udp pinned
// to cores A and B; bursts of 64 records every 5 ms (12 800 rec/s).
func runLossRecovery(o Options, r *report.Report) {
	trials := 200
	if o.Quick {
		trials = 20
	}
	for _, mode := range []string{"hot", "cold"} {
		res, err := recovery(o, mode, trials)
		if err != nil {
			unavailable(r, "loss-recovery "+mode, err.Error())
			continue
		}
		o.logf("loss-recovery %-4s n %d p50 %.1f µs p99 %.1f µs\n", mode, res.Latency.N, float64(res.Latency.P50)/1e3, float64(res.Latency.P99)/1e3)
		r.Results = append(r.Results, res)
	}
}

// burstEvery spaces the bursts of the loss-recovery workload.
const burstEvery = 5 * time.Millisecond

func recovery(o Options, mode string, trials int) (harness.Result, error) {
	const burst = 64
	res := harness.Result{Row: benchkit.Row{Workload: "loss-recovery", Name: "casting-udp-" + mode, Path: "udp", Mode: "spin"}, Size: 144, Pinned: true}
	pa, pb, err := castPaths("udp")
	if err != nil {
		return res, err
	}
	base := time.Now()
	gp := &gapPath{Path: pb, burst: burst, detect: make([]int64, trials), lost: make([]bool, trials), base: base}
	dir, err := os.MkdirTemp(o.Dir, "recovery-wal-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	delivered := make([]int64, trials)
	var lastSeq atomic.Uint64
	var events []string
	cons, err := cast.NewConsumer(cast.ConsumerConfig{Path: gp, NoCatchUp: true, Thread: affinity.OnCPU(o.Harness.ServerCPU), Advanced: cast.ConsumerAdvanced{RaiseGOMAXPROCS: true},
		OnEvent: func(e cast.Event) { events = append(events, fmt.Sprintf("%v %v", e.Kind, e.Outcome.Kind)) }})
	if err != nil {
		pa.Close()
		pb.Close()
		return res, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- cons.Run(ctx, func(r cast.Record) error {
			if (r.Seq-1)%burst == 0 {
				if b := int((r.Seq - 1) / burst); b < trials {
					delivered[b] = int64(time.Since(base))
				}
			}
			lastSeq.Store(r.Seq)
			return nil
		})
	}()
	payload := make([]byte, 128)
	sent := 0
	var next int64
	pc := cast.ProducerConfig{Path: pa, Dir: dir, Thread: affinity.OnCPU(o.Harness.ClientCPU), Advanced: cast.ProducerAdvanced{RaiseGOMAXPROCS: true}}
	if mode == "cold" {
		pc.Advanced.Sender.RingSlots = 16
	}
	pc.Advanced.OnPoll = func(l *cast.Loop, now int64) {
		if sent >= trials*burst || now < next {
			return
		}
		for sent%burst != 0 || now >= next {
			binary.LittleEndian.PutUint64(payload[8:], uint64(sent))
			if _, err := l.Send(1, payload); err != nil {
				return // batch full: the rest of the burst next poll
			}
			sent++
			if sent%burst == 0 {
				next = now + int64(burstEvery)
				return
			}
		}
	}
	pr, err := cast.NewProducer(pc)
	if err != nil {
		cancel()
		<-done
		return res, err
	}
	deadline := time.Now().Add(time.Duration(trials)*burstEvery + 10*time.Second)
	serr, runErr := stopPair(pr, cancel, done, deadline, 5*time.Millisecond,
		func() bool { return lastSeq.Load() < uint64(trials*burst) })
	if serr != nil || runErr != nil {
		return res, fmt.Errorf("producer / consumer: %v / %v", serr, runErr)
	}
	h := harness.NewHist()
	for b := range trials {
		if gp.lost[b] && gp.detect[b] > 0 && delivered[b] >= gp.detect[b] {
			h.Record(delivered[b] - gp.detect[b])
		}
	}
	st := pr.Stats().Sender
	rs := cons.Stats().Receiver
	res.Latency, res.Curve = h.Summary(), h.Curve()
	res.Records, res.Sent, res.Delivered = int64(res.Latency.N), int64(trials), int64(res.Latency.N)
	res.DeliveredPct = 100 * float64(res.Latency.N) / float64(trials)
	res.Note = fmt.Sprintf("gap detectable (next record arrives) → lost record delivered; %d gaps, retx hot %d cold %d, NAKs %d, last seq %d of %d",
		trials, st.RetxHot, st.RetxCold, rs.NaksSent, lastSeq.Load(), trials*burst)
	if len(events) > 0 {
		res.Note += fmt.Sprintf("; receiver events %v", events[:min(len(events), 4)])
	}
	if res.Latency.N == 0 {
		return res, fmt.Errorf("no gap was repaired (%s)", res.Note)
	}
	return res, nil
}
