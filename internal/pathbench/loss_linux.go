package pathbench

import (
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/walcast/walcast/bpf"
	"github.com/walcast/walcast/cast"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/internal/benchkit"
	"github.com/walcast/walcast/internal/netns"
	"github.com/walcast/walcast/internal/pace"
	"github.com/walcast/walcast/wire"
)

// lanLoss is the LAN of the loss rows with one tc injector on the egress
// of each switch port: im[0] loses what goes to host 0 (B→A), im[1] what
// goes to host 1 (A→B). Every path's datagrams cross the switch, so every
// path gets the same loss, AF_XDP included.
type lanLoss struct {
	lan  *netns.LAN
	im   [2]*bpf.TCImpair
	mode bpf.TCMode
}

func newLANLoss(c Config) (*lanLoss, error) {
	lc := netns.DefaultLANConfig()
	lc.Tag = c.Tag
	lan, err := netns.CreateLAN(lc)
	if err != nil {
		if lan != nil {
			lan.Close()
		}
		return nil, err
	}
	ll := &lanLoss{lan: lan}
	for i := range ll.im {
		im, mode, err := lan.Ports[i].AttachTCImpair(bpf.ImpairConfig{DropFraction: c.Loss, RecordType: -1}, bpf.Egress, bpf.TCAuto)
		if err != nil {
			ll.close()
			return nil, fmt.Errorf("pathbench: tc injector on switch port %d: %w", i, err)
		}
		ll.im[i], ll.mode = im, mode
	}
	return ll, nil
}

func (ll *lanLoss) close() error {
	for _, im := range ll.im {
		if im != nil {
			im.Close()
		}
	}
	return ll.lan.Close()
}

func (ll *lanLoss) set(drop float64) error {
	for _, im := range ll.im {
		if err := im.Set(bpf.ImpairConfig{DropFraction: drop, RecordType: -1}); err != nil {
			return err
		}
	}
	return nil
}

func (ll *lanLoss) counters() (ab, ba bpf.ImpairCounters) {
	ab, _ = ll.im[1].Counters()
	ba, _ = ll.im[0].Counters()
	return ab, ba
}

// loss streams c.LossRate records/s for c.LossTime from A to B across the
// lossy switch, and records each record's delivery latency (send to
// in-order delivery, one clock: both loops are in this process).
func loss(c Config, s Spec, ll *lanLoss, sys *bpf.SyscallCounter) Row {
	row := newRow("loss", s, c.Size)
	row.Drop = c.Loss
	a, b := ll.lan.Hosts[0], ll.lan.Hosts[1]
	pa, pb, err := openPair(s, a, b, true)
	if err != nil {
		return refusedOrFailed(row, err)
	}
	total := int64(float64(c.LossRate) * c.LossTime.Seconds())
	samples := benchkit.NewSamples(int(total))
	var tidA, tidB atomic.Int64
	var delivered atomic.Int64
	rcfg, err := loopCfg(c, 1, pb, s.Batch, false, true, &tidB)
	if err != nil {
		pa.Close()
		pb.Close()
		return failed(row, err)
	}
	rcfg.OnRecord = func(_ *cast.Loop, _ wire.Header, p []byte) {
		if payloadOK(p) {
			samples.Record(time.Now().UnixNano() - getStamp(p))
		}
		delivered.Add(1)
	}
	rl, err := cast.StartLoop(rcfg)
	if err != nil {
		pa.Close()
		return failed(row, err)
	}
	payload := make([]byte, payloadLen(c.Size))
	var sent atomic.Int64
	var go0 atomic.Int64 // unix ns of the first send; 0 = not started
	var sendErr error
	scfg, err := loopCfg(c, 0, pa, s.Batch, true, false, &tidA)
	if err != nil {
		rl.Close()
		pa.Close()
		return failed(row, err)
	}
	// A token bucket, not a schedule: after a stall the sender resumes at
	// the rate instead of racing to catch up.
	bucket := pace.New(float64(c.LossRate))
	scfg.OnPoll = func(l *cast.Loop, _ int64) {
		noteTID(&tidA)
		n := sent.Load()
		if go0.Load() == 0 || n >= total {
			return
		}
		now := time.Now().UnixNano()
		for k := 0; k < s.Batch && n < total && bucket.Ready(now); k++ {
			putIndex(payload, uint64(n))
			putStamp(payload, now)
			if _, err := l.Send(1, payload); err != nil {
				if !sendOK(err) {
					sendErr = err
					n = total
				}
				break
			}
			bucket.Spend()
			n++
		}
		sent.Store(n)
	}
	sl, pA, pB, err := startProbed(scfg, rl, &tidA, &tidB, sys)
	if err != nil {
		return failed(row, err)
	}
	defer pA.close()
	defer pB.close()
	// A receiver starts at the first record it sees, so the first one
	// must arrive: loss goes on after it was delivered.
	if err := ll.set(0); err != nil {
		closeAll(sl, rl)
		return failed(row, err)
	}
	pA.begin()
	pB.begin()
	start := time.Now()
	go0.Store(start.UnixNano())
	for deadline := start.Add(c.stall()); delivered.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Microsecond)
	}
	if err := ll.set(c.Loss); err != nil {
		closeAll(sl, rl)
		return failed(row, err)
	}
	ab0, ba0 := ll.counters()
	// The row ends when every record is delivered, a loop failed, or
	// nothing was delivered for c.stall(): a loaded machine makes a row
	// slow, only a stall makes it incomplete.
	for last, progress := int64(-1), time.Now(); delivered.Load() < total && time.Since(progress) < c.stall(); {
		if sendErr != nil || sl.Err() != nil || rl.Err() != nil {
			break
		}
		if d := delivered.Load(); d != last {
			last, progress = d, time.Now()
		}
		time.Sleep(2 * time.Millisecond)
	}
	el := time.Since(start)
	pA.end(max(total, 1))
	pB.end(max(total, 1))
	ab1, ba1 := ll.counters()
	note := pathNote(pa) + " → " + pathNote(pb)
	rcvs := sl.Receivers() // the sender's flow-control table, before the loops close
	lerr := closeAll(sl, rl)
	if sendErr != nil {
		return failed(row, sendErr)
	}
	st, rs := sl.SenderStats(), rl.ReceiverStats()
	row.Latency = samples.Summarize()
	row.Sent, row.Delivered = sent.Load(), delivered.Load()
	row.Records, row.Seconds = row.Delivered, el.Seconds()
	row.RecPerS = float64(row.Delivered) / el.Seconds()
	row.DeliveredPct = 100 * float64(row.Delivered) / float64(max(total, 1))
	row.Retx, row.Naks = st.RetxHot+st.RetxCold, rs.NaksSent
	row.MatchedAB, row.MatchedBA = ab1.Matched-ab0.Matched, ba1.Matched-ba0.Matched
	row.LossAB = frac(ab1.Dropped-ab0.Dropped, ab1.Matched-ab0.Matched)
	row.LossBA = frac(ba1.Dropped-ba0.Dropped, ba1.Matched-ba0.Matched)
	row.A, row.B = pA.thread(max(total, 1)), pB.thread(max(total, 1))
	row.Note = fmt.Sprintf("%s; injected A→B %d of %d datagrams, B→A %d of %d (tc %v egress on the switch ports)",
		note, ab1.Dropped-ab0.Dropped, ab1.Matched-ab0.Matched, ba1.Dropped-ba0.Dropped, ba1.Matched-ba0.Matched, ll.mode)
	if row.Delivered < total {
		row.Note = fmt.Sprintf("INCOMPLETE: delivered %d of %d records in order, then none for %v or a loop stopped (loops: %v; receiver: %d faults, %d reconnects, %d peer silences, up to %d NAKs of one gap, %d stored out of order, %d Status sent; sender: %d sent, %d Status heard, %d sends refused by flow control, %d receivers lost, %d NAKs, %d retransmits, %d refused (no WAL), flow-control table %s); %s",
			row.Delivered, total, c.stall(), lerr, rs.Faults, rs.Reconnects, rs.PeerSilences, rs.MaxRetries, rs.Buffered, rs.StatusSent,
			row.Sent, st.Statuses, st.Backpressured, st.ReceiversLost, st.Naks, st.RetxHot+st.RetxCold, st.ColdRejected, flowTable(rcvs), row.Note)
	}
	return row
}

// flowTable is the sender's view of its receivers, for a row that ended
// short: what each last reported and whether it still held the sender.
func flowTable(rs []protocol.ReceiverInfo) string {
	if len(rs) == 0 {
		return "empty"
	}
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "[delivered %d, highest %d, edge %d, state %v, throttles %v, stalled %v, srtt %v]",
			r.Delivered, r.Highest, r.Edge, r.State, r.Throttles, r.Stalled, time.Duration(r.SRTT))
	}
	return b.String()
}

func frac(a, b uint64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
