package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/wal"
	"github.com/walcast/walcast/wire"
)

// fakeLog is an in-memory stand-in for wal.Writer: it assigns seqs,
// stamps and seals frames, and serves ReadRange from what it kept.
type fakeLog struct {
	next   uint64
	buf    []byte
	frames [][]byte // frames[i] has seq first+i
	first  uint64
	drop   map[uint64]bool // seqs ReadRange pretends were pruned
}

func newFakeLog(next uint64) *fakeLog {
	return &fakeLog{next: next, first: next, buf: make([]byte, 70000)}
}

func (l *fakeLog) Append(typ uint16, payload []byte) ([]byte, error) {
	f := l.buf[:wire.HeaderSize+len(payload)]
	copy(f[wire.HeaderSize:], payload)
	le.PutUint64(f[wire.HeaderSize:], l.next)
	if err := wire.Seal(f, typ); err != nil {
		return nil, err
	}
	l.frames = append(l.frames, append([]byte(nil), f...))
	l.next++
	return f, nil
}

func (l *fakeLog) NextSeq() uint64 { return l.next }

func (l *fakeLog) ReadRange(from uint64, n int, dst []byte) (frames, bytes int, err error) {
	for seq := from; seq < from+uint64(n) && seq < l.next; seq++ {
		if seq < l.first || l.drop[seq] {
			continue
		}
		f := l.frames[seq-l.first]
		if bytes+len(f) > len(dst) {
			break
		}
		bytes += copy(dst[bytes:], f)
		frames++
	}
	return frames, bytes, nil
}

// harness runs a Sender on end A and a Receiver on end B of a mem.Pair,
// stepping both like a loop would, and checks every delivery.
// rangeReader is the read side of the WAL the loop uses for cold reads.
type rangeReader interface {
	ReadRange(from uint64, n int, dst []byte) (frames, bytes int, err error)
}

type harness struct {
	t       testing.TB
	p       *mem.Pair
	s       *Sender
	r       *Receiver
	log     *fakeLog
	reader  rangeReader // log, or the real WAL writer
	sOut    *batch.Vec
	rOut    *batch.Vec
	in      *batch.Vec
	cold    []ColdRequest
	coldBuf []byte
	payload []byte

	delivered     uint64  // count
	backpressured int     // Send calls refused by flow control
	deliveredAt   []int64 // virtual time of each delivery, by seq−1 (when trackTimes)
	trackTimes    bool

	// consumer, when queueCap > 0: delivered records wait in a queue of
	// queueCap until the test consumes them; the room left is passed to
	// the receiver as its consumer room.
	queueCap, queued int
	autoConsume      int // records the consumer takes per step
	overflows        int // records delivered into a full queue
	events           []SenderEvent
	lastSeq          uint64
	firstSeq         uint64
	orderError       error
	deliver          func(h wire.Header, p []byte)

	// batched: send uses SendBatch, not a loop of Send. batchedRecv:
	// the receiver takes each batch read with HandleRun, not a Handle per
	// datagram; holdStatus: inside HoldStatus/ReleaseStatus, as a loop
	// does. trace and rtrace, when tracing, collect a copy of every
	// datagram the sender and the receiver sent.
	batched, batchedRecv, holdStatus, tracing bool
	payloads                                  [][]byte
	trace, rtrace                             [][]byte
}

type harnessOpt struct {
	s      SenderConfig
	r      ReceiverConfig
	noLog  bool
	wal    *wal.Writer // use this WAL instead of the fake
	record int         // payload bytes (default 64)
}

func defaultOpt() harnessOpt {
	s := DefaultSenderConfig()
	s.Dest = mem.AddrB
	r := DefaultReceiverConfig()
	r.Sender = mem.AddrA
	return harnessOpt{s: s, r: r}
}

func newHarness(t testing.TB, o harnessOpt) *harness {
	t.Helper()
	h := &harness{t: t, p: mem.NewPair(1_000_000_000)}
	var log Log
	switch {
	case o.wal != nil:
		log, h.reader = o.wal, o.wal
	case !o.noLog:
		h.log = newFakeLog(1)
		log, h.reader = h.log, h.log
	}
	var err error
	if h.s, err = NewSender(o.s, log); err != nil {
		t.Fatal(err)
	}
	if h.r, err = NewReceiver(o.r); err != nil {
		t.Fatal(err)
	}
	h.sOut = batch.New(64, 2048)
	h.rOut = batch.New(64, 2048)
	h.in = batch.New(64, 2048)
	h.cold = make([]ColdRequest, 8)
	h.coldBuf = make([]byte, o.s.MaxColdRecords*o.s.MaxFrame)
	if o.record == 0 {
		o.record = 64
	}
	h.payload = make([]byte, o.record)
	h.deliver = func(hd wire.Header, p []byte) {
		seq := wire.Seq(p)
		if h.orderError == nil {
			if h.delivered > 0 && seq != h.lastSeq+1 {
				h.orderError = fmt.Errorf("delivered seq %d after %d", seq, h.lastSeq)
			}
			if hd.Type != 100 || int(hd.Len) != len(p) {
				h.orderError = fmt.Errorf("seq %d: header %+v, payload %d bytes", seq, hd, len(p))
			}
		}
		if h.delivered == 0 {
			h.firstSeq = seq
		}
		h.lastSeq = seq
		h.delivered++
		if h.trackTimes {
			for uint64(len(h.deliveredAt)) < seq {
				h.deliveredAt = append(h.deliveredAt, 0)
			}
			h.deliveredAt[seq-1] = h.now()
		}
		if h.queueCap > 0 {
			if h.queued >= h.queueCap {
				h.overflows++ // a real loop would stall delivery here
			}
			h.queued++
		}
	}
	return h
}

// consume takes up to n records from the consumer queue.
func (h *harness) consume(n int) { h.queued -= min(n, h.queued) }

func (h *harness) now() int64 { return h.p.Clock.Now() }

// send sends n data records, flushing the sender's batch as needed.
// While flow control holds the sender back (ErrBackpressure) it lets
// virtual time pass in steps of 100 µs, as a producer that retries would,
// for at most 60 s.
func (h *harness) send(n int) {
	h.t.Helper()
	if h.batched {
		h.sendBatched(n)
		return
	}
	for i := 0; i < n; i++ {
		waited := 0
		for {
			_, err := h.s.Send(100, h.payload, h.now(), h.sOut)
			if errors.Is(err, ErrBatchFull) {
				h.flushSender()
				continue
			}
			if err == ErrBackpressure {
				h.heldBack(&waited)
				continue
			}
			if err != nil {
				h.t.Fatalf("send: %v", err)
			}
			break
		}
		h.checkWindow()
	}
	h.flushSender()
}

// heldBack is what a producer does when flow control holds it back:
// the batch goes out, virtual time passes 100 µs, and the send is tried
// again, for at most 60 s (waited counts the tries).
func (h *harness) heldBack(waited *int) {
	h.t.Helper()
	h.backpressured++
	if *waited++; *waited > 600_000 {
		h.t.Fatalf("send: held by flow control for 60 s (limit %v, receivers %+v)", fmtLimit(h.s), h.receivers())
	}
	h.flushSender()
	h.step()
	h.p.Clock.Advance(100 * time.Microsecond)
}

// sendBatched is send with SendBatch: the same records, the same
// flushes and the same retries when flow control holds the sender back.
func (h *harness) sendBatched(n int) {
	h.t.Helper()
	for len(h.payloads) < n {
		h.payloads = append(h.payloads, h.payload)
	}
	waited := 0
	for sent := 0; sent < n; {
		k, err := h.s.SendBatch(100, h.payloads[sent:n], h.now(), h.sOut)
		sent += k
		h.checkWindow()
		switch {
		case err == nil:
		case errors.Is(err, ErrBatchFull):
			h.flushSender()
		case err == ErrBackpressure:
			h.heldBack(&waited)
		default:
			h.t.Fatalf("send: %v", err)
		}
	}
	h.flushSender()
}

// checkWindow is the flow-control invariant: while the sender is limited,
// it has sent nothing beyond its limit, and the limit is within what the
// receiver accepts right now (its edges never move back).
func (h *harness) checkWindow() {
	edge, limited := h.s.Limit()
	if !limited {
		return
	}
	if sent := h.s.NextSeq() - 1; sent > edge {
		h.t.Fatalf("sent %d beyond the flow-control limit %d", sent, edge)
	}
	if h.r.Outcome().Kind == Live && h.r.ExpectedSeq() != 0 {
		if acc := h.r.ExpectedSeq() - 1 + h.r.advWindow(); edge > acc {
			h.t.Fatalf("limit %d beyond what the receiver accepts (%d): expected %d room %d base %d queued %d cap %d receivers %+v", edge, acc, h.r.ExpectedSeq(), h.r.st.room, h.r.st.roomBase, h.queued, h.queueCap, h.receivers())
		}
	}
}

func (h *harness) receivers() []ReceiverInfo {
	ri := make([]ReceiverInfo, 8)
	return ri[:h.s.Receivers(ri)]
}

func fmtLimit(s *Sender) string {
	e, l := s.Limit()
	if !l {
		return "none"
	}
	return fmt.Sprint(e)
}

func (h *harness) flushSender() {
	if h.tracing {
		for i := 0; i < h.sOut.Len(); i++ {
			b, _ := h.sOut.Msg(i)
			h.trace = append(h.trace, bytes.Clone(b))
		}
	}
	if _, err := h.p.A.Send(h.sOut); err != nil {
		h.t.Fatal(err)
	}
	h.sOut.Reset()
}

func (h *harness) flushReceiver() {
	if h.tracing {
		for i := 0; i < h.rOut.Len(); i++ {
			b, _ := h.rOut.Msg(i)
			h.rtrace = append(h.rtrace, bytes.Clone(b))
		}
	}
	if _, err := h.p.B.Send(h.rOut); err != nil {
		h.t.Fatal(err)
	}
	h.rOut.Reset()
}

// step runs one loop iteration of each side at the current time.
func (h *harness) step() {
	now := h.now()
	// Sender: NAKs in, retransmits out, cold reads served inline (the
	// real loop does them on its I/O goroutine), heartbeat.
	for {
		n, _ := h.p.A.Recv(h.in)
		for i := 0; i < n; i++ {
			b, from := h.in.Msg(i)
			if h.sOut.Full() {
				h.flushSender()
			}
			h.s.Handle(b, from, now, h.sOut)
		}
		if n < h.in.Cap() {
			break
		}
	}
	k := h.s.ColdRequests(h.cold)
	for _, req := range h.cold[:k] {
		_, nb, err := h.reader.ReadRange(req.From, req.Count, h.coldBuf)
		if errors.Is(err, wal.ErrNotFound) {
			h.s.ColdDone(req, nil, now, h.sOut) // nothing to send: counted as missing
			continue
		}
		if err != nil {
			h.s.ColdFailed(req)
			continue
		}
		rest := h.s.ColdDone(req, h.coldBuf[:nb], now, h.sOut)
		for len(rest) > 0 {
			h.flushSender()
			rest = h.s.ColdDone(req, rest, now, h.sOut)
		}
	}
	h.s.Tick(now, h.sOut)
	for h.s.RetxPending() {
		h.flushSender()
		h.s.Tick(now, h.sOut)
	}
	h.flushSender()
	for e, ok := h.s.NextEvent(); ok; e, ok = h.s.NextEvent() {
		h.events = append(h.events, e)
	}
	// Receiver.
	h.consume(h.autoConsume)
	if h.queueCap > 0 {
		h.r.SetConsumerRoom(h.queueCap-h.queued, now, h.rOut)
	}
	for {
		n, _ := h.p.B.Recv(h.in)
		hold := h.holdStatus && n > 1
		if hold {
			h.r.HoldStatus()
		}
		if h.batchedRecv {
			h.r.HandleRun(h.in, 0, n, now, h.rOut, h.deliver)
		} else {
			for i := 0; i < n; i++ {
				b, _ := h.in.Msg(i)
				if h.rOut.Full() {
					h.flushReceiver()
				}
				h.r.Handle(b, now, h.rOut, h.deliver)
			}
		}
		if hold {
			h.r.ReleaseStatus(now, h.rOut)
		}
		if n < h.in.Cap() {
			break
		}
	}
	if h.queueCap > 0 {
		h.r.SetConsumerRoom(h.queueCap-h.queued, now, h.rOut)
	}
	h.r.Tick(now, h.rOut)
	h.flushReceiver()
}

// eventKinds returns the kinds of the sender events seen so far.
func (h *harness) eventKinds() []SenderEventKind {
	var ks []SenderEventKind
	for _, e := range h.events {
		ks = append(ks, e.Kind)
	}
	return ks
}

// run steps both sides every dt for d of virtual time.
func (h *harness) run(d, dt time.Duration) {
	end := h.now() + int64(d)
	for h.now() < end {
		h.step()
		h.p.Clock.Advance(dt)
	}
	h.step()
}

// expectDelivered fails unless seqs from..to were delivered in order,
// exactly once, and nothing else.
func (h *harness) expectDelivered(from, to uint64) {
	h.t.Helper()
	if h.orderError != nil {
		h.t.Fatal(h.orderError)
	}
	want := to - from + 1
	if h.delivered != want || h.firstSeq != from || h.lastSeq != to {
		h.t.Fatalf("delivered %d records %d..%d, want %d..%d (outcome %+v, recv stats %+v, send stats %+v)",
			h.delivered, h.firstSeq, h.lastSeq, from, to, h.r.Outcome(), h.r.Stats(), h.s.Stats())
	}
}

func (h *harness) impairData(imp mem.Impairment) { h.p.Net.Impair(mem.AddrA, mem.AddrB, imp) }
func (h *harness) impairNaks(imp mem.Impairment) { h.p.Net.Impair(mem.AddrB, mem.AddrA, imp) }

// dataSeq returns the seq of a single-frame data datagram, 0 otherwise.
func dataSeq(b []byte) uint64 {
	hd, p, _, err := wire.DecodeFrame(b)
	if err != nil || wire.UDPControl(hd.Type) {
		return 0
	}
	return wire.Seq(p)
}

// dropSeqs returns a Script that drops the first k transmissions of each
// listed seq (k < 0: every transmission).
func dropSeqs(k int, seqs ...uint64) func(int, []byte) mem.Action {
	seen := map[uint64]int{}
	want := map[uint64]bool{}
	for _, s := range seqs {
		want[s] = true
	}
	return func(_ int, b []byte) mem.Action {
		s := dataSeq(b)
		if !want[s] {
			return mem.Pass
		}
		seen[s]++
		if k < 0 || seen[s] <= k {
			return mem.Drop
		}
		return mem.Pass
	}
}
