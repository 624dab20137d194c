package protocol

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wire"
)

// Errors returned by Sender.Send. They are preallocated so that a refused
// send allocates nothing.
var (
	ErrFrameTooLarge = errors.New("cast: frame larger than MaxFrame or the batch slot")
	ErrPayloadShort  = errors.New("cast: data payload shorter than its 8-byte seq")
	ErrControlType   = wire.ErrReserved // a wire.Reserved type offered as data
	ErrBatchFull     = errors.New("cast: outgoing batch is full")
	ErrSeqOrder      = errors.New("cast: frame seq is not the sender's next seq")
	ErrHasLog        = errors.New("cast: SendFrame bypasses the WAL; a sender with a WAL uses Send")
)

// Sender is the sending half of a stream: a sans-I/O state machine. It
// never reads a clock, locks, allocates on its hot paths or does I/O;
// every output datagram is appended to the caller's batch. Not safe for
// concurrent use: one goroutine (the loop) owns it.
//
// It is built from components, each with its invariants beside it: the
// hot ring of sent frames (hotRing), the emitter that writes data frames
// into the batch, the retransmitter (NAK service, deferred ranges, dedup,
// cold reads and their budget), the flow controller (receiver table,
// policy, initial window), the prober (probe timing, RTT) and the event
// queue NextEvent drains. The Sender itself assigns seqs, runs the idle
// heartbeat and routes input to them.
type Sender struct {
	cfg    SenderConfig
	log    Log       // nil: WAL-less
	health LogHealth // the log's, if it reports failures
	logErr error     // the log's error as last reported by an event (noteLog)
	logAt  int64     // when noteLog reads the log's health next
	next   uint64    // seq the next Send assigns
	id     uint64    // sender id carried in probes and the session end marker

	ring   hotRing
	em     emitter
	retx   retransmitter
	fc     flowController
	probe  prober
	events eventQueue[SenderEvent]
	skip   skipMarker
	src    nakSource

	lastSend  int64  // last data send or heartbeat (the idle timer)
	timerInit bool   // lastSend is set (by a send or the first Tick)
	ended     bool   // End was called (session_end.go)
	nakFirst  uint64 // From of the first NAK since the last FirstNaked (0: none)
	stats     SenderStats
}

// nakSource is the one address whose NAKs and Status the Sender accepts
// (check false: any). Invariant: check implies addr is valid.
type nakSource struct {
	addr  netip.AddrPort
	check bool
}

const never = math.MinInt64 / 2

// NewSender builds a Sender. With a non-nil log every Send appends to the
// WAL first (the WAL assigns seqs and is the authority: the Sender starts
// at log.NextSeq()); with a nil log (the nil interface or a nil
// *wal.Writer alike) the Sender stamps seqs itself,
// starting at 1 (see [Sender.SetNextSeq]) and cold reads are impossible.
func NewSender(cfg SenderConfig, log Log) (*Sender, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	log = nilLog(log)
	s := &Sender{
		cfg:  cfg,
		log:  log,
		next: 1,
		id:   cfg.ID,
		ring: newHotRing(cfg.RingSlots, cfg.MaxFrame),
		em:   emitter{dest: cfg.Dest, coalesce: cfg.Coalesce, maxFrame: cfg.MaxFrame},
	}
	s.retx = retransmitter{
		cold:     newColdQueue(cfg, log != nil, &s.stats),
		dedup:    int64(cfg.RetxDedupWindow),
		deferred: make([]retxRange, 0, maxDeferred),
		stats:    &s.stats,
	}
	s.fc = newFlowController(&s.cfg, log != nil, &s.stats)
	s.probe = newProber(&s.cfg, &s.stats)
	if log != nil {
		s.next = log.NextSeq()
		if s.next == 0 {
			return nil, fmt.Errorf("%w: log.NextSeq() is 0", ErrConfig)
		}
		s.health, _ = log.(LogHealth)
		if sk, ok := log.(Skipper); ok {
			s.learnSkip(sk.Skipped())
		}
	}
	s.src.addr = cfg.NakSource
	if !s.src.addr.IsValid() {
		s.src.addr = cfg.Dest
	}
	s.src.check = !cfg.AcceptAnyNakSource && s.src.addr.IsValid()
	for s.id == 0 {
		s.id = rand.Uint64()
	}
	return s, nil
}

// ID is the sender id carried in probes.
func (s *Sender) ID() uint64 { return s.id }

// NextSeq is the seq the next Send assigns.
func (s *Sender) NextSeq() uint64 { return s.next }

// MaxFrame is the largest frame Send takes, header included
// (SenderConfig.MaxFrame).
func (s *Sender) MaxFrame() int { return s.cfg.MaxFrame }

// SetNextSeq moves the seq counter of a WAL-less sender (a publisher that
// resumes a stream). It has no effect with a WAL.
func (s *Sender) SetNextSeq(n uint64) {
	if s.log == nil && n > 0 {
		s.next = n
	}
}

// Stats returns a copy of the counters.
func (s *Sender) Stats() SenderStats { return s.stats }

// Send frames one data record of type typ and appends it to out,
// addressed to Dest. payload[0:8] is overwritten with the assigned seq in
// the frame (the caller's slice is not modified without a WAL; the WAL
// stamps its own copy). It returns the seq. The frame stays in the hot
// ring until RingSlots newer records pass it. Errors: ErrBatchFull (no
// seq assigned; flush out and retry), ErrFrameTooLarge, ErrPayloadShort,
// ErrControlType, ErrBackpressure (flow control: the next seq lies
// beyond a receiver's window; no seq assigned), or the log's error (e.g.
// wal.ErrBackpressure) returned unwrapped. now is monotonic ns. Send
// allocates nothing. The message appended may be a view of the frame's
// hot-ring slot (batch.Vec.Owned is false): it stays valid while out
// holds it, since a slot is reused only RingSlots sends later and views
// are made only while out.Cap() < RingSlots; copy it to keep it longer.
func (s *Sender) Send(typ uint16, payload []byte, now int64, out *batch.Vec) (uint64, error) {
	if wire.Reserved(typ) {
		return 0, ErrControlType
	}
	if s.ended {
		return 0, ErrEnded
	}
	if len(payload) < 8 {
		return 0, ErrPayloadShort
	}
	n := wire.HeaderSize + len(payload)
	if n > s.cfg.MaxFrame || n > out.SlotSize() {
		return 0, ErrFrameTooLarge
	}
	if s.fc.holds(s.next, now) {
		s.fc.refused(now)
		return 0, ErrBackpressure
	}
	if s.skip.due && !s.sendSkip(now, out) {
		return 0, ErrBatchFull
	}
	if out.Full() && !s.em.canJoin(out, n, s.next) {
		return 0, ErrBatchFull
	}
	var seq uint64
	var frame []byte
	if s.log != nil {
		f, err := s.log.Append(typ, payload)
		if err != nil {
			return 0, err
		}
		seq = wire.Seq(f[wire.HeaderSize:])
		frame = s.ring.frameBuf(seq, len(f))
		copy(frame, f)
	} else {
		seq = s.next
		frame = s.ring.frameBuf(seq, n)
		copy(frame[wire.HeaderSize:], payload)
		le.PutUint64(frame[wire.HeaderSize:], seq)
		_ = wire.Seal(frame, typ)
	}
	s.sent(seq, frame, now, out)
	return seq, nil
}

// SendFrame sends a data frame the caller built and sealed (header, CRC
// and seq in payload[0:8]), for a WAL-less publisher that stamps seqs
// itself or a relay. The frame's seq must be NextSeq() (ErrSeqOrder
// otherwise); a bad frame returns its wal decoding error; a sender with a
// WAL returns ErrHasLog. The frame is copied; the caller keeps ownership.
func (s *Sender) SendFrame(frame []byte, now int64, out *batch.Vec) error {
	if s.log != nil {
		return ErrHasLog
	}
	if s.ended {
		return ErrEnded
	}
	h, p, n, err := wire.DecodeFrame(frame)
	if err != nil {
		return err
	}
	if wire.Reserved(h.Type) {
		return ErrControlType
	}
	seq := wire.Seq(p)
	if len(p) < 8 {
		return ErrPayloadShort
	}
	if seq != s.next {
		return ErrSeqOrder
	}
	if n > s.cfg.MaxFrame || n > out.SlotSize() {
		return ErrFrameTooLarge
	}
	if s.fc.holds(s.next, now) {
		s.fc.refused(now)
		return ErrBackpressure
	}
	if s.skip.due && !s.sendSkip(now, out) {
		return ErrBatchFull
	}
	if out.Full() && !s.em.canJoin(out, n, s.next) {
		return ErrBatchFull
	}
	dst := s.ring.frameBuf(seq, n)
	copy(dst, frame[:n])
	s.sent(seq, dst, now, out)
	return nil
}

// sent caches the first transmission of seq (frame, already in its ring
// slot) and appends it to out, which the caller checked has room.
func (s *Sender) sent(seq uint64, frame []byte, now int64, out *batch.Vec) {
	s.ring.cache(seq, len(frame))
	s.next = seq + 1
	s.lastSend = now
	s.probe.lastData = now
	s.timerInit = true
	s.stats.Sent++
	if s.fc.initial.withheld != 0 && out.Cap()-out.Len() >= 2 {
		s.sendWithheld(now, out)
	}
	if !s.fc.negotiated && s.fc.initial.probes(seq, now) && s.sendProbe(seq, now, out) {
		return
	}
	s.em.emitFirst(frame, seq, out, s.ring.capacity())
}

// Tick continues retransmits that did not fit in the batch earlier (see
// RetxPending) and sends the idle-only heartbeat (highest seq sent, 0
// when none) when HeartbeatInterval has passed since the last data send
// or heartbeat. The
// first Tick of a sender that has sent nothing heartbeats at once, so a
// receiver learns where a restarted sender stands. With receivers under
// flow control it also drops those silent for ReceiverTimeout and sends
// the probes that are due (tail loss, RTT); heartbeats then take the
// probe form. now is monotonic ns; see Deadline for when to call it.
func (s *Sender) Tick(now int64, out *batch.Vec) {
	s.noteLog(now)
	if s.retx.pending() {
		s.retx.drain(&s.ring, &s.em, s.next, now, out)
	}
	if s.skip.due {
		s.sendSkip(now, out)
	}
	if !s.fc.negotiated {
		s.fc.initial.settle(now)
	}
	hb := int64(s.cfg.HeartbeatInterval)
	if !s.timerInit {
		s.timerInit = true
		s.lastSend = now - hb
	}
	if s.fc.active > 0 && s.flowTick(now, out) {
		return
	}
	if now-s.lastSend < hb {
		return
	}
	if s.logFailing() {
		// The log cannot make records durable: an idle-looking heartbeat
		// would tell receivers the stream is healthy. Stay silent; they
		// report PeerSilent.
		s.lastSend = now
		s.stats.HeartbeatsWithheld++
		return
	}
	if s.endMarker(now, out) {
		return // an ended stream repeats its marker instead of heartbeating
	}
	s.heartbeat(now, out)
}

// heartbeat appends a heartbeat (highest seq sent) to out: the probe
// form while some receiver is negotiated, else the reference's bytes.
// False: out is full (try again on the next Tick).
func (s *Sender) heartbeat(now int64, out *batch.Vec) bool {
	buf := out.Next()
	if len(buf) < wire.ControlFrameSize {
		return false
	}
	var n int
	if s.fc.active > 0 {
		n = wire.PutProbeFrame(buf, wire.Probe{Highest: s.next - 1, TS: uint64(max(now, 1)), SenderID: s.id,
			SRTT: sat32(s.probe.rtt.SRTT()), RTTVar: sat32(s.probe.rtt.RTTVar())})
		s.probe.sentProbe(now)
	} else {
		n = wire.PutHeartbeatFrame(buf, wire.Heartbeat{Highest: s.next - 1})
	}
	out.Commit(n, s.cfg.Dest)
	s.lastSend = now
	s.stats.Heartbeats++
	return true
}

// flowTick runs the flow controller's timers and sends the probe that
// is due. It returns true when it sent a heartbeat.
func (s *Sender) flowTick(now int64, out *batch.Vec) bool {
	if s.fc.tick(now, s.next, &s.events) {
		s.refold()
	}
	if s.fc.active == 0 {
		s.probe.owed = false
		return false
	}
	if s.logFailing() {
		return false // no heartbeat of any form while the log fails (see Tick)
	}
	k := s.probe.due(now, s.fc.uncovered(s.next))
	if k == noProbe {
		return false
	}
	if !s.heartbeat(now, out) {
		return false // out is full: due again on the next Tick
	}
	s.probe.sentDue(k, now)
	return true
}

// refold recomputes the flow limit after the receiver table changed; the
// dedup window follows the receivers' re-NAK delays.
func (s *Sender) refold() { s.retx.dedup = s.fc.fold(s.next - 1) }

func (s *Sender) logFailing() bool { return s.health != nil && s.health.Err() != nil }

// Handle processes one datagram received by the sender: NAKs and Status
// frames (anything else is counted and ignored). from is its source address. Retransmits
// served from the hot ring are appended to out (always to Dest, never to
// from); seqs that miss the ring are queued as cold requests. Bad
// datagrams are counted by reason. Handle never panics and allocates
// nothing.
func (s *Sender) Handle(dgram []byte, from netip.AddrPort, now int64, out *batch.Vec) {
	if s.src.check && !sameAddr(from, s.src.addr) {
		s.stats.BadSource++
		return
	}
	first := true
	for len(dgram) > 0 {
		h, p, n, err := wire.DecodeFrame(dgram)
		if err != nil {
			s.stats.Bad.count(err, first)
			return
		}
		first = false
		dgram = dgram[n:]
		if h.Type == wire.TypeStatus {
			if news := s.fc.status(p, from, now, &s.probe, &s.events); news.accepted {
				s.probe.heard(news)
				s.refold()
			}
			continue
		}
		if h.Type != wire.TypeNak {
			s.stats.Ignored++
			continue
		}
		nak, err := wire.ParseNak(p)
		if err != nil {
			s.stats.Bad.ShortPayload++
			continue
		}
		s.stats.Naks++
		if s.nakFirst == 0 {
			s.nakFirst = nak.From
		}
		s.fc.nak(now)
		s.serveNak(nak, now, out)
	}
}

func sameAddr(a, b netip.AddrPort) bool {
	return a.Port() == b.Port() && a.Addr().Unmap() == b.Addr().Unmap()
}

// Deadline is the loop-clock time (ns) at which Tick next has work: the
// idle heartbeat, a probe, a receiver's timeout, or now-ish
// (math.MinInt64) when retransmits wait for batch room. The loop may tick
// earlier; ticking later only delays those.
func (s *Sender) Deadline() int64 {
	if s.retx.pending() || !s.timerInit || s.probe.owed {
		return math.MinInt64
	}
	d := s.lastSend + int64(s.cfg.HeartbeatInterval)
	if s.fc.active == 0 {
		return s.fc.initial.deadline(d, s.fc.negotiated)
	}
	d = s.fc.deadline(d)
	return s.probe.deadline(d, s.fc.uncovered(s.next))
}

// FirstNaked returns the first seq of the first NAK received since its
// last call (0: none; a NAK from seq 0 counts as none) and forgets it.
// The caller's loss report reads it every tick to name the first seq of
// the loss episode a NAK opens.
func (s *Sender) FirstNaked() uint64 {
	f := s.nakFirst
	s.nakFirst = 0
	return f
}

// RetxPending reports whether NAKed retransmits wait for room in the
// batch: the loop flushes and calls Tick again without waiting.
func (s *Sender) RetxPending() bool { return s.retx.pending() }

// serveNak turns a NAK into the ranges to retransmit: clamped to
// RingSlots and to the seqs sent, and with the seqs the log skipped
// answered by its Skip marker.
func (s *Sender) serveNak(nak wire.Nak, now int64, out *batch.Vec) {
	from, count := nak.From, nak.Count
	if from == 0 {
		s.stats.NakNeverSent++
		if count == 0 {
			return
		}
		from, count = 1, count-1
	}
	if count == 0 {
		return
	}
	if count > uint64(s.cfg.RingSlots) {
		s.stats.NakClamped++
		count = uint64(s.cfg.RingSlots)
	}
	last := s.next - 1 // highest seq sent
	if from > last || count > last-from+1 {
		s.stats.NakNeverSent++
		// A negotiated receiver believes in seqs that do not exist (a
		// forged or stale announcement): tell it what does, at once.
		s.probe.owed = s.fc.active > 0
		if from > last {
			return
		}
		count = last - from + 1
	}
	end := from + count // exclusive; no overflow: end ≤ s.next
	if sk := &s.skip; sk.seq != 0 && from < sk.seq && end > sk.from {
		// Seqs the log skipped have no record: the Skip marker answers
		// for them (and for itself).
		if from < sk.from {
			s.retx.serve(&s.ring, &s.em, from, sk.from, s.next, now, out)
		}
		s.retx.serve(&s.ring, &s.em, sk.seq, max(end, sk.seq+1), s.next, now, out)
		return
	}
	s.retx.serve(&s.ring, &s.em, from, end, s.next, now, out)
}

// ColdRequests copies queued cold reads into dst, lowest seqs first (the
// receiver delivers in order), marks them running and returns how many
// it copied: at most MaxColdInFlight are running at once. The loop reads
// each on its I/O goroutine (e.g. with wal.Writer.ReadRange) and reports
// back with ColdDone or ColdFailed on the Sender's goroutine.
func (s *Sender) ColdRequests(dst []ColdRequest) int { return s.retx.cold.take(dst) }

// ColdPending reports whether cold requests wait to be taken by
// ColdRequests and one may be taken now.
func (s *Sender) ColdPending() bool { return s.retx.cold.pending() }

// ColdDone hands back frames read for req: consecutive whole frames as
// stored in the WAL. Each valid data frame whose seq lies in req is
// appended to out as a retransmit. When out fills, ColdDone returns the
// frames not yet sent (a sub-slice of frames); the loop flushes out and
// calls ColdDone again with them. The request is finished, and its
// in-flight slot freed, when the returned slice is empty. Records the WAL
// did not return are counted as ColdMissing.
func (s *Sender) ColdDone(req ColdRequest, frames []byte, now int64, out *batch.Vec) (rest []byte) {
	return s.retx.cold.done(req, frames, now, &s.em, out)
}

// ColdFailed reports that the read for req failed; its slot is freed and
// the receiver will ask again.
func (s *Sender) ColdFailed(req ColdRequest) { s.retx.cold.failed(req) }
