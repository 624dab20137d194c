package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync/atomic"
	"time"

	"github.com/walcast/walcast/cast"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/internal/benchkit"
	"github.com/walcast/walcast/wal"
)

// The classic commands keep the flags and summary lines of the
// stop-and-wait tools they replace, now carried by casting.

func init() {
	register(command{name: "sender", summary: "classic: ping -n messages off a `cast receiver`, per-message RTT and a summary", run: runClassicSender})
	register(command{name: "receiver", summary: "classic: echo messages back to a `cast sender`, with -drop loss", run: runClassicReceiver})
	register(command{name: "bandwidth", summary: "classic: max-size messages back to back; MB/s, Mbps, per-packet overhead", run: runBandwidth})
}

func runClassicSender(args []string) error {
	fs := newFlagSet("sender", "-addr HOST:PORT [flags]", "Send -n messages of -size bytes to a `cast receiver`, one at a time: each waits for\nits echo. Prints each message's round trip, then min/avg/max/p50/p99, stddev,\ntotal time and throughput. Lost datagrams are recovered by casting's NAKs.")
	addr := fs.String("addr", "127.0.0.1:9000", "receiver address HOST:PORT")
	n := fs.Int("n", 1000, "messages")
	size := fs.Int("size", 128, "message bytes (payload; ≥ 16)")
	quiet := fs.Bool("q", false, "do not print one line per message")
	timeout := fs.Duration("timeout", 200*time.Millisecond, "send a message again when its echo has not come back after this long")
	var nf netFlags
	nf.add(fs, "udp", false)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := checkRange("size", *size, 16, protocol.DefaultMaxFrame-wal.HeaderSize); err != nil {
		return err
	}
	if err := checkRange("n", *n, 1, 1<<30); err != nil {
		return err
	}
	if err := nf.check(); err != nil {
		return err
	}
	peer, err := addrFlag("addr", *addr, true)
	if err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()
	p, err := nf.open(netip.AddrPort{}, peer)
	if err != nil {
		return err
	}
	lc, err := nf.loop(p)
	if err != nil {
		p.Close()
		return err
	}
	if lc.Sender, err = protocol.NewSender(protocol.DefaultSenderConfig(), nil); err != nil {
		p.Close()
		return err
	}
	if lc.Receiver, err = protocol.NewReceiver(protocol.DefaultReceiverConfig()); err != nil {
		p.Close()
		return err
	}
	rtts := benchkit.NewSamples(*n)
	payload := make([]byte, *size)
	var i int
	var t0 int64
	var outstanding bool
	var sendErr error
	done := make(chan struct{})
	ping := func(l *cast.Loop) {
		binary.LittleEndian.PutUint64(payload[8:], uint64(i))
		t0 = l.Now()
		if _, err := l.Send(1, payload); err != nil {
			if !errors.Is(err, protocol.ErrBatchFull) {
				sendErr = err
				close(done)
				i = *n
			}
			return
		}
		outstanding = true
	}
	// Like the stop-and-wait tools, a ping without an echo after
	// -timeout is sent again (as a new record with the same id): casting
	// repairs a lost record only once a later one (or a heartbeat, every
	// 100 ms when idle) shows the gap, and a receiver never asks for
	// records before the first one it saw.
	var resent, lost, tries, lostRun int
	lc.OnPoll = func(l *cast.Loop, now int64) {
		if i >= *n || (outstanding && l.Now()-t0 <= int64(*timeout)) {
			return
		}
		if outstanding {
			if tries++; tries > 10 { // give this message up, as a stop-and-wait tool would
				lost++
				lostRun++
				tries = 0
				if lostRun == 3 {
					sendErr = errors.New("no echo for 3 messages in a row: is the receiver running?")
				}
				if i++; i == *n || sendErr != nil {
					outstanding = false
					i = *n
					close(done)
					return
				}
			} else {
				resent++
			}
		}
		ping(l)
	}
	lc.OnRecord = func(l *cast.Loop, h wal.Header, p []byte) {
		if !outstanding || len(p) < 16 || binary.LittleEndian.Uint64(p[8:]) != uint64(i) {
			return
		}
		rtts.Record(l.Now() - t0)
		outstanding = false
		tries, lostRun = 0, 0
		if i++; i == *n {
			close(done)
			return
		}
		ping(l)
	}
	start := time.Now()
	l, err := cast.StartLoop(lc)
	if err != nil {
		p.Close()
		return err
	}
	select {
	case <-done:
	case <-ctx.Done():
	case <-l.Done():
	}
	total := time.Since(start)
	if err := l.Close(); err != nil {
		return err
	}
	if sendErr != nil {
		return sendErr
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	vals := rtts.Values()
	if !*quiet {
		for k, v := range vals {
			fmt.Fprintf(out, "%d bytes to %s: seq=%d rtt=%.1f µs\n", *size, peer, k+1, float64(v)/1e3)
		}
	}
	s := rtts.Summarize()
	fmt.Fprintf(out, "\n--- %s casting statistics (%s) ---\n", peer, features(p))
	fmt.Fprintf(out, "%d messages sent, %d received, %d lost, %d sent again after -timeout\n", *n, len(vals), lost, resent)
	fmt.Fprintf(out, "rtt min/avg/max = %.1f/%.1f/%.1f µs\n", us(s.Min), s.Mean/1e3, us(s.Max))
	fmt.Fprintf(out, "rtt p50/p99 = %.1f/%.1f µs\n", us(s.P50), us(s.P99))
	fmt.Fprintf(out, "stddev = %.1f µs\n", s.StdDev/1e3)
	fmt.Fprintf(out, "total time = %.3f s\n", total.Seconds())
	msgs := float64(len(vals)) / total.Seconds()
	fmt.Fprintf(out, "throughput = %.0f msg/s, %.2f Mbps\n", msgs, msgs*float64(*size)*8/1e6)
	if ctx.Err() != nil {
		return interruptedf("%d of %d messages echoed", len(vals), *n)
	}
	return nil
}

func runClassicReceiver(args []string) error {
	fs := newFlagSet("receiver", "-port P [flags]", "Echo every message a `cast sender` sends, dropping -drop percent of the datagrams\nthat arrive (casting recovers them). Prints received, dropped and total when the\nsender has been quiet for -linger, on Ctrl-C, or after -n messages.")
	port := fs.Int("port", 9000, "UDP port to listen on (all addresses)")
	n := fs.Int64("n", 0, "exit after this many messages (0: when the sender goes quiet)")
	linger := fs.Duration("linger", 2*time.Second, "exit once nothing arrived for this long after the first message")
	var rf recvFlags
	rf.add(fs)
	var nf netFlags
	nf.add(fs, "udp", true)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := checkPort("port", *port); err != nil {
		return err
	}
	if err := nf.check(); err != nil {
		return err
	}
	if err := rf.check(); err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	var echoed, failed int64
	var last atomic.Int64
	qctx, qcancel := quietContext(ctx, &last, *linger)
	defer qcancel()
	withEcho := echoSender(&echoed, &failed)
	res, err := receive(qctx, &nf, &rf, netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(*port)), netip.AddrPort{}, *n, false, out,
		func(lc *cast.LoopConfig, peer netip.AddrPort) error {
			if err := withEcho(lc, peer); err != nil {
				return err
			}
			inner := lc.OnRecord
			lc.OnRecord = func(l *cast.Loop, h wal.Header, p []byte) {
				last.Store(time.Now().UnixNano())
				inner(l, h, p)
			}
			return nil
		})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "received: %d\n", res.delivered)
	fmt.Fprintf(out, "dropped: %d\n", res.dropped)
	fmt.Fprintf(out, "total: %d\n", res.delivered+int64(res.dropped))
	return nil
}

// quietContext ends when ctx does, or once last (unix ns, 0 = nothing
// yet) is older than linger.
func quietContext(ctx context.Context, last *atomic.Int64, linger time.Duration) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancel(ctx)
	go func() {
		t := time.NewTicker(linger / 10)
		defer t.Stop()
		for {
			select {
			case <-c.Done():
				return
			case <-t.C:
				if l := last.Load(); l != 0 && time.Since(time.Unix(0, l)) > linger {
					cancel()
					return
				}
			}
		}
	}()
	return c, cancel
}

func runBandwidth(args []string) error {
	fs := newFlagSet("bandwidth", "-mode sender|receiver -addr HOST:PORT [flags]", "Move -n messages of -size bytes back to back over casting (mmsg: sendmmsg with\nGSO/GRO) and report MB/s, Mbps and the per-packet overhead. Start the receiver\nfirst: -mode receiver -addr listens on ADDR; -mode sender -addr sends to it.")
	mode := fs.String("mode", "", "sender or receiver")
	addr := fs.String("addr", "127.0.0.1:9000", "receiver address HOST:PORT")
	n := fs.Int("n", 100000, "messages")
	size := fs.Int("size", 1427, "message bytes (payload; the frame adds 16, 1443 fills a 1500-byte MTU)")
	rate := fs.Float64("rate", 0, "sender: messages per second (0: back to back)")
	var rf recvFlags
	rf.add(fs)
	var nf netFlags
	nf.add(fs, "mmsg", true)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *mode != "sender" && *mode != "receiver" {
		return usagef("-mode %q: want sender or receiver", *mode)
	}
	if err := (sendOpts{n: *n, payload: *size, rate: *rate}).check(); err != nil {
		return err
	}
	if err := nf.check(); err != nil {
		return err
	}
	if err := rf.check(); err != nil {
		return err
	}
	a, err := addrFlag("addr", *addr, *mode == "sender")
	if err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	report := func(what string, msgs int64, el time.Duration) {
		bytes := float64(msgs) * float64(*size)
		fmt.Fprintf(out, "%s %d messages of %d bytes in %.3f s\n", what, msgs, *size, el.Seconds())
		fmt.Fprintf(out, "throughput: %.2f MB/s, %.2f Mbps\n", bytes/el.Seconds()/1e6, bytes*8/el.Seconds()/1e6)
		if msgs > 0 {
			fmt.Fprintf(out, "per-packet overhead: %.2f µs\n", float64(el.Microseconds())/float64(msgs))
		}
	}
	switch *mode {
	case "receiver":
		res, err := receive(ctx, &nf, &rf, a, netip.AddrPort{}, int64(*n), false, out, nil)
		if err != nil {
			return err
		}
		report("received", res.delivered, res.elapsed)
		fmt.Fprintf(out, "gaps NAKed %d, dropped by -drop %d, over %s\n", res.stats.NaksSent, res.dropped, res.path)
	case "sender":
		p, err := nf.open(netip.AddrPort{}, a)
		if err != nil {
			return err
		}
		lc, err := nf.loop(p)
		if err != nil {
			p.Close()
			return err
		}
		if lc.Sender, err = protocol.NewSender(protocol.DefaultSenderConfig(), nil); err != nil {
			p.Close()
			return err
		}
		var sent atomic.Int64
		done := make(chan struct{})
		lc.OnPoll = producer(sendOpts{n: *n, payload: *size, rate: *rate}, &sent, done)
		start := time.Now()
		l, err := cast.StartLoop(lc)
		if err != nil {
			p.Close()
			return err
		}
		select {
		case <-done:
		case <-ctx.Done():
		case <-l.Done():
		}
		el := time.Since(start)
		waitQuiet(ctx, l, 500*time.Millisecond, 5*time.Second)
		if err := l.Close(); err != nil {
			return err
		}
		report("sent", sent.Load(), el)
		st := l.SenderStats()
		fmt.Fprintf(out, "naks %d, retransmits %d, over %s\n", st.Naks, st.RetxHot+st.RetxCold, features(p))
	}
	return nil
}
