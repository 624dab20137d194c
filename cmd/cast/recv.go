package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/cast"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath/drop"
	"github.com/walcast/walcast/internal/pace"
	"github.com/walcast/walcast/wire"
)

func init() {
	register(command{name: "recv", summary: "receive records from a `cast send`; -json prints one object per record and per event", run: runRecv})
}

func runRecv(args []string) error {
	fs := newFlagSet("recv", "-listen ADDR [-peer ADDR] [flags]", "Receive a casting stream on -listen and deliver its records in order from -from,\nNAKing gaps to -peer (the sender's -bind address; without -peer the source of the\nfirst valid data record or heartbeat is used). With -json, one JSON object per\nline for every delivered record ({\"seq\":…,\"type\":…,\"len\":…}) and every event\n({\"event\":\"faulted\"|\"reconnect\"|\"sender_restarted\"|\"peer_silent\"|\"skip\"|\"late_start\"|\"ended\"|\"caught_up\"|\"key_unknown\"|\"error\",…};\na skip names the seqs a restarted sender never made durable: lost_from…lost_to\nwere delivered and must be dropped; ended: the sender ended the stream at seq and\nevery record up to it was delivered; caught_up: with -replay, seqs from…to came\nover TCP). Exits after -n records, once the sender ended the stream, on a sticky\noutcome (status 3; with -replay only when the TCP catch-up fails too), or on Ctrl-C.")
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
	fs.Float64Var(&rf.consumeRate, "consume-rate", 0, "deliver at most this many records per second (a slow consumer, for testing flow control; 0: as fast as they come)")
	rf.replay.add(fs)
	var nf netFlags
	nf.add(fs, "mmsg", true)
	var lf liveFlags
	lf.add(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	defer nf.done()
	if err := lf.check(); err != nil {
		return err
	}
	if err := nf.check(); err != nil {
		return err
	}
	if err := rf.check(); err != nil {
		return err
	}
	if err := rf.replay.check(fs); err != nil {
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
	lv := lf.start(recvProgress)
	defer lv.end(ctx)
	rf.keepCounters = lv.keep()
	res, err := consume(ctx, &nf, &rf, local, peer, *n, *jsonOut, out)
	lv.stopProgress()
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
		return outcomef("stopped before the first record: %s (the stream is ahead of the start by a reorder window or more: catch up with -replay, or start at -from now)", strings.TrimPrefix(r.outcomeErr.Error(), "cast: "))
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
	tcp                    uint64 // records delivered by TCP catch-ups (-replay)
	catchUps, recovered    uint64 // catch-ups completed; outcomes they repaired
	keyed                  bool   // -key-file: auth is set
	auth                   cast.AuthStats
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
	if r.tcp > 0 || r.recovered > 0 {
		fmt.Fprintf(w, "caught up over TCP: %d records in %d catch-ups, %d outcomes repaired\n", r.tcp, r.catchUps, r.recovered)
	}
	if r.keyed {
		fmt.Fprintln(w, authLine(r.auth))
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

// consume follows the stream on local with a cast.Consumer until n
// records (0: no limit), ctx's end, the sender's end of the stream, its
// silence (see recvFlags.endOnSilence) or a sticky outcome. peer is the
// sender (zero: the Consumer learns it from its first frame). Records
// and events go to w as JSON lines when asJSON, written on the
// Consumer's loop thread in the order they happened.
func consume(ctx context.Context, nf *netFlags, rf *recvFlags, local, peer netip.AddrPort, n int64, asJSON bool, w *bufio.Writer) (recvResult, error) {
	res := recvResult{inOrder: true, outcome: protocol.Live}
	idle, err := affinity.ParseStrategy(nf.idle)
	if err != nil {
		return res, err
	}
	p, err := nf.open(local, peer)
	if err != nil {
		return res, err
	}
	res.path = features(p)
	cc := cast.ConsumerConfig{Path: p, From: peer, Thread: affinity.OnCPU(nf.pin), NoCatchUp: true, Keys: nf.keys,
		Advanced: cast.ConsumerAdvanced{Batch: nf.batch, Receiver: rf.tuning(), RaiseGOMAXPROCS: true, StartNow: rf.startNow,
			Counters: cast.Counters{Keep: rf.keepCounters}}}
	if rf.start > 1 {
		cc.Advanced.StartTip = rf.start - 1
	}
	cc.Idle.Strategy = idle
	if nf.mc.Enabled() {
		// NAKs and Status go to the control group; the data comes from a
		// sender the Consumer learns from its first frame.
		cc.From, cc.Advanced.Control = netip.AddrPort{}, peer
	}
	rf.catchUp(&cc)
	out := &lockedWriter{w: w}
	stopFlush := out.flushEvery(50 * time.Millisecond)
	defer stopFlush()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	// start is when the first record came; lastAt how long after it the
	// last one did: a monotonic read a record (time.Since), about half
	// of what time.Now costs with the wall clock (cast's
	// BenchmarkClockRead).
	var start time.Time
	var lastAt time.Duration
	bucket := pace.New(rf.consumeRate) // nil: unpaced
	var buf []byte
	deliver := func(r cast.Record) error {
		if r.Type == wire.TypeSkip {
			// A Skip marker: the seqs before it that it stands for have
			// no record (its event, just before, names the ones already
			// delivered).
			res.skips++
			res.last = int64(r.Seq)
			return nil
		}
		if bucket != nil {
			// A slow consumer: the receiver's window closes behind it and
			// the sender waits.
			for d := bucket.Wait(time.Now().UnixNano()); d > 0; d = bucket.Wait(time.Now().UnixNano()) {
				time.Sleep(d)
			}
			bucket.Spend()
		}
		if res.delivered == 0 {
			start = time.Now()
			res.first = int64(r.Seq)
		} else if int64(r.Seq) != res.last+1 {
			res.inOrder = false
		}
		res.last = int64(r.Seq)
		res.delivered++
		lastAt = time.Since(start)
		if asJSON {
			buf = append(buf[:0], `{"seq":`...)
			buf = strconv.AppendUint(buf, r.Seq, 10)
			buf = append(buf, `,"type":`...)
			buf = strconv.AppendUint(buf, uint64(r.Type), 10)
			buf = append(buf, `,"len":`...)
			buf = strconv.AppendInt(buf, int64(len(r.Payload)), 10)
			buf = append(buf, "}\n"...)
			out.Write(buf)
		}
		if n > 0 && res.delivered >= n {
			return cast.ErrStop
		}
		return nil
	}
	cc.OnEvent = func(e cast.Event) {
		if asJSON {
			writeEvent(out, e)
		}
		switch e.Kind {
		case cast.EventKeyUnknown:
			fmt.Fprintf(os.Stderr, "cast recv: %v (check -key-file on both ends)\n", e.Err)
		case cast.EventSenderFound:
			peer = e.Sender
			if !nf.mc.Enabled() {
				fmt.Fprintf(os.Stderr, "receiving on %s from %s over %s\n", p.LocalAddr(), peer, res.path)
			}
		case cast.EventFaulted, cast.EventReconnect, cast.EventSenderRestarted:
			res.outcome, res.outcomeErr = e.Outcome.Kind, e.Outcome.Err()
		case cast.EventCaughtUp:
			res.tcp += e.Records
			if !asJSON && !e.Bootstrap {
				fmt.Fprintf(os.Stderr, "caught up over TCP: seqs %d…%d (%d records) in %v; back on UDP\n", e.From, e.To, e.Records, e.Duration.Round(time.Millisecond))
			}
		case cast.EventLive:
			if res.outcome != protocol.Live {
				res.recovered++
				res.outcome, res.outcomeErr = protocol.Live, nil // repaired over TCP
			}
		case cast.EventSkip:
			res.lost += lostCount(e.Skip)
			if !asJSON {
				fmt.Fprintln(os.Stderr, skipLine(e.Skip))
			}
		case cast.EventLateStart:
			res.lateStart = e.Seq
			if !asJSON {
				fmt.Fprintf(os.Stderr, "delivery begins at seq %d (-from now): seqs 1..%d are not delivered\n", e.Seq, e.Seq-1)
			}
		case cast.EventEnded:
			res.ended, res.final = true, e.Seq
		case cast.EventPeerSilent:
			// A run asked for n records ends once something arrived and
			// the sender went silent; the classic receiver on any silence.
			if rf.endOnSilence || (n > 0 && res.delivered > 0) {
				res.silent = true
				stop()
			}
		}
	}
	c, err := cast.NewConsumer(cc)
	if err != nil {
		p.Close()
		return res, err
	}
	defer nf.kw.attach(c.SetKeys)()
	aw := watchAuth(nf.keys != nil, "cast recv", "the sender", os.Stderr, func() cast.AuthStats { return c.Stats().Auth })
	defer aw.end()
	switch {
	case nf.mc.Enabled():
		fmt.Fprintf(os.Stderr, "receiving groups %v on %s, NAKs to %s, over %s\n", nf.mc.Groups, ifaceName(nf.mc.Iface), peer, res.path)
	case peer.IsValid():
		fmt.Fprintf(os.Stderr, "receiving on %s from %s over %s\n", p.LocalAddr(), peer, res.path)
	default:
		fmt.Fprintf(os.Stderr, "listening on %s, waiting for a sender\n", p.LocalAddr())
	}
	err = c.Run(runCtx, deliver)
	stopFlush()
	aw.end()
	st := c.Stats()
	res.stats, res.catchUps = st.Receiver, st.CatchUps
	res.keyed, res.auth = nf.keys != nil, st.Auth
	res.elapsed = lastAt
	if d, ok := p.(*drop.Path); ok {
		res.dropped, _ = d.Dropped()
	}
	switch {
	case err == nil, ctx.Err() != nil, res.silent && runCtx.Err() != nil:
		return res, nil
	case res.outcome != protocol.Live:
		return res, nil // the outcome's verdict (exit 3)
	case errors.Is(err, cast.ErrSenderBehind):
		res.outcome, res.outcomeErr = protocol.SenderRestarted, err
		return res, nil
	}
	if asJSON {
		writeEvent(w, cast.Event{Kind: cast.EventError, Err: err})
	}
	return res, err
}

// lockedWriter is the output of a consume run: written on the
// Consumer's loop thread, flushed by a ticker so that a reader of a
// pipe sees lines while the stream runs.
type lockedWriter struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// flushEvery flushes every d until the returned stop (idempotent) is
// called, and once more then.
func (l *lockedWriter) flushEvery(d time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				l.mu.Lock()
				l.w.Flush()
				l.mu.Unlock()
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			wg.Wait()
			l.mu.Lock()
			l.w.Flush()
			l.mu.Unlock()
		})
	}
}

// recvFlags tune the Receiver. Against a walcast sender its Status keeps
// the sender within -reorder records of the last delivered one and the
// re-NAK delay follows the RTT; against a reference sender a gap whose
// retransmit is lost is asked for again after -debounce while the stream
// runs on, so rate × debounce must stay well below reorder.
type recvFlags struct {
	// keepCounters (not a flag: -hold) leaves the loop's slots in the
	// counters file after it closes (cast.Counters.Keep).
	keepCounters bool
	reorder      int
	debounce     time.Duration
	maxFrame     int
	retries      int
	silence      time.Duration
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
	// per second delivered, 0 unpaced.
	consumeRate float64
	noStatus    bool // -nostatus: no Status frames, the reference receiver's bytes
	// replay (cast recv -replay and its TLS flags): TCP catch-up.
	replay replayFlags
}

func (rf *recvFlags) add(fs *flag.FlagSet) {
	d := protocol.DefaultReceiverConfig()
	fs.IntVar(&rf.reorder, "reorder", d.ReorderSlots, "reorder window in records (power of two); the receiver's Status keeps a walcast sender within it")
	fs.DurationVar(&rf.debounce, "debounce", d.NakDebounce, "longest time between two NAKs of the same gap (against a walcast sender the delay follows the RTT below it)")
	fs.IntVar(&rf.maxFrame, "maxframe", d.MaxFrame, "largest frame in bytes (≥ the sender's); sets the reorder slot size")
	fs.IntVar(&rf.retries, "retries", d.MaxNakRetries, "NAKs of one gap before the receiver gives up (faulted)")
	fs.DurationVar(&rf.silence, "silence", d.HeartbeatInterval*time.Duration(d.SilenceIntervals), "give up (faulted) on a sender silent this long while a gap is open; a multiple of the sender's 100 ms heartbeat interval")
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
	hb := protocol.DefaultHeartbeatInterval
	if err := checkRange("silence", rf.silence, hb, time.Hour); err != nil {
		return err
	}
	return checkRange("maxframe", rf.maxFrame, wire.HeaderSize+8, 65507)
}

// tuning is the receiver tuning the flags ask for.
func (rf *recvFlags) tuning() cast.ReceiverTuning {
	t := cast.ReceiverTuning{ReorderSlots: rf.reorder, NakDebounce: rf.debounce, MaxFrame: rf.maxFrame, ID: rf.id, NoStatus: rf.noStatus}
	if rf.debounce == 0 {
		t.NakDebounce = -1 // -debounce 0: every pump (a zero field would mean the default)
	}
	if rf.retries > 0 {
		t.MaxNakRetries = rf.retries
	}
	if rf.silence > 0 {
		hb := protocol.DefaultHeartbeatInterval
		t.SilenceIntervals = int((rf.silence + hb - 1) / hb)
	}
	return t
}

// config is the receiver config of a hand-built Receiver (echo, the
// classic receiver), which starts at seq 1.
func (rf *recvFlags) config() protocol.ReceiverConfig { return rf.tuning().Config() }

// writeEvent prints one Consumer event as a JSON line, if it is one the
// -json output names (see `cast recv -h`), under its kind's name.
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
		// The Consumer's tip: the loop's Outcome is still Live here and
		// says nothing of what was delivered.
		fmt.Fprintf(w, `{"event":"peer_silent","last_delivered":%d}`+"\n", e.Tip)
	case cast.EventSkip:
		sk := e.Skip.Skip
		fmt.Fprintf(w, `{"event":"skip","seq":%d,"from":%d,"reason":%q,"lost_from":%d,"lost_to":%d}`+"\n", sk.Seq, sk.From, skipReason(sk.Reason), e.Skip.LostFrom, e.Skip.LostTo)
	case cast.EventLateStart:
		fmt.Fprintf(w, `{"event":"late_start","seq":%d}`+"\n", e.Seq)
	case cast.EventEnded:
		fmt.Fprintf(w, `{"event":"ended","seq":%d}`+"\n", e.Seq)
	case cast.EventError:
		fmt.Fprintf(w, `{"event":"error","error":%q}`+"\n", e.Err.Error())
	case cast.EventKeyUnknown:
		fmt.Fprintf(w, `{"event":"key_unknown","error":%q}`+"\n", e.Err.Error())
	case cast.EventCaughtUp:
		if !e.Bootstrap || e.Records > 0 {
			fmt.Fprintf(w, `{"event":"caught_up","from":%d,"to":%d,"records":%d}`+"\n", e.From, e.To, e.Records)
		}
	}
}
