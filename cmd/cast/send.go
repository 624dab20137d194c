package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/walcast/walcast/cast"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/internal/pace"
	"github.com/walcast/walcast/replay"
	"github.com/walcast/walcast/wal"
	"github.com/walcast/walcast/wire"
)

func init() {
	register(command{name: "send", summary: "send records to a `cast recv` (casting over UDP, optional WAL)", run: runSend})
}

// sendOpts are the knobs of one sending run, shared by send, bandwidth and demo.
type sendOpts struct {
	n       int
	payload int
	rate    float64
	// lastSeq, when set, holds the seq of the last record sent.
	lastSeq *atomic.Uint64
}

// check range-checks the flags of a sending run.
func (o sendOpts) check() error {
	if err := checkRange("n", o.n, 1, 1<<40); err != nil {
		return err
	}
	if err := checkRange("size", o.payload, 8, protocol.DefaultMaxFrame-wire.HeaderSize); err != nil {
		return err
	}
	return checkRange("rate", o.rate, 0, 1e9)
}

// sending is a sending run started by startSending.
type sending struct {
	sent      atomic.Int64  // records sent
	lastSeq   atomic.Uint64 // the seq of the last record sent
	done      chan struct{} // closed after the last record
	startNs   atomic.Int64  // wall clock (UnixNano) of the loop's first poll
	p         *cast.Producer
	fw        *flowWatch // the receivers' Status, as they speak
	rch       *reach     // watched until stopWatch closes
	stopWatch chan struct{}
}

// startSending starts a Producer of pc producing o's records inside its
// loop (see producer), with a flowWatch on it and a reach watch on its
// path (pc.Path, which the Producer owns; it is closed when the Producer
// does not start).
func startSending(pc cast.ProducerConfig, o sendOpts) (*sending, error) {
	s := &sending{done: make(chan struct{}), stopWatch: make(chan struct{})}
	o.lastSeq = &s.lastSeq
	prod := producer(o, &s.sent, s.done)
	pc.Advanced.OnPoll = func(l *cast.Loop, now int64) {
		if s.startNs.Load() == 0 {
			s.startNs.Store(time.Now().UnixNano())
		}
		prod(l, now)
	}
	path := pc.Path
	p, err := cast.NewProducer(pc)
	if err != nil {
		path.Close() // NewProducer leaves a given Path open when the WAL refuses
		return nil, unproduce(err)
	}
	s.p = p
	s.fw = newFlowWatch(p)
	s.rch = newReach(path, func() uint64 { return p.Stats().Sender.Naks })
	go s.rch.watch(s.stopWatch)
	return s, nil
}

// elapsed is the time since the first poll of the loop (0 before it).
func (s *sending) elapsed() time.Duration {
	t := s.startNs.Load()
	if t == 0 {
		return 0
	}
	return time.Since(time.Unix(0, t))
}

// unproduce drops the "cast: producer: " prefix of a Producer's error:
// the CLI's reason names the layer that failed (the WAL, the socket).
func unproduce(err error) error {
	if err == nil {
		return nil
	}
	if msg, ok := strings.CutPrefix(err.Error(), "cast: producer: "); ok {
		return &prefixless{msg: msg, err: err}
	}
	return err
}

// prefixless is an error printed without its layer's prefix, still
// matching what it wraps (errors.Is).
type prefixless struct {
	msg string
	err error
}

func (e *prefixless) Error() string { return e.msg }
func (e *prefixless) Unwrap() error { return e.err }

// producer returns an OnPoll callback that sends o.n records of
// o.payload bytes, paced at o.rate records/s by a token bucket (0: as
// fast as the loop takes them). sent counts records sent; done is closed
// after the last.
func producer(o sendOpts, sent *atomic.Int64, done chan struct{}) func(l *cast.Loop, now int64) {
	pr := newPaced(o, sent, done)
	return func(l *cast.Loop, now int64) { pr.poll(l, now) }
}

// streamSender is what a paced producer needs of the loop (*cast.Loop).
type streamSender interface {
	Send(typ uint16, payload []byte) (uint64, error)
	SendBatch(typ uint16, payloads [][]byte) (int, error)
	End() error
}

// pollMax is the most records a paced producer sends in one poll.
const pollMax = 256

// paced produces a sending run's records from the loop's OnPoll.
type paced struct {
	o        sendOpts
	sent     *atomic.Int64
	done     chan struct{}
	payload  []byte
	run      [][]byte     // pollMax−1 views of payload, for SendBatch
	bucket   *pace.Bucket // nil: unpaced
	produced int
	fin      bool
}

func newPaced(o sendOpts, sent *atomic.Int64, done chan struct{}) *paced {
	pr := &paced{o: o, sent: sent, done: done, payload: make([]byte, o.payload), bucket: pace.New(o.rate)}
	pr.run = make([][]byte, pollMax-1)
	for i := range pr.run {
		pr.run[i] = pr.payload
	}
	return pr
}

// poll sends what the bucket allows at now (at most pollMax records a
// call): the first with Send, for its seq, the rest in one SendBatch,
// which sends them with the next seqs at a fraction of a Send's
// per-record cost. A record the loop refuses (batch full, WAL
// backpressure, a closed flow-control window) spends no token: it goes
// out on a later poll, and a stall of any cause is never made up for
// with a burst.
func (pr *paced) poll(l streamSender, now int64) {
	if pr.fin {
		return
	}
	if k := pr.bucket.Avail(now, min(pollMax, pr.o.n-pr.produced)); k > 0 {
		if len(pr.payload) >= 16 {
			binary.LittleEndian.PutUint64(pr.payload[8:], uint64(now)) // send time, for latency
		}
		if seq, err := l.Send(1, pr.payload); err == nil {
			n := 1
			if k > 1 {
				m, _ := l.SendBatch(1, pr.run[:k-1]) // a refusal: the rest go out on a later poll
				n += m
				seq += uint64(m)
			}
			pr.bucket.SpendN(n)
			if pr.o.lastSeq != nil {
				pr.o.lastSeq.Store(seq)
			}
			pr.produced += n
			pr.sent.Store(int64(pr.produced))
		}
	}
	if pr.produced == pr.o.n {
		pr.fin = true
		_ = l.End() // receivers that negotiated learn where the stream ends
		close(pr.done)
	}
}

// waitQuiet returns once the sender has served no NAK for quiet (the
// receiver has everything it asked for), or ctx ends, or max passes.
func waitQuiet(ctx context.Context, p *cast.Producer, quiet, max time.Duration) {
	end := time.Now().Add(max)
	last, since := p.Stats().Sender.Naks, time.Now()
	for ctx.Err() == nil && time.Now().Before(end) && time.Since(since) < quiet {
		time.Sleep(10 * time.Millisecond)
		if n := p.Stats().Sender.Naks; n != last {
			last, since = n, time.Now()
		}
	}
}

func runSend(args []string) error {
	fs := newFlagSet("send", "-to ADDR [flags]", "Send -n records of -size bytes to a `cast recv` at -to over the casting protocol,\noptionally appending each to a WAL first (then NAKs that miss the hot ring are\nserved from disk). NAKs arrive at -bind. After the last record it serves NAKs until\nthe receiver's Status says every record was delivered (waiting at most -linger\nwithout progress). Exits 0 then; 3 when the receiver reported a sticky outcome,\nleft, went silent or stalled first; 1 when it made no progress for -linger.\nA receiver that sends no Status is judged by ICMP port unreachable:\n1 nobody listened, 3 it went away.")
	to := fs.String("to", "", "receiver address HOST:PORT, or a multicast GROUP:PORT (required)")
	bind := fs.String("bind", "0.0.0.0:0", "local address HOST:PORT; NAKs arrive here (with a group: the group's port)")
	var mf mcastFlags
	mf.add(fs, false)
	var o sendOpts
	fs.IntVar(&o.n, "n", 100000, "records to send")
	fs.IntVar(&o.payload, "size", 128, "payload bytes per record (first 8 are the seq); the frame adds 16")
	fs.Float64Var(&o.rate, "rate", 0, "records per second (0: as fast as the path takes them); a token bucket with 2 ms' worth of burst: after a stall (a closed window, a full disk, SIGSTOP) sending resumes at the rate, never racing to catch up")
	walDir := fs.String("wal", "", "append every record to a WAL in this directory (stream files in DIR/<stream>/, as `cast replay serve -wal DIR` reads them)")
	stream := fs.Uint("stream", 1, "stream id: of the WAL (the id `cast replay tail -stream` and `cast recv -stream` ask for), and the stream label of this process's counters (`cast stat`)")
	ring := fs.Int("ring", protocol.DefaultSenderConfig().RingSlots, "records kept hot for retransmission (power of two; RAM: this many × 1472 bytes): at least the receiver's -reorder, so that its repairs come from memory, not the WAL")
	coldRate := fs.Int64("cold-rate", protocol.DefaultColdRate, "with -wal: serve at most this many NAKed records per second from the WAL (a NAK flood cannot amplify beyond it)")
	walRepair := fs.Bool("wal-repair", false, "open a damaged or mislabelled WAL by repairing it (mislabelled segments are renamed to what they hold; damaged records go to a quarantine directory, Skip markers take their place; see `cast wal repair`) instead of refusing it")
	walSegment := fs.Int64("wal-segment", wal.DefaultConfig("").SegmentSize, "WAL segment size in bytes (each segment is preallocated to it)")
	walVerify := fs.Bool("wal-verify", true, "on open, read and check every record of the WAL's sealed segments too (false: trust sealed segments whose index matches; the active one is always checked)")
	replayAt := fs.String("replay", "", "with -wal: serve TCP catch-up from the WAL on this address HOST:PORT (port 0: any; the address is printed), live as records are appended: what `cast recv -replay` and `cast replay tail` connect to")
	var sf serveFlags
	sf.add(fs, "with -replay: ")
	linger := fs.Duration("linger", 2*time.Second, "after the last record, keep serving NAKs until the receiver reports every record delivered (or, if it never sends Status, until no NAK came for -quiet), at most this long without a receiver making progress")
	quiet := fs.Duration("quiet", 500*time.Millisecond, "with -linger and a receiver that sends no Status: stop once no NAK came for this long (raise it on a loaded machine, where a receiver may not run for that long)")
	var nf netFlags
	nf.add(fs, "mmsg", false)
	var lf liveFlags
	lf.add(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *to == "" {
		return usagef("-to HOST:PORT is required")
	}
	if err := lf.check(); err != nil {
		return err
	}
	if err := o.check(); err != nil {
		return err
	}
	defer nf.done()
	if err := nf.check(); err != nil {
		return err
	}
	if err := checkRange("stream", *stream, 0, 1<<32-1); err != nil {
		return err
	}
	if err := checkRange("wal-segment", *walSegment, wal.MinSegmentSize, wal.MaxSegmentSize); err != nil {
		return err
	}
	peer, err := addrFlag("to", *to, true)
	if err != nil {
		return err
	}
	local, err := addrFlag("bind", *bind, false)
	if err != nil {
		return err
	}
	group, err := mf.resolve("to", peer)
	if err != nil {
		return err
	}
	if group {
		nf.mc = mf.sender()
		if !flagGiven(fs, "bind") {
			local = mf.local()
		}
	}
	if *ring < 1 || *ring&(*ring-1) != 0 || *ring > 1<<24 {
		return usagef("-ring %d: want a power of two 1..%d", *ring, 1<<24)
	}
	ctx, cancel := signalContext()
	defer cancel()

	pc, err := nf.producerConfig(local, peer)
	if err != nil {
		return err
	}
	sc := &pc.Advanced.Sender
	sc.Coalesce, sc.ColdRate, sc.RingSlots = nf.coalesce, *coldRate, *ring
	if group {
		sc.MaxReceivers = protocol.MaxReceivers // a flow-control entry for every member
	}
	sc.FlowPolicy, sc.Tagged, err = mf.flowPolicy()
	if err != nil {
		pc.Path.Close()
		return err
	}
	if *replayAt != "" {
		if *walDir == "" {
			pc.Path.Close()
			return usagef("-replay serves catch-up from the WAL: give -wal DIR")
		}
		pc.ReplayAddr = *replayAt
		sc := replay.DefaultServerConfig()
		if _, err := sf.config(&sc); err != nil {
			pc.Path.Close()
			return err
		}
		pc.TLS, pc.Plaintext = sc.TLS, sc.Plaintext
		pc.Advanced.ReplayServer = cast.ReplayServerTuning{AnyClient: sc.AnyClient, HandshakeTimeout: sc.HandshakeTimeout,
			WriteTimeout: sc.WriteTimeout, BufferBytes: sc.BufferBytes, ReadBufferBytes: sc.ReadBufferBytes,
			KeepaliveInterval: sc.KeepaliveInterval, MaxConns: sc.MaxConns, OnDisconnect: sc.OnDisconnect}
	}
	pc.Stream = uint32(*stream)
	lv := lf.start(sendProgress)
	defer lv.end(ctx)
	pc.Advanced.Counters.Keep = lv.keep()
	if *walDir != "" {
		pc.Dir = *walDir
		pc.Advanced.WAL.Repair, pc.Advanced.WAL.VerifySealed, pc.Advanced.WAL.SegmentSize = *walRepair, *walVerify, *walSegment
	}
	sr, err := startSending(pc, o)
	if err != nil {
		if errors.Is(err, wal.ErrDamaged) {
			fmt.Fprintf(os.Stderr, "cast send: the WAL was not extended; `cast wal verify %s` lists the damage, `cast wal repair %s` (or -wal-repair) quarantines it\n", *walDir, *walDir)
		}
		if *walDir != "" {
			return failf("%v", err)
		}
		return err
	}
	defer nf.kw.attach(sr.p.SetKeys)()
	prod, fw, rch, done := sr.p, sr.fw, sr.rch, sr.done
	aw := watchAuth(nf.keys != nil, "cast send", "a receiver", os.Stderr, func() cast.AuthStats { return prod.Stats().Auth })
	defer aw.end()
	if *walDir != "" {
		reportRecovery(os.Stderr, *walDir, prod.Stats().WAL.Recovery)
	}
	if a := prod.ReplayAddr(); a.IsValid() {
		fmt.Fprintf(os.Stderr, "serving catch-up of stream %d on %s\n", *stream, a)
	}
	fmt.Fprintf(os.Stderr, "sending %d records of %d bytes to %s from %s over %s\n", o.n, o.payload+wire.HeaderSize, peer, prod.Addr(), features(pc.Path))
	logFailed := false
wait:
	for {
		select {
		case <-done:
			break wait
		case <-ctx.Done():
			break wait
		case <-prod.Done():
			break wait
		case e := <-prod.Events():
			switch e.Kind {
			case cast.EventLogError:
				logFailed = true
				fmt.Fprintf(os.Stderr, "cast send: WAL: %v: sending paused (records wait for the disk; heartbeats withheld so receivers see the stream stall)\n", e.Err)
			case cast.EventLogRecovered:
				fmt.Fprintf(os.Stderr, "cast send: WAL: writing again; sending resumes\n")
			case cast.EventKeyUnknown:
				fmt.Fprintf(os.Stderr, "cast send: %v (check -key-file on both ends)\n", e.Err)
			default:
				fw.event(e) // the receiver's flow-control events
			}
		}
	}
	el := sr.elapsed()
	rch.mark()
	fw.settle(ctx, sr.lastSeq.Load(), *quiet, *linger)
	ended := false // done closes right after Loop.End
	select {
	case <-done:
		ended = true
	default:
	}
	if ended && fw.heard {
		if err, _ := fw.verdict(sr.lastSeq.Load()); err == nil {
			// Everything was delivered: give the end marker's repeats
			// time to reach a receiver that lost the first one.
			fw.waitLeft(ctx, min(*linger, 2*time.Second))
		}
	}
	close(sr.stopWatch)
	aw.end()
	lv.stopProgress()
	fverdict, spoke := fw.verdict(sr.lastSeq.Load())
	cerr := prod.Close() // the WAL is flushed and closed too
	pst := prod.Stats()
	st := pst.Sender
	if cerr != nil && *walDir == "" {
		return unproduce(cerr)
	}
	n := sr.sent.Load()
	fmt.Printf("sent %d records (%d bytes each) in %.3f s: %.0f rec/s, %.3f Gbit/s\n", n, o.payload+wire.HeaderSize, el.Seconds(),
		float64(n)/el.Seconds(), float64(n)*float64(o.payload+wire.HeaderSize)*8/el.Seconds()/1e9)
	if spoke {
		r := fw.last
		fmt.Printf("receiver %s delivered through seq %d; flow control held the sender back %d times; srtt %.1f µs\n",
			r.Addr, r.Delivered, st.Backpressured, float64(r.SRTT)/1e3)
	} else {
		fmt.Printf("receiver sent no Status (a reference receiver?): no flow control, fixed timers\n")
	}
	if nf.keys != nil {
		fmt.Println(authLine(pst.Auth))
	}
	fmt.Printf("naks %d, retransmits %d (hot ring %d, WAL %d), heartbeats %d\n", st.Naks, st.RetxHot+st.RetxCold, st.RetxHot, st.RetxCold, st.Heartbeats)
	if st.ColdOverBudget+st.ColdRejected > 0 {
		fmt.Printf("cold seqs not served: %d over the -cold-rate budget, %d with every read slot busy (the receiver asks again)\n", st.ColdOverBudget, st.ColdRejected)
	}
	if *walDir != "" {
		if cerr != nil {
			return fmt.Errorf("WAL: %w (records appended after seq %d are not durable)", unproduce(firstErr(cerr)), pst.Durable)
		}
		if logFailed {
			fmt.Fprintf(os.Stderr, "cast send: WAL: every record is durable after all\n")
		}
		fmt.Printf("wal %s: durable through seq %d\n", *walDir, pst.Durable)
	}
	if ctx.Err() != nil {
		return interruptedf("sent %d of %d records", n, o.n)
	}
	if spoke {
		return fverdict
	}
	return rch.verdict(peer)
}

// firstErr is the first of the errors err joins (errors.Join), or err.
func firstErr(err error) error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		if es := j.Unwrap(); len(es) > 0 && es[0] != nil {
			return es[0]
		}
	}
	return err
}

// reportRecovery says what opening a WAL found: a restart after a crash
// (the Skip marker), a repair, files that do not belong.
func reportRecovery(w io.Writer, dir string, r wal.Recovery) {
	if sk := r.Skip; sk != nil {
		fmt.Fprintf(w, "cast send: WAL %s was not closed cleanly: seqs %d…%d were reserved but never durable; continuing at %d after a Skip marker (receivers that delivered any of them are told)\n",
			dir, sk.From, sk.Seq-1, sk.Seq+1)
	}
	if rp := r.Repaired; rp != nil {
		fmt.Fprint(w, rp.Text())
	}
	for _, u := range r.Unknown {
		fmt.Fprintf(w, "cast send: WAL: ignoring %s: not a segment name of this stream\n", u)
	}
	for _, o := range r.OrphanIndexes {
		fmt.Fprintf(w, "cast send: WAL: removed %s: an index without its segment\n", o)
	}
}
