package harness

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walcast/walcast/bench/peers"
	"github.com/walcast/walcast/internal/benchkit"
)

// thread runs fn on a goroutine locked and pinned to cpu, and reports
// whether the pin held.
func thread(wg *sync.WaitGroup, cpu int, pinned *atomic.Bool, fn func()) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		if Pin(cpu) == nil && cpu >= 0 {
			pinned.Store(true)
		}
		fn()
	}()
}

func skipped(workload string, p peers.Peer, size int, why error) Result {
	return Result{Row: benchkit.Row{Workload: workload, Name: p.Name, Mode: p.Mode, Note: "skipped: " + why.Error()}, Size: size, Skipped: why.Error()}
}

func peerConfig(size int, timeout time.Duration) peers.Config {
	pc := peers.DefaultConfig()
	pc.MsgSize = max(size, 64)
	pc.Timeout = timeout
	return pc
}

// RTT is the ping-pong workload: A sends one message, B echoes it (or the
// protocol's own answer arrives, for a RoundTripper), A records the time
// from just before Send to the answer. Warm-up round trips are not
// recorded. An unreliable peer's lost round trip counts in Lost after
// 50 ms and the next one starts.
func RTT(p peers.Peer, cfg Config, drop float64) Result {
	return rtt("rtt", p, cfg, drop)
}

// Classic is the classic `sender` experiment: RTT with drop injected at
// the receiver only (B discards that fraction of what it receives).
func Classic(p peers.Peer, cfg Config, drop float64) Result {
	return rtt("classic-rtt", p, cfg, drop)
}

func rtt(workload string, p peers.Peer, cfg Config, drop float64) Result {
	pc := peerConfig(cfg.Payload, 2*time.Second)
	if !p.Reliable {
		pc.Timeout = 50 * time.Millisecond
	}
	pc.DropB = drop
	if drop > 0 && !p.Lossy {
		return skipped(workload, p, cfg.Payload, errors.New("no loss injection for this peer"))
	}
	s, err := openSession(p, pc, cfg.Timeout)
	if err != nil {
		return skipped(workload, p, cfg.Payload, err)
	}
	rt, isRT := s.pair.A.(peers.RoundTripper)
	var wg sync.WaitGroup
	var pinA, pinB atomic.Bool
	thread(&wg, cfg.ServerCPU, &pinB, func() {
		buf := make([]byte, pc.MsgSize)
		for {
			n, err := s.pair.B.Recv(buf)
			if errors.Is(err, peers.ErrTimeout) {
				continue
			}
			if err != nil {
				return
			}
			if !isRT {
				if s.pair.B.Send(buf[:n]) != nil {
					return
				}
				if f, ok := s.pair.B.(peers.Flusher); ok {
					f.Flush()
				}
			}
		}
	})
	h := NewHist()
	series := make([]int64, 0, cfg.N)
	var res Result
	var done atomic.Int64
	stop := progress(cfg.Progress, workload+" "+p.Name, int64(cfg.N), &done)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if Pin(cfg.ClientCPU) == nil && cfg.ClientCPU >= 0 {
			pinA.Store(true)
		}
		msg := make([]byte, cfg.Payload)
		in := make([]byte, pc.MsgSize)
		ctr, _ := benchkit.OpenCounters()
		defer ctr.Close()
		var start time.Time
		measured := int64(0)
		for i := 0; i < cfg.Warmup+cfg.N; i++ {
			if i == cfg.Warmup {
				start = time.Now()
				ctr.Start()
			}
			if i >= cfg.Warmup && time.Since(start) > cfg.Budget {
				break
			}
			seq := uint64(i)
			stamp(msg, seq, 0)
			t0 := time.Now()
			var err error
			if isRT {
				err = rt.RoundTrip(msg)
			} else {
				err = s.pair.A.Send(msg)
				if f, ok := s.pair.A.(peers.Flusher); ok && err == nil {
					err = f.Flush()
				}
				for err == nil {
					var n int
					n, err = s.pair.A.Recv(in)
					if err == nil && n >= 16 {
						if got, _ := unstamp(in); got == seq {
							break
						}
					}
				}
			}
			dt := time.Since(t0)
			if errors.Is(err, peers.ErrTimeout) && !p.Reliable {
				if i >= cfg.Warmup {
					res.Lost++
				}
				continue
			}
			if err != nil {
				res.Note = fmt.Sprintf("stopped after %d: %v", i, err)
				break
			}
			if i >= cfg.Warmup {
				h.Record(dt.Nanoseconds())
				series = append(series, dt.Nanoseconds())
				measured++
				done.Store(measured)
			}
		}
		el := time.Since(start)
		res.Perf, _ = ctr.Stop(measured)
		res.Seconds = el.Seconds()
		if el > 0 {
			res.RecPerS = float64(measured) / el.Seconds()
		}
		res.Records = measured
		res.Sent = measured + res.Lost
		s.close()
	}()
	wg.Wait()
	stop()
	res.Retransmits(s.retransmits())
	s.finish()
	res.Workload, res.Name, res.Mode, res.Size, res.Drop = workload, p.Name, p.Mode, cfg.Payload, drop
	res.Latency, res.Curve, res.Series = h.Summary(), h.Curve(), series
	res.Pinned = pinA.Load() && pinB.Load()
	res.Delivered = res.Records
	if res.Sent > 0 {
		res.DeliveredPct = 100 * float64(res.Delivered) / float64(res.Sent)
	}
	return res
}

// Retransmits stores retransmissions per delivered record.
func (r *Result) Retransmits(n int64) {
	if r.Records > 0 {
		r.RetransPerRec = finite(float64(n) / float64(r.Records))
	}
}

// OneWay is send → deliver with the clock shared in-process: A stamps
// the send time into the message, B records its arrival time minus the
// stamp. A sends the next message only after B delivered the previous
// one, so no message queues behind another.
func OneWay(p peers.Peer, cfg Config) Result {
	pc := peerConfig(cfg.Payload, 2*time.Second)
	s, err := openSession(p, pc, cfg.Timeout)
	if err != nil {
		return skipped("oneway", p, cfg.Payload, err)
	}
	base := time.Now()
	var delivered atomic.Int64 // seq+1 of the last delivered message
	var wg sync.WaitGroup
	var pinA, pinB atomic.Bool
	h := NewHist()
	var res Result
	var perfOps int64
	thread(&wg, cfg.ServerCPU, &pinB, func() {
		buf := make([]byte, pc.MsgSize)
		ctr, _ := benchkit.OpenCounters()
		defer ctr.Close()
		started := false
		for {
			n, err := s.pair.B.Recv(buf)
			if errors.Is(err, peers.ErrTimeout) {
				continue
			}
			if err != nil || n < 16 {
				break
			}
			now := time.Since(base).Nanoseconds()
			seq, ts := unstamp(buf)
			if int(seq) >= cfg.Warmup {
				if !started {
					ctr.Start()
					started = true
				}
				h.Record(now - ts)
				perfOps++
			}
			delivered.Store(int64(seq) + 1)
		}
		res.Perf, _ = ctr.Stop(perfOps)
	})
	var done atomic.Int64
	stop := progress(cfg.Progress, "oneway "+p.Name, int64(cfg.N), &done)
	thread(&wg, cfg.ClientCPU, &pinA, func() {
		defer s.close()
		msg := make([]byte, cfg.Payload)
		var start time.Time
		for i := 0; i < cfg.Warmup+cfg.N; i++ {
			if i == cfg.Warmup {
				start = time.Now()
			}
			if i >= cfg.Warmup && time.Since(start) > cfg.Budget {
				break
			}
			stamp(msg, uint64(i), time.Since(base).Nanoseconds())
			err := s.pair.A.Send(msg)
			if f, ok := s.pair.A.(peers.Flusher); ok && err == nil {
				err = f.Flush()
			}
			if err != nil {
				res.Note = fmt.Sprintf("stopped after %d: %v", i, err)
				return
			}
			wait := time.Now()
			for spins := 0; delivered.Load() < int64(i)+1; spins++ {
				if spins&1023 == 1023 && time.Since(wait) > 50*time.Millisecond {
					if i >= cfg.Warmup {
						res.Lost++
					}
					break
				}
			}
			if i >= cfg.Warmup {
				done.Add(1)
			}
		}
		res.Seconds = time.Since(start).Seconds()
	})
	wg.Wait()
	stop()
	s.finish()
	res.Workload, res.Name, res.Mode, res.Size = "oneway", p.Name, p.Mode, cfg.Payload
	res.Latency, res.Curve = h.Summary(), h.Curve()
	res.Records = int64(res.Latency.N)
	res.Sent = done.Load()
	res.Delivered = res.Records
	if res.Sent > 0 {
		res.DeliveredPct = 100 * float64(res.Delivered) / float64(res.Sent)
	}
	res.Pinned = pinA.Load() && pinB.Load()
	return res
}

// ErrNoTCPLoss is why a TCP peer's row on Config.Net at drop > 0 is
// skipped.
var ErrNoTCPLoss = errors.New("not run at this loss: the kernel loss injector on the link (BPF) matches IPv4/UDP only, and this suite has no other for TCP")

// Throughput sends size-byte messages from A as fast as the protocol
// lets it, for at most n messages or cfg.Budget, and counts what B
// delivers in order. The rate is delivered messages over the time from
// the first send to the last delivery. drop > 0 injects loss both ways
// (the loss-degradation workload). After the last send the run waits up
// to cfg.DrainTime for a reliable peer to finish repairing.
//
// In loss-degradation (drop > 0 or n < 0) each message also carries its
// send time, and the row's Latency is send → in-order delivery (one
// clock: both ends are in this process), queueing behind earlier
// messages included; OverUDPPct is 100 for a UDP peer, 0 for a TCP one.
func Throughput(p peers.Peer, cfg Config, size int, n int, drop float64) Result {
	wl := "throughput"
	if drop > 0 || n < 0 {
		wl = "loss-degradation"
	}
	oneway := wl == "loss-degradation"
	if n < 0 {
		n = 1 << 30
	}
	skip := func(why error) Result {
		r := skipped(wl, p, size, why)
		r.Drop = drop
		return r
	}
	pc := peerConfig(size, 300*time.Millisecond)
	if p.Reliable {
		pc.Timeout = cfg.DrainTime()
	}
	pc.DropA, pc.DropB = drop, drop
	switch {
	case cfg.Net != nil:
		pc.Net, pc.DropA, pc.DropB = cfg.Net, 0, 0
		if drop > 0 && p.TCP && !cfg.Net.TCPLoss {
			return skip(ErrNoTCPLoss)
		}
	case drop > 0 && !p.Lossy:
		return skip(errors.New("no loss injection for this peer"))
	}
	s, err := openSession(p, pc, cfg.Timeout)
	if err != nil {
		return skip(err)
	}
	var sent atomic.Int64
	var sendDone atomic.Bool
	var recvDone atomic.Bool
	var first time.Time
	var last time.Time
	var inOrder, got int64
	var res Result
	var wg sync.WaitGroup
	var pinA, pinB atomic.Bool
	base := time.Now()
	var h *Hist
	if oneway {
		h = NewHist()
	}
	thread(&wg, cfg.ServerCPU, &pinB, func() {
		buf := make([]byte, pc.MsgSize)
		next := uint64(0)
		for {
			k, err := s.pair.B.Recv(buf)
			if errors.Is(err, peers.ErrTimeout) {
				if sendDone.Load() {
					break
				}
				continue
			}
			if err != nil {
				break
			}
			got++
			// In order: beyond everything delivered before. For a reliable
			// peer that is the next seq; an unreliable one may skip seqs.
			if k >= 16 {
				if seq, ts := unstamp(buf); seq+1 > next {
					inOrder++
					next = seq + 1
					if h != nil {
						h.Record(time.Since(base).Nanoseconds() - ts)
					}
				}
			}
			last = time.Now()
			if sendDone.Load() && got >= sent.Load() {
				break
			}
		}
		recvDone.Store(true)
	})
	var done atomic.Int64
	stop := progress(cfg.Progress, fmt.Sprintf("%s %s %dB", wl, p.Name, size), int64(min(n, 1<<24)), &done)
	thread(&wg, cfg.ClientCPU, &pinA, func() {
		msg := make([]byte, size)
		ctr, _ := benchkit.OpenCounters()
		defer ctr.Close()
		ctr.Start()
		first = time.Now()
		// A slow protocol (stop-and-wait under loss: 200 ms per timeout)
		// checks the budget every message, a fast one every 64.
		_, slow := s.pair.A.(peers.RoundTripper)
		slow = slow || p.Mode == "netpoll"
		i := 0
		for ; i < n; i++ {
			if (slow || i&63 == 0) && time.Since(first) > cfg.Budget {
				break
			}
			var ts int64
			if oneway {
				ts = time.Since(base).Nanoseconds()
			}
			stamp(msg, uint64(i), ts)
			if err := s.pair.A.Send(msg); err != nil {
				res.Note = fmt.Sprintf("send stopped after %d: %v", i, err)
				break
			}
			sent.Store(int64(i + 1))
			done.Store(int64(i + 1))
		}
		if f, ok := s.pair.A.(peers.Flusher); ok {
			f.Flush()
		}
		res.Perf, _ = ctr.Stop(int64(i))
		sendDone.Store(true)
		// Keep serving the receiver (re-requests, heartbeats) until it has
		// everything or another Budget passed.
		poll, _ := s.pair.A.(peers.Poller)
		end := time.Now().Add(cfg.DrainTime())
		for !recvDone.Load() && time.Now().Before(end) {
			if poll != nil {
				if poll.Poll() != nil {
					break
				}
			} else {
				time.Sleep(time.Millisecond)
			}
		}
		s.close()
	})
	wg.Wait()
	stop()
	res.Retransmits(0)
	rt := s.retransmits()
	s.finish()
	res.Workload, res.Name, res.Mode, res.Size, res.Drop = wl, p.Name, p.Mode, size, drop
	// A message delivered was sent, even when the Send call that carried
	// it then failed (stop-and-wait: the ACK was still on its way).
	res.Sent, res.Delivered, res.Records = max(sent.Load(), inOrder), inOrder, inOrder
	if res.Sent > 0 {
		res.DeliveredPct = 100 * float64(inOrder) / float64(res.Sent)
	}
	if el := last.Sub(first); inOrder > 0 && el > 0 {
		res.Seconds = el.Seconds()
		res.RecPerS = float64(inOrder) / el.Seconds()
		res.Gbps = res.RecPerS * float64(size) * 8 / 1e9
	}
	res.Retransmits(rt)
	res.Pinned = pinA.Load() && pinB.Load()
	if oneway && inOrder > 0 {
		res.Latency, res.Curve = h.Summary(), h.Curve()
		udp := 100.0
		if p.TCP {
			udp = 0
		}
		res.OverUDPPct = &udp
	}
	return res
}
