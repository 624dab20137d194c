package pathbench

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/walcast/walcast/bpf"
	"github.com/walcast/walcast/cast"
	"github.com/walcast/walcast/internal/netns"
	"github.com/walcast/walcast/wire"
)

// throughput streams size-byte records over spec s from A to B as fast as
// the path takes them, at most c.Window records ahead of delivery, and
// counts the records delivered in order during c.TputTime after a warm-up.
func throughput(c Config, s Spec, size int, pr *netns.Pair, sys *bpf.SyscallCounter) Row {
	row := newRow("throughput", s, size)
	pa, pb, err := openPair(s, pr.A, pr.B, true)
	if err != nil {
		return refusedOrFailed(row, err)
	}
	var tidA, tidB atomic.Int64
	var delivered, produced atomic.Int64
	var stop atomic.Bool
	rcfg, err := loopCfg(c, 1, pb, s.Batch, false, true, &tidB)
	if err != nil {
		pa.Close()
		pb.Close()
		return failed(row, err)
	}
	rcfg.OnRecord = func(*cast.Loop, wire.Header, []byte) { delivered.Add(1) }
	rl, err := cast.StartLoop(rcfg)
	if err != nil {
		pa.Close()
		return failed(row, err)
	}
	payload := make([]byte, payloadLen(size))
	var sendErr error
	scfg, err := loopCfg(c, 0, pa, s.Batch, true, false, &tidA)
	if err != nil {
		rl.Close()
		pa.Close()
		return failed(row, err)
	}
	window := int64(c.Window)
	scfg.OnPoll = func(l *cast.Loop, _ int64) {
		noteTID(&tidA)
		if stop.Load() {
			return
		}
		n := produced.Load()
		for k := 0; k < s.Batch && n-delivered.Load() < window; k++ {
			putIndex(payload, uint64(n))
			if _, err := l.Send(1, payload); err != nil {
				if !sendOK(err) {
					sendErr = err
					stop.Store(true)
				}
				break
			}
			n++
		}
		produced.Store(n)
	}
	sl, pA, pB, err := startProbed(scfg, rl, &tidA, &tidB, sys)
	if err != nil {
		return failed(row, err)
	}
	defer pA.close()
	defer pB.close()
	// Warm up from the first delivery (a starved loop may take a while on a
	// loaded machine), then measure; a phase that saw nothing delivered is
	// stretched (up to 10 s) rather than reported as zero.
	for deadline := time.Now().Add(10 * time.Second); delivered.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(tputWarmup)
	pA.begin()
	pB.begin()
	d0, t0 := delivered.Load(), time.Now()
	time.Sleep(c.TputTime)
	for deadline := t0.Add(10 * time.Second); delivered.Load() == d0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	d1, t1 := delivered.Load(), time.Now()
	ops := d1 - d0
	pA.end(ops)
	pB.end(ops)
	stop.Store(true)
	// Let the receiver finish what is in flight, so retransmit counts
	// cover a whole stream.
	for deadline := time.Now().Add(2 * time.Second); delivered.Load() < produced.Load() && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	note := pathNote(pa) + " → " + pathNote(pb)
	lerr := closeAll(sl, rl)
	if sendErr != nil {
		return failed(row, sendErr)
	}
	if ops <= 0 {
		return failed(row, fmt.Errorf("nothing delivered in %v of measuring after %d records were delivered in warm-up (loops: %v)",
			t1.Sub(t0).Round(time.Millisecond), d0, lerr))
	}
	row.Seconds = t1.Sub(t0).Seconds()
	row.Records = ops
	row.RecPerS = float64(ops) / row.Seconds
	row.Gbps = row.RecPerS * float64(size) * 8 / 1e9
	row.Sent, row.Delivered = produced.Load(), delivered.Load()
	st, rs := sl.SenderStats(), rl.ReceiverStats()
	row.Retx, row.Naks = st.RetxHot+st.RetxCold, rs.NaksSent
	row.A, row.B = pA.thread(ops), pB.thread(ops)
	row.Note = note
	if x := xdpStats(pb); x != nil {
		row.Note += fmt.Sprintf("; receiver ring: %d fill-ring-empty, %d rx-ring-full", x.KernelRxFillRingEmpty, x.KernelRxRingFull)
	}
	if x := xdpStats(pa); x != nil {
		row.Note += fmt.Sprintf("; sender: %.1f records per TX kick, %d dropped by the device (EBUSY)", float64(x.TxPackets)/float64(max(x.TxKicks, 1)), x.TxDropped)
	}
	return row
}

// tputWarmup runs before a throughput phase is measured.
const tputWarmup = 300 * time.Millisecond
