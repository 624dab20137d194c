package main

import (
	"bufio"
	"fmt"
	"io"
	"net/netip"
	"os"
	"time"
)

func init() {
	register(command{name: "bandwidth", summary: "classic: -n messages back to back; MB/s, Mbps, per-packet overhead", run: runBandwidth})
}

func runBandwidth(args []string) error {
	fs := newFlagSet("bandwidth", "-mode sender|receiver [-addr HOST:PORT] [flags]", "Move -n messages of -size bytes back to back over casting (mmsg: sendmmsg with\n"+
		"GSO/GRO) and report MB/s, Mbps and the per-packet overhead. Start the receiver\n"+
		"first: -mode receiver -addr listens on ADDR; -mode sender -addr sends to it.\n"+
		"The receiver exits 1 when the sender went quiet before -n messages, 3 when its\n"+
		"stream faulted or must reconnect. The sender exits 0 once the receiver reports\n"+
		"every message delivered (its Status), 3 when it reported a sticky outcome, left\n"+
		"or went silent first, 1 when nobody listens (ICMP port unreachable).")
	mode := fs.String("mode", "", "sender or receiver")
	addr := fs.String("addr", classicAddr, "receiver address HOST:PORT")
	n := fs.Int("n", 100000, "messages")
	size := fs.Int("size", classicMaxSize, classicSizeHelp)
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
	if err := checkRange("size", *size, 0, classicMaxSize); err != nil {
		return err
	}
	o := sendOpts{n: *n, payload: classicPayload(*size), rate: *rate}
	if err := o.check(); err != nil {
		return err
	}
	defer nf.done()
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
	frame := max(*size, classicMinFrame)
	ctx, cancel := signalContext()
	defer cancel()
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	if *mode == "receiver" {
		res, err := consume(ctx, &nf, &rf, a, netip.AddrPort{}, int64(*n), false, out)
		if err != nil {
			return err
		}
		bandwidthReport(out, "received", res.delivered, frame, res.elapsed)
		fmt.Fprintf(out, "gaps NAKed %d, dropped by -drop %d, over %s\n", res.stats.NaksSent, res.dropped, res.path)
		out.Flush()
		return res.verdict(ctx, int64(*n))
	}
	pc, err := nf.producerConfig(netip.AddrPort{}, a)
	if err != nil {
		return err
	}
	sr, err := startSending(pc, o)
	if err != nil {
		return err
	}
	prod, fw, rch, done := sr.p, sr.fw, sr.rch, sr.done
	defer nf.kw.attach(prod.SetKeys)()
	select {
	case <-done:
	case <-ctx.Done():
	case <-prod.Done():
	}
	el := sr.elapsed()
	rch.mark()
	fw.settle(ctx, sr.lastSeq.Load(), 500*time.Millisecond, 5*time.Second)
	close(sr.stopWatch)
	if err := prod.Close(); err != nil {
		return unproduce(err)
	}
	bandwidthReport(out, "sent", sr.sent.Load(), frame, el)
	st := prod.Stats().Sender
	fmt.Fprintf(out, "naks %d, retransmits %d, over %s\n", st.Naks, st.RetxHot+st.RetxCold, features(pc.Path))
	out.Flush()
	if ctx.Err() != nil {
		return interruptedf("sent %d of %d messages", sr.sent.Load(), *n)
	}
	if err, spoke := fw.verdict(sr.lastSeq.Load()); spoke {
		return err // the receiver's own word, from its Status frames
	}
	return rch.verdict(a)
}

// bandwidthReport prints the classic bandwidth lines; with nothing moved
// there is no rate to print (never NaN).
func bandwidthReport(w io.Writer, what string, msgs int64, frame int, el time.Duration) {
	fmt.Fprintf(w, "%s %d messages of %d bytes in %.3f s\n", what, msgs, frame, el.Seconds())
	if msgs == 0 {
		fmt.Fprintf(w, "throughput: none (nothing %s)\n", what)
		return
	}
	if el <= 0 {
		fmt.Fprintf(w, "throughput: n/a (too short to time)\n")
		return
	}
	bytes := float64(msgs) * float64(frame)
	fmt.Fprintf(w, "throughput: %.2f MB/s, %.2f Mbps\n", bytes/el.Seconds()/1e6, bytes*8/el.Seconds()/1e6)
	fmt.Fprintf(w, "per-packet overhead: %.2f µs\n", float64(el.Microseconds())/float64(msgs))
}
