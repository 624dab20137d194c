package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/cast"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/datapath/drop"
	"github.com/walcast/walcast/wire"
)

func init() {
	register(command{name: "recv", summary: "receive records from a `cast send`; -json prints one object per record and per event", run: runRecv})
}

func runRecv(args []string) error {
	fs := newFlagSet("recv", "-listen ADDR [-peer ADDR] [flags]", "Receive a casting stream on -listen and deliver its records in order from -from,\nNAKing gaps to -peer (the sender's -bind address; without -peer the source of the\nfirst valid data record or heartbeat is used). With -json, one JSON object per\nline for every delivered record ({\"seq\":…,\"type\":…,\"len\":…}) and every event\n({\"event\":\"faulted\"|\"reconnect\"|\"sender_restarted\"|\"peer_silent\"|\"skip\"|\"late_start\"|\"ended\"|\"error\",…};\na skip names the seqs a restarted sender never made durable: lost_from…lost_to\nwere delivered and must be dropped; ended: the sender ended the stream at seq and\nevery record up to it was delivered). Exits after -n records, once the sender ended\nthe stream, on a sticky outcome\n(status 3), or on Ctrl-C.")
	listen := fs.String("listen", "0.0.0.0:9000", "address HOST:PORT to receive on")
	peerS := fs.String("peer", "", "the sender's address HOST:PORT, where NAKs go (default: the source of the first valid data record or heartbeat)")
	n := fs.Int64("n", 0, "exit after this many records (0: run until Ctrl-C or a sticky outcome)")
	jsonOut := fs.Bool("json", false, "print one JSON object per delivered record and per event")
	groupS := fs.String("group", "", "join the multicast GROUP:PORT instead of -listen; NAKs go to the control group (see -control), so -peer is not needed")
	var mf mcastFlags
	mf.add(fs, true)
	fromS := fs.String("from", "1", "first seq to deliver, or now: the first record (or heartbeat) heard; a start after seq 1 is reported (late_start). Records missing from -from on are NAKed; a stream a -reorder window ahead ends in reconnect")
	var rf recvFlags
	rf.add(fs)
	fs.Float64Var(&rf.consumeRate, "consume-rate", 0, "take at most this many records per second from the receive ring (a slow consumer, for testing flow control; 0: as fast as they come)")
	var nf netFlags
	nf.add(fs, "mmsg", true)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := nf.check(); err != nil {
		return err
	}
	if err := rf.check(); err != nil {
		return err
	}
	if *fromS == "now" {
		rf.startNow = true
	} else if v, err := strconv.ParseUint(*fromS, 10, 64); err != nil || v == 0 || v == 1<<64-1 {
		return usagef("-from %q: want a seq ≥ 1 or now", *fromS)
	} else {
		rf.start = v
	}
	if err := checkRange("consume-rate", rf.consumeRate, 0, 1e9); err != nil {
		return err
	}
	if err := checkRange("n", *n, 0, 1<<62); err != nil {
		return err
	}
	local, err := addrFlag("listen", *listen, false)
	if err != nil {
		return err
	}
	peer, err := addrFlag("peer", *peerS, false)
	if err != nil {
		return err
	}
	if *groupS != "" {
		g, err := addrFlag("group", *groupS, true)
		if err != nil {
			return err
		}
		if ok, err := mf.resolve("group", g); err != nil {
			return err
		} else if !ok {
			return usagef("-group %s: not a multicast address", g)
		}
		if flagGiven(fs, "peer") || flagGiven(fs, "listen") {
			return usagef("-group replaces -listen and -peer")
		}
		if nf.mc, err = mf.receiver(); err != nil {
			return err
		}
		local, peer = mf.local(), mf.ctrl
	} else if _, err := mf.resolve("listen", local); err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()
	out := bufio.NewWriterSize(os.Stdout, 1<<16)
	defer out.Flush()
	res, err := receive(ctx, &nf, &rf, local, peer, *n, *jsonOut, out, nil)
	if err != nil {
		return err
	}
	if !*jsonOut {
		res.print(out)
	}
	out.Flush()
	return res.verdict(ctx, *n)
}

// verdict is the exit status of a receiving run asked for n records (0:
// until Ctrl-C): a sticky outcome first, then an interruption, then a
// sender that went silent before the n-th record.
func (r recvResult) verdict(ctx context.Context, n int64) error {
	switch {
	case r.outcome == protocol.Reconnect && r.delivered == 0:
		return outcomef("stopped before the first record: %s (the stream is ahead of the start by a reorder window or more: catch up over `cast replay tail`, or start at -from now)", strings.TrimPrefix(r.outcomeErr.Error(), "cast: "))
	case r.outcome != protocol.Live:
		return outcomef("stopped after %d records: %s", r.delivered, strings.TrimPrefix(r.outcomeErr.Error(), "cast: "))
	case ctx.Err() != nil && (n == 0 || r.delivered < n):
		if n == 0 {
			return interruptedf("received %d records", r.delivered)
		}
		return interruptedf("received %d of %d records", r.delivered, n)
	case n > 0 && r.delivered < n:
		return failf("the sender went silent after %d of %d records", r.delivered, n)
	}
	return nil
}

type recvResult struct {
	delivered, first, last int64
	ended                  bool   // the sender ended the stream (session end marker)
	final                  uint64 // its final seq
	skips, lost            uint64 // Skip markers seen; delivered seqs they declared without a record
	inOrder                bool
	elapsed                time.Duration
	stats                  protocol.ReceiverStats
	outcome                protocol.OutcomeKind
	outcomeErr             error
	dropped                uint64
	path                   string
	silent                 bool   // ended because the sender went silent
	lateStart              uint64 // -from now began after seq 1, here
}

func (r recvResult) print(w io.Writer) {
	rate := 0.0
	if r.elapsed > 0 {
		rate = float64(r.delivered) / r.elapsed.Seconds()
	}
	fmt.Fprintf(w, "received %d records (seq %d..%d, in order: %v) in %.3f s: %.0f rec/s over %s\n", r.delivered, r.first, r.last, r.inOrder, r.elapsed.Seconds(), rate, r.path)
	fmt.Fprintf(w, "gaps NAKed %d (%d seqs), duplicates %d, heartbeats %d, bad %d, dropped by -drop %d\n",
		r.stats.NaksSent, r.stats.NakSeqs, r.stats.Duplicates, r.stats.Heartbeats, r.stats.Bad.Total(), r.dropped)
	if r.skips > 0 {
		fmt.Fprintf(w, "skips %d: %d delivered records have no record in the sender's log (see the skip lines)\n", r.skips, r.lost)
	}
	if r.ended {
		fmt.Fprintf(w, "stream ended by the sender at seq %d\n", r.final)
	}
	fmt.Fprintf(w, "outcome: %v\n", r.outcome)
}

func lostCount(n protocol.SkipNotice) uint64 {
	if n.LostTo == 0 {
		return 0
	}
	return n.LostTo - n.LostFrom + 1
}

func skipReason(r uint32) string {
	switch r {
	case wire.SkipRestart:
		return "restart"
	case wire.SkipRepair:
		return "repair"
	}
	return fmt.Sprintf("reason %d", r)
}

// skipLine says in words what a Skip marker meant for this receiver.
func skipLine(n protocol.SkipNotice) string {
	sk := n.Skip
	s := fmt.Sprintf("skip: seqs %d…%d have no record in the sender's log (%s); delivery continues after %d", sk.From, sk.Seq, skipReason(sk.Reason), sk.Seq)
	if n.LostTo != 0 {
		if sk.Reason == wire.SkipRestart {
			s += fmt.Sprintf("; LOST: seqs %d…%d were delivered but never became durable at the sender — drop them", n.LostFrom, n.LostTo)
		} else {
			s += fmt.Sprintf("; seqs %d…%d were delivered intact, the log lost its copy", n.LostFrom, n.LostTo)
		}
	}
	return s
}

// receive runs a Receiver loop until n records, ctx's end or a sticky
// outcome. Records and events go to w as JSON lines when asJSON; echo,
// when not nil, runs inside the loop for every record (the classic
// receiver echoes).
func receive(ctx context.Context, nf *netFlags, rf *recvFlags, local, peer netip.AddrPort, n int64, asJSON bool, w *bufio.Writer, withSender func(lc *cast.LoopConfig, peer netip.AddrPort) error) (recvResult, error) {
	res := recvResult{inOrder: true, outcome: protocol.Live}
	p, err := nf.open(local, peer)
	if err != nil {
		return res, err
	}
	res.path = features(p)
	var first *batch.Vec
	var from netip.AddrPort
	if !peer.IsValid() {
		fmt.Fprintf(os.Stderr, "listening on %s, waiting for a sender\n", p.LocalAddr())
		var ignored int
		if first, from, ignored, err = learnPeer(ctx, p); err != nil {
			p.Close()
			if ctx.Err() != nil {
				return res, nil
			}
			return res, err
		}
		if ignored > 0 {
			fmt.Fprintf(os.Stderr, "ignored %d datagrams that held no valid data record or heartbeat before hearing %s\n", ignored, from)
		}
		peer = from
	}
	rc := rf.config()
	rc.Sender = peer
	rcv, err := protocol.NewReceiver(rc)
	if err != nil {
		p.Close()
		return res, err
	}
	lc, err := nf.loop(p)
	if err != nil {
		p.Close()
		return res, err
	}
	lc.Receiver = rcv
	lc.RecvRing = 8192
	if withSender != nil {
		if err := withSender(&lc, peer); err != nil {
			p.Close()
			return res, err
		}
	}
	l, err := cast.NewLoop(lc)
	if err != nil {
		p.Close()
		return res, err
	}
	if first != nil {
		for i := 0; i < first.Len(); i++ {
			if d, src := first.Msg(i); src == from {
				l.Feed(d, src)
			}
		}
	}
	if err := l.Start(); err != nil {
		p.Close()
		return res, err
	}
	if nf.mc.Enabled() {
		fmt.Fprintf(os.Stderr, "receiving groups %v on %s, NAKs to %s, over %s\n", nf.mc.Groups, ifaceName(nf.mc.Iface), peer, res.path)
	} else {
		fmt.Fprintf(os.Stderr, "receiving on %s from %s over %s\n", p.LocalAddr(), peer, res.path)
	}
	ring := l.Received()
	var start, lastAt time.Time
	var buf []byte
	idle := 0
	silent := false // the sender went silent: end once the ring is drained
loop:
	for ctx.Err() == nil && (n == 0 || res.delivered < n) && !(res.ended && (res.delivered == 0 || uint64(res.last) >= res.final)) {
		got := false
		for {
			if rf.consumeRate > 0 && res.delivered > 0 && float64(res.delivered) >= time.Since(start).Seconds()*rf.consumeRate {
				break // a slow consumer: the ring fills, the window closes, the sender waits
			}
			typ, seq, payload, ok := ring.Peek()
			if !ok {
				break
			}
			got = true
			if typ == wire.TypeSkip {
				// A Skip marker: the seqs before it that it stands for have
				// no record (the event, printed from the loop's events,
				// names the ones already delivered).
				res.skips++
				res.last = int64(seq)
				ring.Pop()
				continue
			}
			if res.delivered == 0 {
				start = time.Now()
				res.first = int64(seq)
				if asJSON && rf.startNow && seq > 1 {
					// The loop announced it before this record; the ring
					// and the event channel do not keep that order.
					writeEvent(w, cast.Event{Kind: cast.EventLateStart, Seq: seq})
				}
			} else if int64(seq) != res.last+1 {
				res.inOrder = false
			}
			res.last = int64(seq)
			res.delivered++
			lastAt = time.Now()
			if asJSON {
				buf = append(buf[:0], `{"seq":`...)
				buf = strconv.AppendUint(buf, seq, 10)
				buf = append(buf, `,"type":`...)
				buf = strconv.AppendUint(buf, uint64(typ), 10)
				buf = append(buf, `,"len":`...)
				buf = strconv.AppendInt(buf, int64(len(payload)), 10)
				buf = append(buf, "}\n"...)
				w.Write(buf)
			}
			ring.Pop()
			if n > 0 && res.delivered >= n {
				break
			}
		}
		select {
		case e := <-l.Events():
			if asJSON && e.Kind != cast.EventLateStart {
				writeEvent(w, e)
			}
			if e.Kind == cast.EventSkip {
				res.lost += lostCount(e.Skip)
				if !asJSON {
					fmt.Fprintln(os.Stderr, skipLine(e.Skip))
				}
			}
			switch e.Kind {
			case cast.EventFaulted, cast.EventReconnect, cast.EventSenderRestarted:
				res.outcome, res.outcomeErr = e.Outcome.Kind, e.Outcome.Err()
				break loop
			case cast.EventError:
				l.Close()
				return res, e.Err
			case cast.EventLateStart:
				res.lateStart = e.Seq
				if !asJSON {
					fmt.Fprintf(os.Stderr, "delivery begins at seq %d (-from now): seqs 1..%d are not delivered\n", e.Seq, e.Seq-1)
				}
			case cast.EventEnded:
				res.ended, res.final = true, e.Seq
			case cast.EventPeerSilent:
				// End on silence once the ring is drained too: a slow
				// consumer (-consume-rate) may still hold records of a
				// sender that finished.
				silent = rf.endOnSilence || (n > 0 && res.delivered > 0)
			case cast.EventPeerHeard:
				silent = false
			}
			got = true
		case <-l.Done():
			break loop
		default:
		}
		if silent && ring.Len() == 0 {
			res.silent = true
			break loop
		}
		if got {
			idle = 0
			continue
		}
		idle++
		if idle > 100 {
			w.Flush()
			time.Sleep(200 * time.Microsecond)
		}
	}
	if res.delivered > 0 {
		res.elapsed = lastAt.Sub(start)
	}
	if err := l.Close(); err != nil {
		return res, err
	}
	res.stats = l.ReceiverStats()
	if d, ok := p.(*drop.Path); ok {
		res.dropped, _ = d.Dropped()
	}
	return res, nil
}

// recvFlags tune the Receiver. Against a walcast sender its Status keeps
// the sender within -reorder records of the last delivered one and the
// re-NAK delay follows the RTT; against a reference sender a gap whose
// retransmit is lost is asked for again after -debounce while the stream
// runs on, so rate × debounce must stay well below reorder.
type recvFlags struct {
	reorder  int
	debounce time.Duration
	maxFrame int
	retries  int
	silence  time.Duration
	// start and startNow (set from `cast recv -from`; other commands
	// start at seq 1) are where delivery begins.
	start    uint64
	startNow bool
	// endOnSilence (not a flag) ends the run when the sender goes silent
	// (PeerSilent); without it only a run asked for n records ends then,
	// once something arrived.
	endOnSilence bool
	id           uint64 // receiver id (-id; 0: random)
	// consumeRate (cast recv -consume-rate) paces the consumer: records
	// per second taken from the ring, 0 unpaced.
	consumeRate float64
	noStatus    bool // -nostatus: no Status frames, the reference receiver's bytes
}

func (rf *recvFlags) add(fs *flag.FlagSet) {
	d := protocol.DefaultReceiverConfig()
	fs.IntVar(&rf.reorder, "reorder", d.ReorderSlots, "reorder window in records (power of two); the receiver's Status keeps a walcast sender within it")
	fs.DurationVar(&rf.debounce, "debounce", time.Duration(d.NakDebounce), "longest time between two NAKs of the same gap (against a walcast sender the delay follows the RTT below it)")
	fs.IntVar(&rf.maxFrame, "maxframe", d.MaxFrame, "largest frame in bytes (≥ the sender's); sets the reorder slot size")
	fs.IntVar(&rf.retries, "retries", d.MaxNakRetries, "NAKs of one gap before the receiver gives up (faulted)")
	fs.DurationVar(&rf.silence, "silence", time.Duration(d.HeartbeatInterval)*time.Duration(d.SilenceIntervals), "give up (faulted) on a sender silent this long while a gap is open; a multiple of the sender's 100 ms heartbeat interval")
	fs.Uint64Var(&rf.id, "id", 0, "receiver id carried in Status (0: random); a sender's -flow tagged -tagged list names it")
	fs.BoolVar(&rf.noStatus, "nostatus", false, "send no Status frames: NAKs only, the reference receiver's bytes (no flow control, fixed re-NAK timers)")
}

func (rf *recvFlags) check() error {
	if rf.reorder < 1 || rf.reorder&(rf.reorder-1) != 0 || rf.reorder > 1<<24 {
		return usagef("-reorder %d: want a power of two 1..%d", rf.reorder, 1<<24)
	}
	if err := checkRange("debounce", rf.debounce, time.Microsecond, time.Minute); err != nil {
		return err
	}
	if err := checkRange("retries", rf.retries, 1, 65534); err != nil {
		return err
	}
	hb := time.Duration(protocol.DefaultHeartbeatInterval)
	if err := checkRange("silence", rf.silence, hb, time.Hour); err != nil {
		return err
	}
	return checkRange("maxframe", rf.maxFrame, wire.HeaderSize+8, 65507)
}

func (rf *recvFlags) config() protocol.ReceiverConfig {
	c := protocol.DefaultReceiverConfig()
	c.ReorderSlots, c.NakDebounce, c.MaxFrame, c.ID = rf.reorder, int64(rf.debounce), rf.maxFrame, rf.id
	c.Start, c.StartNow = rf.start, rf.startNow
	c.NoStatus = rf.noStatus
	if rf.debounce == 0 {
		c.NakDebounce = -1 // -debounce 0: every pump (a zero field would mean the default)
	}
	if rf.retries > 0 {
		c.MaxNakRetries = rf.retries
	}
	if rf.silence > 0 {
		c.SilenceIntervals = int((rf.silence + time.Duration(c.HeartbeatInterval) - 1) / time.Duration(c.HeartbeatInterval))
	}
	return c
}

// writeEvent prints one event as a JSON line.
func writeEvent(w io.Writer, e cast.Event) {
	o := e.Outcome
	switch e.Kind {
	case cast.EventFaulted:
		cause := "retry_budget"
		if o.Cause == protocol.Silence {
			cause = "silence"
		}
		fmt.Fprintf(w, `{"event":"faulted","last_delivered":%d,"gap_start":%d,"gap_end":%d,"cause":%q}`+"\n", o.LastDelivered, o.GapStart, o.GapEnd, cause)
	case cast.EventReconnect:
		fmt.Fprintf(w, `{"event":"reconnect","last_delivered":%d,"seq":%d}`+"\n", o.LastDelivered, o.Seq)
	case cast.EventSenderRestarted:
		fmt.Fprintf(w, `{"event":"sender_restarted","last_delivered":%d,"highest":%d}`+"\n", o.LastDelivered, o.Highest)
	case cast.EventPeerSilent:
		fmt.Fprintf(w, `{"event":"peer_silent","last_delivered":%d}`+"\n", o.LastDelivered)
	case cast.EventError:
		fmt.Fprintf(w, `{"event":"error","error":%q}`+"\n", e.Err.Error())
	case cast.EventSkip:
		sk := e.Skip.Skip
		fmt.Fprintf(w, `{"event":"skip","seq":%d,"from":%d,"reason":%q,"lost_from":%d,"lost_to":%d}`+"\n", sk.Seq, sk.From, skipReason(sk.Reason), e.Skip.LostFrom, e.Skip.LostTo)
	case cast.EventLateStart:
		fmt.Fprintf(w, `{"event":"late_start","seq":%d}`+"\n", e.Seq)
	case cast.EventEnded:
		fmt.Fprintf(w, `{"event":"ended","seq":%d}`+"\n", e.Seq)
	}
}

// learnPeer waits for the first datagram on p that starts with a frame a
// sender sends (see senderFrame) and returns the datagrams of that batch
// (copies), that datagram's source and how many datagrams before it were
// ignored: the CLI's way to find a sender that was not named with -peer.
// Junk, a bad CRC or a NAK never names the peer. The core itself never
// learns addresses from traffic.
func learnPeer(ctx context.Context, p datapath.Path) (v *batch.Vec, from netip.AddrPort, ignored int, err error) {
	v = batch.New(64, 65535)
	w, _ := p.(cast.Waiter)
	for ctx.Err() == nil {
		var n int
		if w != nil {
			n, err = w.RecvWait(v, time.Now().Add(100*time.Millisecond))
		} else {
			n, err = p.Recv(v)
			if n == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		if err != nil {
			return nil, netip.AddrPort{}, ignored, err
		}
		for i := 0; i < n; i++ {
			d, src := v.Msg(i)
			if senderFrame(d) {
				v.Drop(i) // the datagrams before it are the ignored ones
				return v, src, ignored, nil
			}
			ignored++
		}
	}
	return nil, netip.AddrPort{}, ignored, ctx.Err()
}

// senderFrame reports whether d starts with a frame a casting sender
// sends to its receivers: version, length and CRC right, and either a
// heartbeat or a data record with a seq (not a type of the control range
// 0x10..0x16 that flows the other way or over TCP).
func senderFrame(d []byte) bool {
	h, p, _, err := wire.DecodeFrame(d)
	switch {
	case err != nil:
		return false
	case h.Type == wire.TypeHeartbeat:
		_, err := wire.ParseHeartbeat(p)
		return err == nil
	case h.Type >= 0x10 && h.Type <= 0x16:
		return false
	}
	return len(p) >= 8 && wire.Seq(p) != 0
}
