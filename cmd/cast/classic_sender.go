package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"time"

	"github.com/walcast/walcast/cast"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/internal/benchkit"
	"github.com/walcast/walcast/wire"
)

// The classic commands (sender, receiver, bandwidth) keep the flags,
// defaults, ranges and summary lines of the stop-and-wait tools they
// replace, carried by casting. Where casting must differ it says so in
// -h: its 16-byte header and 8-byte seq count toward -size.

const (
	classicPort    = 9002 // the stop-and-wait receiver's default port
	classicMaxSize = 1427 // the stop-and-wait tools' largest -size
	// classicMinFrame is casting's smallest record: the 16-byte header
	// and the 8-byte seq that starts every payload.
	classicMinFrame = wire.HeaderSize + 8
)

var classicAddr = fmt.Sprintf("127.0.0.1:%d", classicPort)

const classicSizeHelp = "message bytes on the wire, 0..1427 as the stop-and-wait tools take them; casting counts its 16-byte header and 8-byte seq in, so sizes below 24 send 24-byte frames"

// classicPayload is the casting payload that makes a -size byte frame.
func classicPayload(size int) int { return max(size, classicMinFrame) - wire.HeaderSize }

func init() {
	register(command{name: "sender", summary: "classic: ping -n messages off a `cast receiver`, one at a time; per-message RTT, summary, -csv, -plot", run: runClassicSender})
}

// classicSample is one message's round trip.
type classicSample struct {
	k      int   // message number, from 1
	sentAt int64 // first send, ns since the run started
	rtt    int64 // ns from the first send to the echo
	retx   bool  // casting repaired it (a retransmission or a NAK on the way)
}

func runClassicSender(args []string) error {
	fs := newFlagSet("sender", "[-addr HOST:PORT] [flags]", "Send -n messages of -size bytes to a `cast receiver`, one at a time: each waits for\n"+
		"its echo. A line per message as its echo arrives (its round trip, timed from its\n"+
		"first send), then min/avg/max/p50/p99, stddev, total time and throughput.\n"+
		"Stop-and-wait resends a message after 200 ms without its ACK; casting never\n"+
		"resends on a timer: the receiver NAKs what it misses and the sender repairs it\n"+
		"from its ring, so a message marked \"retransmitted\" is one casting repaired.\n"+
		"-csv writes every sample, -plot a PNG of RTT per message with the repaired ones\n"+
		"marked. Exits 1 when an echo does not come back within -timeout.")
	addr := fs.String("addr", classicAddr, "receiver address HOST:PORT")
	n := fs.Int("n", 1000, "messages")
	size := fs.Int("size", 128, classicSizeHelp)
	quiet := fs.Bool("q", false, "do not print one line per message")
	csvPath := fs.String("csv", "", "write one line per message to this file: seq,bytes,sent_s,rtt_us,retransmitted")
	plotPath := fs.String("plot", "", "draw RTT per message into this PNG file, repaired messages marked")
	timeout := fs.Duration("timeout", 10*time.Second, "give up (exit 1) when one message's echo has not come back after this long")
	var nf netFlags
	nf.add(fs, "udp", false)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := checkRange("size", *size, 0, classicMaxSize); err != nil {
		return err
	}
	if err := checkRange("n", *n, 1, 1<<30); err != nil {
		return err
	}
	if err := checkRange("timeout", *timeout, time.Millisecond, 24*time.Hour); err != nil {
		return err
	}
	defer nf.done()
	if err := nf.check(); err != nil {
		return err
	}
	peer, err := addrFlag("addr", *addr, true)
	if err != nil {
		return err
	}
	var csv *bufio.Writer
	if *csvPath != "" {
		f, err := os.Create(*csvPath)
		if err != nil {
			return err
		}
		defer f.Close()
		csv = bufio.NewWriter(f)
		fmt.Fprintln(csv, "seq,bytes,sent_s,rtt_us,retransmitted")
	}
	ctx, cancel := signalContext()
	defer cancel()
	p, lc, err := nf.senderLoop(peer)
	if err != nil {
		return err
	}
	rcv, err := protocol.NewReceiver(protocol.DefaultReceiverConfig())
	if err != nil {
		p.Close()
		return err
	}
	snd := lc.Sender
	lc.Receiver = rcv
	frame := max(*size, classicMinFrame)
	payload := make([]byte, classicPayload(*size))
	samples := make(chan classicSample, *n)

	// On the loop thread: one message outstanding at a time. Casting
	// delivers the pings in order exactly once and the receiver echoes
	// each as it is delivered, so the next echo is the outstanding
	// message's (its number is also in the payload when there is room).
	var (
		k          int   // messages sent
		t0         int64 // first send of message k
		start      int64
		waiting    bool
		retx, naks uint64 // counters when message k was sent
	)
	repairs := func() (uint64, uint64) {
		s, r := snd.Stats(), rcv.Stats()
		return s.RetxHot + s.RetxCold, r.NaksSent
	}
	lc.OnPoll = func(l *cast.Loop, now int64) {
		if waiting || k >= *n {
			return
		}
		if len(payload) >= 16 {
			binary.LittleEndian.PutUint64(payload[8:], uint64(k+1))
		}
		// The clock now, not the iteration's start: the previous echo
		// may have arrived in this same iteration, after it began.
		sent := l.Now()
		if _, err := l.Send(1, payload); err != nil {
			return // batch full: next iteration
		}
		if start == 0 {
			start = sent
		}
		k++
		t0, waiting = sent, true
		retx, naks = repairs()
	}
	lc.OnRecord = func(l *cast.Loop, h wire.Header, p []byte) {
		if !waiting || (len(p) >= 16 && binary.LittleEndian.Uint64(p[8:]) != uint64(k)) {
			return
		}
		r, nk := repairs()
		samples <- classicSample{k: k, sentAt: t0 - start, rtt: l.Now() - t0, retx: r != retx || nk != naks}
		waiting = false
	}
	began := time.Now() // the loop sends the first message as soon as it starts
	l, err := cast.StartLoop(lc)
	if err != nil {
		p.Close()
		return err
	}
	defer nf.kw.attach(l.SetKeys)()
	rch := newReach(p, nil)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	fmt.Fprintf(os.Stderr, "sending %d messages of %d bytes to %s over casting (%s), one at a time\n", *n, frame, peer, features(p))

	var got []classicSample
	rtts := benchkit.NewSamples(*n)
	lastEcho := time.Now()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	// take keeps one sample and streams its line (and CSV row) at once.
	take := func(s classicSample) {
		got = append(got, s)
		rtts.Record(s.rtt)
		if !*quiet {
			mark := ""
			if s.retx {
				mark = " (retransmitted)"
			}
			fmt.Fprintf(out, "%d bytes to %s: seq=%d rtt=%.1f µs%s\n", frame, peer, s.k, float64(s.rtt)/1e3, mark)
			out.Flush()
		}
		if csv != nil {
			fmt.Fprintf(csv, "%d,%d,%.6f,%.1f,%v\n", s.k, frame, float64(s.sentAt)/1e9, float64(s.rtt)/1e3, s.retx)
		}
	}
	var stop error
	for stop == nil && len(got) < *n {
		select {
		case s := <-samples:
			take(s)
			lastEcho = time.Now()
		case <-tick.C:
			if since := time.Since(lastEcho); since > *timeout {
				stop = failf("no echo for message %d within %v: is `cast receiver` running at %s?", len(got)+1, *timeout, peer)
			} else if since > time.Second && len(got) == 0 && rch.nobody() {
				stop = failf("nobody is listening at %s (ICMP port unreachable): is `cast receiver` running?", peer)
			}
		case <-ctx.Done():
			stop = interruptedf("%d of %d messages echoed", len(got), *n)
		case <-l.Done():
			stop = l.Err()
		}
	}
	total := time.Since(began)
	if err := l.Close(); err != nil && stop == nil {
		stop = err
	}
	// The loop has stopped: k, the repair counters and the samples it
	// queued are ours to read.
	sent := k
	for len(samples) > 0 {
		take(<-samples)
	}
	retxTotal, naksTotal := repairs()
	if csv != nil {
		if err := csv.Flush(); err != nil && stop == nil {
			stop = err
		}
	}
	if *plotPath != "" && len(got) > 0 {
		if err := plotClassic(*plotPath, got, frame, peer.String()); err != nil && stop == nil {
			stop = err
		}
	}
	marked := 0
	for _, s := range got {
		if s.retx {
			marked++
		}
	}
	s := rtts.Summarize()
	fmt.Fprintf(out, "\n--- %s casting statistics (%s) ---\n", peer, features(p))
	fmt.Fprintf(out, "%d messages sent, %d echoed, %d repaired by casting (%d retransmits, %d NAKs)\n", sent, len(got), marked, retxTotal, naksTotal)
	if len(got) > 0 {
		fmt.Fprintf(out, "rtt min/avg/max = %.1f/%.1f/%.1f µs\n", us(s.Min), s.Mean/1e3, us(s.Max))
		fmt.Fprintf(out, "rtt p50/p99 = %.1f/%.1f µs\n", us(s.P50), us(s.P99))
		fmt.Fprintf(out, "stddev = %.1f µs\n", s.StdDev/1e3)
	}
	fmt.Fprintf(out, "total time = %.3f s\n", total.Seconds())
	msgs := float64(len(got)) / total.Seconds()
	fmt.Fprintf(out, "throughput = %.0f msg/s, %.2f Mbps\n", msgs, msgs*float64(frame)*8/1e6)
	return stop
}

// plotClassic draws the samples' RTT scatter into path.
func plotClassic(path string, got []classicSample, frame int, peer string) error {
	pts := make([]scatterPoint, len(got))
	for i, s := range got {
		pts[i] = scatterPoint{x: float64(s.k), us: float64(s.rtt) / 1e3, marked: s.retx}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	title := fmt.Sprintf("cast sender: RTT per message, %d x %d B to %s", len(got), frame, peer)
	if err := writeScatterPNG(f, title, "echoed at first send", "repaired by casting (retransmitted)", pts); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
