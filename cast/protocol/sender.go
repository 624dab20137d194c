package protocol

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wal"
)

// Log is the part of the WAL writer the Sender needs; *wal.Writer
// satisfies it. Append assigns the next seq, stamps it into payload
// offset 0 of its own copy, seals the frame and returns it; the returned
// frame is valid until the next Append. NextSeq is the seq the next
// Append will assign.
type Log interface {
	Append(typ uint16, payload []byte) (frame []byte, err error)
	NextSeq() uint64
}

var _ Log = (*wal.Writer)(nil)

// Skipper is implemented by a Log that continued past seqs a crash left
// unused ((*wal.Writer).Skipped): it returns the Skip marker frame it
// wrote when it opened, or nil. The Sender sends the marker before its
// first record and answers NAKs for the skipped seqs with it.
type Skipper interface {
	Skipped() []byte
}

// LogHealth is implemented by a Log that can say it is failing
// ((*wal.Writer).Err): a non-nil Err means appends cannot become durable
// now (a full disk, an I/O error). The Sender then withholds heartbeats,
// so receivers see a silent stream instead of a healthy idle one.
type LogHealth interface {
	Err() error
}

var (
	_ Skipper   = (*wal.Writer)(nil)
	_ LogHealth = (*wal.Writer)(nil)
)

// Errors returned by Sender.Send. They are preallocated so that a refused
// send allocates nothing.
var (
	ErrFrameTooLarge = errors.New("cast: frame larger than MaxFrame or the batch slot")
	ErrPayloadShort  = errors.New("cast: data payload shorter than its 8-byte seq")
	ErrControlType   = errors.New("cast: record types 0x10–0x17 are the protocol's (NAK, heartbeat, Skip, …), not data")
	ErrBatchFull     = errors.New("cast: outgoing batch is full")
	ErrSeqOrder      = errors.New("cast: frame seq is not the sender's next seq")
	ErrHasLog        = errors.New("cast: SendFrame bypasses the WAL; a sender with a WAL uses Send")
)

// ColdRequest asks the loop to read Count consecutive records starting at
// From from the WAL (off the hot thread) and hand the frames back through
// [Sender.ColdDone] (or [Sender.ColdFailed]).
type ColdRequest struct {
	From  uint64
	Count int
}

// maxDeferred is how many NAKed ranges wait for batch room at most.
const maxDeferred = 64

type retxRange struct{ from, end uint64 }

type coldSlot struct {
	req    ColdRequest
	served int  // frames retransmitted so far
	taken  bool // handed to the loop by ColdRequests
	used   bool
}

// coldRecentSlots is how many recently served cold ranges the Sender
// remembers for de-duplication across NAKs.
const coldRecentSlots = 32

// coldServed is a cold range [from, end) served at time at.
type coldServed struct {
	from, end uint64
	at        int64
}

// SenderStats are the Sender's counters. All are totals since NewSender.
type SenderStats struct {
	Sent       uint64 // data records sent (first transmission)
	Heartbeats uint64 // heartbeats sent
	// HeartbeatsWithheld counts heartbeat intervals in which no heartbeat
	// was sent because the log reported an error (LogHealth).
	HeartbeatsWithheld uint64
	// SkipsSent counts first transmissions of the log's Skip marker (sent
	// before the first record after a restart); repeats for NAKs of
	// skipped seqs count as retransmits (RetxHot, RetxCold).
	SkipsSent uint64
	Naks      uint64 // NAK records accepted (version, len, CRC, source all good)
	Bad       BadCounts
	BadSource uint64 // NAK datagrams from a source other than the receiver
	Ignored   uint64 // valid frames of a type other than NAK
	// NakClamped counts NAKs whose count exceeded RingSlots.
	NakClamped uint64
	// NakNeverSent counts NAKs that asked for seqs not yet sent (or 0);
	// those seqs are ignored.
	NakNeverSent uint64
	RetxHot      uint64 // retransmits served from the hot ring
	RetxCold     uint64 // retransmits served from cold reads
	RetxDedup    uint64 // retransmits suppressed by the dedup window
	RetxDeferred uint64 // NAKed ranges continued on a later Tick (batch full)
	RetxDropped  uint64 // NAKed seqs dropped: too many ranges waiting for batch room
	ColdQueued   uint64 // cold requests queued
	// ColdDedup counts cold seqs not read again: covered by a queued or
	// running request, or served within RetxDedupWindow.
	ColdDedup uint64
	// ColdOverBudget counts cold seqs dropped because the ColdRate budget
	// was spent (the receiver asks again).
	ColdOverBudget uint64
	ColdRejected   uint64 // cold seqs dropped: every request slot busy, or no WAL
	ColdMissing    uint64 // requested cold seqs the WAL did not return
	ColdErrors     uint64 // cold reads reported failed by the loop

	// Flow control (walcast extension; all zero while no receiver has
	// sent a Status).
	Statuses        uint64 // valid Status frames accepted
	BadStatus       uint64 // Status frames whose payload is invalid
	StaleStatus     uint64 // Status older (by serial) than one already seen
	StatusRejected  uint64 // Status from a new receiver while the table was full
	Backpressured   uint64 // Send/SendFrame calls refused with ErrBackpressure
	InitialHeld     uint64 // of which by the initial window (no Status heard yet)
	Probes          uint64 // heartbeats sent in the probe form (counted in Heartbeats too)
	TailProbes      uint64 // of which tail-loss probes
	RTTProbes       uint64 // of which periodic RTT probes
	SessionEnds     uint64 // session end markers sent (End, then every HeartbeatInterval)
	ReceiversJoined uint64 // ReceiverJoined and ReceiverRestarted events
	ReceiversLost   uint64 // receivers dropped for silence
	EventsDropped   uint64 // events not queued because 32 were unread
}

// Sender is the sending half of a stream: a sans-I/O state machine. It
// never reads a clock, locks, allocates on its hot paths or does I/O;
// every output datagram is appended to the caller's batch. Not safe for
// concurrent use: one goroutine (the loop) owns it.
type Sender struct {
	cfg       SenderConfig
	log       Log
	mask      uint64
	slot      int
	ring      []byte
	slotSeq   []uint64
	slotLen   []int32
	retxAt    []int64
	next      uint64
	lastSend  int64
	timerInit bool
	skipDue   bool // the log's Skip marker has not been sent yet
	hbEvery   int64
	health    LogHealth
	skip      struct {
		from, seq uint64 // the log's Skip marker: seqs from … seq−1 have no record
		frame     []byte
	}
	dedup    int64
	nakFrom  netip.AddrPort
	checkSrc bool
	cold     []coldSlot
	running  int // cold slots taken and not finished
	// The cold budget: tokens in record·ns (one record costs 1e9), refilled
	// at ColdRate per second up to ColdBurst records.
	coldTokens int64
	coldFull   int64
	coldAt     int64 // time of the last refill
	recent     [coldRecentSlots]coldServed
	recentNext int
	retx       []retxRange // NAKed ranges waiting for room in the batch
	coal       struct {
		vec  *batch.Vec
		idx  int
		n    int    // bytes in the message
		last int    // bytes of its last frame
		next uint64 // seq that may be appended
	}
	id    uint64
	fc    flow
	ended bool // End was called (session_end.go)
	stats SenderStats
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
		cfg:     cfg,
		log:     log,
		mask:    uint64(cfg.RingSlots - 1),
		slot:    slotSize(cfg.MaxFrame),
		slotSeq: make([]uint64, cfg.RingSlots),
		slotLen: make([]int32, cfg.RingSlots),
		retxAt:  make([]int64, cfg.RingSlots),
		next:    1,
		hbEvery: int64(cfg.HeartbeatInterval),
		dedup:   int64(cfg.RetxDedupWindow),
		id:      cfg.ID,
		cold:    make([]coldSlot, cfg.MaxColdInFlight+cfg.MaxColdQueued),
		retx:    make([]retxRange, 0, maxDeferred),
	}
	s.coldFull = cfg.ColdBurst * 1e9
	s.coldTokens = s.coldFull
	s.coldAt = never
	s.ring = make([]byte, cfg.RingSlots*s.slot)
	for i := range s.retxAt {
		s.retxAt[i] = never
	}
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
	s.nakFrom = cfg.NakSource
	if !s.nakFrom.IsValid() {
		s.nakFrom = cfg.Dest
	}
	s.checkSrc = !cfg.AcceptAnyNakSource && s.nakFrom.IsValid()
	for s.id == 0 {
		s.id = rand.Uint64()
	}
	s.initFlow()
	return s, nil
}

// ID is the sender id carried in probes.
func (s *Sender) ID() uint64 { return s.id }

// NextSeq is the seq the next Send assigns.
func (s *Sender) NextSeq() uint64 { return s.next }

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
// allocates nothing.
func (s *Sender) Send(typ uint16, payload []byte, now int64, out *batch.Vec) (uint64, error) {
	if wal.IsProtocolType(typ) {
		return 0, ErrControlType
	}
	if s.ended {
		return 0, ErrEnded
	}
	if len(payload) < 8 {
		return 0, ErrPayloadShort
	}
	n := wal.HeaderSize + len(payload)
	if n > s.cfg.MaxFrame || n > out.SlotSize() {
		return 0, ErrFrameTooLarge
	}
	if (s.fc.limited && s.next > s.fc.limit) || (!s.fc.negotiated && s.initialHold(now)) {
		s.refuse(now)
		return 0, ErrBackpressure
	}
	if s.skipDue && !s.sendSkip(now, out) {
		return 0, ErrBatchFull
	}
	if out.Full() && !s.canCoalesce(out, n) {
		return 0, ErrBatchFull
	}
	var seq uint64
	var frame []byte
	if s.log != nil {
		f, err := s.log.Append(typ, payload)
		if err != nil {
			return 0, err
		}
		seq = wal.Seq(f[wal.HeaderSize:])
		i := seq & s.mask
		frame = s.ring[int(i)*s.slot : int(i)*s.slot+len(f)]
		copy(frame, f)
	} else {
		seq = s.next
		i := seq & s.mask
		frame = s.ring[int(i)*s.slot : int(i)*s.slot+n]
		copy(frame[wal.HeaderSize:], payload)
		le.PutUint64(frame[wal.HeaderSize:], seq)
		_ = wal.Seal(frame, typ)
	}
	s.cache(seq, len(frame))
	s.next = seq + 1
	s.lastSend = now
	s.fc.lastData = now
	s.timerInit = true
	s.stats.Sent++
	s.emit(frame, seq, out)
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
	h, p, n, err := wal.DecodeFrame(frame)
	if err != nil {
		return err
	}
	if wal.IsProtocolType(h.Type) {
		return ErrControlType
	}
	seq := wal.Seq(p)
	if len(p) < 8 {
		return ErrPayloadShort
	}
	if seq != s.next {
		return ErrSeqOrder
	}
	if n > s.cfg.MaxFrame || n > out.SlotSize() {
		return ErrFrameTooLarge
	}
	if (s.fc.limited && s.next > s.fc.limit) || (!s.fc.negotiated && s.initialHold(now)) {
		s.refuse(now)
		return ErrBackpressure
	}
	if s.skipDue && !s.sendSkip(now, out) {
		return ErrBatchFull
	}
	if out.Full() && !s.canCoalesce(out, n) {
		return ErrBatchFull
	}
	i := seq & s.mask
	dst := s.ring[int(i)*s.slot : int(i)*s.slot+n]
	copy(dst, frame[:n])
	s.cache(seq, n)
	s.next = seq + 1
	s.lastSend = now
	s.fc.lastData = now
	s.timerInit = true
	s.stats.Sent++
	s.emit(dst, seq, out)
	return nil
}

// refuse counts a Send held back by flow control and starts the stall
// clock (see ReceiverStalled).
func (s *Sender) refuse(now int64) {
	s.stats.Backpressured++
	if s.fc.negotiated && s.fc.blockedAt == 0 {
		s.fc.blockedAt = max(now, 1)
	}
}

func (s *Sender) cache(seq uint64, n int) {
	i := seq & s.mask
	s.slotSeq[i] = seq
	s.slotLen[i] = int32(n)
	s.retxAt[i] = never
}

// canCoalesce reports whether a data frame of n bytes with seq s.next can
// be appended to the last message of out.
func (s *Sender) canCoalesce(out *batch.Vec, n int) bool {
	return s.coalesceWith(out, n, s.next)
}

func (s *Sender) coalesceWith(out *batch.Vec, n int, seq uint64) bool {
	if !s.cfg.Coalesce || s.coal.vec != out || out.Len() == 0 || out.Len()-1 != s.coal.idx || s.coal.next != seq {
		return false
	}
	m, _ := out.Msg(s.coal.idx)
	if len(m) != s.coal.n || s.coal.n+n > s.cfg.MaxFrame || s.coal.n+n > out.SlotSize() {
		return false
	}
	// The message must still be ours: its last frame is the data record
	// seq−1 (the caller may have reset out and appended something else,
	// e.g. a NAK, at the same index).
	last := m[len(m)-s.coal.last:]
	typ := le.Uint16(last[2:])
	return !wal.IsControl(typ) && le.Uint64(last[wal.HeaderSize:]) == seq-1
}

// emit appends a data frame to out, coalescing it with the previous data
// datagram when configured. It returns false when out had no room.
func (s *Sender) emit(frame []byte, seq uint64, out *batch.Vec) bool {
	if s.coalesceWith(out, len(frame), seq) {
		buf := out.Buf(s.coal.idx)
		copy(buf[s.coal.n:], frame)
		s.coal.n += len(frame)
		s.coal.last = len(frame)
		out.Set(s.coal.idx, s.coal.n, s.cfg.Dest)
		s.coal.next = seq + 1
		return true
	}
	if !out.Append(frame, s.cfg.Dest) {
		return false
	}
	if s.cfg.Coalesce {
		s.coal.vec, s.coal.idx, s.coal.n, s.coal.last, s.coal.next = out, out.Len()-1, len(frame), len(frame), seq+1
	}
	return true
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
	if len(s.retx) > 0 {
		s.drainRetx(now, out)
	}
	if s.skipDue {
		s.sendSkip(now, out)
	}
	if !s.timerInit {
		s.timerInit = true
		s.lastSend = now - s.hbEvery
	}
	if s.fc.active > 0 && s.flowTick(now, out) {
		return
	}
	if now-s.lastSend < s.hbEvery {
		return
	}
	if s.health != nil && s.health.Err() != nil {
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
	if len(buf) < wal.ControlFrameSize {
		return false
	}
	var n int
	if s.fc.active > 0 {
		n = PutProbeFrame(buf, Probe{Highest: s.next - 1, TS: uint64(max(now, 1)), SenderID: s.id,
			SRTT: sat32(s.fc.rtt.SRTT()), RTTVar: sat32(s.fc.rtt.RTTVar())})
		s.fc.lastProbe = now
		s.fc.probeNow = false
		s.stats.Probes++
	} else {
		n = wal.PutHeartbeatFrame(buf, wal.Heartbeat{Highest: s.next - 1})
	}
	out.Commit(n, s.cfg.Dest)
	s.lastSend = now
	s.stats.Heartbeats++
	return true
}

// sendSkip sends the log's Skip marker before the Sender's first record,
// whether Send or Tick comes first: receivers learn at once which seqs
// will never have a record, and which of those they delivered (a crashed
// sender had sent them before they were durable). It is an ordinary
// record of the log (NAKed and repaired like any), so a lost marker is
// asked for again. It returns false when out had no room.
func (s *Sender) sendSkip(now int64, out *batch.Vec) bool {
	if !s.emit(s.skip.frame, s.skip.seq, out) {
		return false
	}
	s.stats.SkipsSent++
	s.skipDue = false
	s.timerInit = true
	s.lastSend = now
	return true
}

// learnSkip takes the log's Skip marker (the frame it wrote on open): it
// is cached in the hot ring when it is the last record, and remembered so
// that NAKs for the seqs it stands for are answered with it.
func (s *Sender) learnSkip(frame []byte) {
	h, p, n, err := wal.DecodeFrame(frame)
	if err != nil || h.Type != wal.TypeSkip {
		return
	}
	sk, err := wal.ParseSkip(p)
	if err != nil || sk.Seq >= s.next {
		return
	}
	s.skip.from, s.skip.seq = sk.From, sk.Seq
	s.skip.frame = append([]byte(nil), frame[:n]...)
	s.skipDue = true
	if sk.Seq == s.next-1 && n <= s.slot {
		i := sk.Seq & s.mask
		copy(s.ring[int(i)*s.slot:], frame[:n])
		s.cache(sk.Seq, n)
	}
}

// LogErr is the log's error (LogHealth), or nil: while it is set the
// Sender withholds heartbeats.
func (s *Sender) LogErr() error {
	if s.health == nil {
		return nil
	}
	return s.health.Err()
}

// Handle processes one datagram received by the sender: NAKs and Status
// frames (anything else is counted and ignored). from is its source address. Retransmits
// served from the hot ring are appended to out (always to Dest, never to
// from); seqs that miss the ring are queued as cold requests. Bad
// datagrams are counted by reason. Handle never panics and allocates
// nothing.
func (s *Sender) Handle(dgram []byte, from netip.AddrPort, now int64, out *batch.Vec) {
	if s.checkSrc && !sameAddr(from, s.nakFrom) {
		s.stats.BadSource++
		return
	}
	first := true
	for len(dgram) > 0 {
		h, p, n, err := wal.DecodeFrame(dgram)
		if err != nil {
			s.stats.Bad.count(err, first)
			return
		}
		first = false
		dgram = dgram[n:]
		if h.Type == TypeStatus {
			s.handleStatus(p, from, now, out)
			continue
		}
		if h.Type != wal.TypeNak {
			s.stats.Ignored++
			continue
		}
		nak, err := wal.ParseNak(p)
		if err != nil {
			s.stats.Bad.ShortPayload++
			continue
		}
		s.stats.Naks++
		s.serveNak(nak, now, out)
	}
}

func sameAddr(a, b netip.AddrPort) bool {
	return a.Port() == b.Port() && a.Addr().Unmap() == b.Addr().Unmap()
}

func (s *Sender) serveNak(nak wal.Nak, now int64, out *batch.Vec) {
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
		s.fc.probeNow = s.fc.active > 0
		if from > last {
			return
		}
		count = last - from + 1
	}
	end := from + count // exclusive; no overflow: end ≤ s.next
	if s.skip.seq != 0 && from < s.skip.seq && end > s.skip.from {
		// Seqs the log skipped have no record: the Skip marker answers
		// for them (and for itself).
		if from < s.skip.from {
			s.serveOrDefer(from, s.skip.from, now, out)
		}
		s.serveOrDefer(s.skip.seq, max(end, s.skip.seq+1), now, out)
		return
	}
	s.serveOrDefer(from, end, now, out)
}

func (s *Sender) serveOrDefer(from, end uint64, now int64, out *batch.Vec) {
	if len(s.retx) > 0 {
		// Earlier retransmits still wait for room: queue behind them.
		s.deferRetx(from, end)
		return
	}
	if seq := s.serveRange(from, end, now, out); seq < end {
		s.deferRetx(seq, end)
	}
}

// serveRange retransmits seqs from … end−1: hot hits into out, misses
// queued as cold reads. It returns end, or the seq at which out filled.
func (s *Sender) serveRange(from, end uint64, now int64, out *batch.Vec) uint64 {
	// Seqs more than RingSlots behind the next one cannot be in the ring
	// (their slot holds a newer seq): queue them without walking the
	// ring, so a NAK for old seqs costs O(1) here, flood or not.
	if ring := uint64(s.cfg.RingSlots); s.next > ring && from < s.next-ring {
		oldEnd := min(end, s.next-ring)
		s.queueCold(from, oldEnd-from, now)
		from = oldEnd
	}
	var coldFrom uint64
	for seq := from; seq < end; seq++ {
		i := seq & s.mask
		if s.slotSeq[i] != seq {
			if coldFrom == 0 {
				coldFrom = seq
			}
			continue
		}
		if coldFrom != 0 {
			s.queueCold(coldFrom, seq-coldFrom, now)
			coldFrom = 0
		}
		if s.dedup > 0 && now-s.retxAt[i] < s.dedup {
			s.stats.RetxDedup++
			continue
		}
		off := int(i) * s.slot
		if !s.emit(s.ring[off:off+int(s.slotLen[i])], seq, out) {
			return seq
		}
		s.retxAt[i] = now
		s.stats.RetxHot++
	}
	if coldFrom != 0 {
		s.queueCold(coldFrom, end-coldFrom, now)
	}
	return end
}

// deferRetx remembers a NAKed range that did not fit in the batch; Tick
// continues it. Ranges beyond maxDeferred are dropped and counted (the
// receiver asks again).
func (s *Sender) deferRetx(from, end uint64) {
	s.stats.RetxDeferred++
	if len(s.retx) == cap(s.retx) {
		s.stats.RetxDropped += end - from
		return
	}
	s.retx = append(s.retx, retxRange{from, end})
}

// RetxPending reports whether NAKed retransmits wait for room in the
// batch: the loop flushes and calls Tick again without waiting.
func (s *Sender) RetxPending() bool { return len(s.retx) > 0 }

func (s *Sender) drainRetx(now int64, out *batch.Vec) {
	k := 0
	for k < len(s.retx) {
		r := &s.retx[k]
		seq := s.serveRange(r.from, r.end, now, out)
		if seq < r.end {
			r.from = seq
			break
		}
		k++
	}
	if k > 0 {
		n := copy(s.retx, s.retx[k:])
		s.retx = s.retx[:n]
	}
}

// queueCold queues [from, from+n) for a cold read, skipping seqs already
// covered by a queued or running request or served within the dedup
// window, splitting by MaxColdRecords and spending the cold budget.
func (s *Sender) queueCold(from, n uint64, now int64) {
	if s.log == nil {
		s.stats.ColdRejected += n
		return
	}
	s.refillCold(now)
	end := from + n
	for from < end {
		if s.coldTokens < 1e9 {
			s.stats.ColdOverBudget += end - from
			return
		}
		// Skip the prefix covered by an existing request or a recent serve.
		if c := s.coveredUntil(from, now); c > from {
			if c > end {
				c = end
			}
			s.stats.ColdDedup += c - from
			from = c
			continue
		}
		k := end - from
		if k > uint64(s.cfg.MaxColdRecords) {
			k = uint64(s.cfg.MaxColdRecords)
		}
		// Stop before the next covered seq so requests never overlap.
		if c := s.nextCovered(from, now); c < from+k {
			k = c - from
		}
		if budget := uint64(s.coldTokens / 1e9); k > budget {
			k = budget
		}
		slot := -1
		for j := range s.cold {
			if !s.cold[j].used {
				slot = j
				break
			}
		}
		if slot < 0 {
			s.stats.ColdRejected += end - from
			return
		}
		s.cold[slot] = coldSlot{req: ColdRequest{From: from, Count: int(k)}, used: true}
		s.coldTokens -= int64(k) * 1e9
		s.stats.ColdQueued++
		from += k
	}
}

// refillCold adds the cold budget earned since the last refill.
func (s *Sender) refillCold(now int64) {
	if s.coldAt == never {
		s.coldAt = now
		return
	}
	el := now - s.coldAt
	if el <= 0 {
		return
	}
	s.coldAt = now
	if room := s.coldFull - s.coldTokens; el >= room/s.cfg.ColdRate+1 {
		s.coldTokens = s.coldFull
	} else {
		s.coldTokens += el * s.cfg.ColdRate
	}
}

// coveredUntil returns the end (exclusive) of the queued or running
// request, or of the range served within the dedup window, that covers
// seq; 0 if none does.
func (s *Sender) coveredUntil(seq uint64, now int64) uint64 {
	for j := range s.cold {
		c := &s.cold[j]
		if c.used && seq >= c.req.From && seq < c.req.From+uint64(c.req.Count) {
			return c.req.From + uint64(c.req.Count)
		}
	}
	for j := range s.recent {
		r := &s.recent[j]
		if seq >= r.from && seq < r.end && now-r.at < s.dedup {
			return r.end
		}
	}
	return 0
}

// nextCovered returns the lowest seq above from at which a queued or
// running request, or a range served within the dedup window, begins
// (MaxUint64 if none).
func (s *Sender) nextCovered(from uint64, now int64) uint64 {
	next := uint64(math.MaxUint64)
	for j := range s.cold {
		if c := &s.cold[j]; c.used && c.req.From > from && c.req.From < next {
			next = c.req.From
		}
	}
	for j := range s.recent {
		if r := &s.recent[j]; r.from > from && r.from < next && now-r.at < s.dedup {
			next = r.from
		}
	}
	return next
}

// ColdRequests copies queued cold reads into dst, lowest seqs first (the
// receiver delivers in order), marks them running and returns how many
// it copied: at most MaxColdInFlight are running at once. The loop reads
// each on its I/O goroutine (e.g. with wal.Writer.ReadRange) and reports
// back with ColdDone or ColdFailed on the Sender's goroutine.
func (s *Sender) ColdRequests(dst []ColdRequest) int {
	n := 0
	for n < len(dst) && s.running < s.cfg.MaxColdInFlight {
		best := -1
		for j := range s.cold {
			c := &s.cold[j]
			if c.used && !c.taken && (best < 0 || c.req.From < s.cold[best].req.From) {
				best = j
			}
		}
		if best < 0 {
			break
		}
		s.cold[best].taken = true
		s.running++
		dst[n] = s.cold[best].req
		n++
	}
	return n
}

// ColdPending reports whether cold requests wait to be taken by
// ColdRequests and one may be taken now.
func (s *Sender) ColdPending() bool {
	if s.running >= s.cfg.MaxColdInFlight {
		return false
	}
	for j := range s.cold {
		if s.cold[j].used && !s.cold[j].taken {
			return true
		}
	}
	return false
}

// ColdDone hands back frames read for req: consecutive whole frames as
// stored in the WAL. Each valid data frame whose seq lies in req is
// appended to out as a retransmit. When out fills, ColdDone returns the
// frames not yet sent (a sub-slice of frames); the loop flushes out and
// calls ColdDone again with them. The request is finished, and its
// in-flight slot freed, when the returned slice is empty. Records the WAL
// did not return are counted as ColdMissing.
func (s *Sender) ColdDone(req ColdRequest, frames []byte, now int64, out *batch.Vec) (rest []byte) {
	c := s.findCold(req)
	if c == nil {
		return nil // unknown or already finished request
	}
	end := req.From + uint64(req.Count)
	for len(frames) > 0 {
		_, p, n, err := wal.DecodeFrame(frames)
		if err != nil {
			s.stats.Bad.count(err, true)
			frames = nil
			break
		}
		seq := wal.Seq(p)
		if seq >= req.From && seq < end && len(p) >= 8 {
			if !s.emit(frames[:n], seq, out) {
				return frames
			}
			c.served++
			s.stats.RetxCold++
		}
		frames = frames[n:]
	}
	if c.served < req.Count {
		s.stats.ColdMissing += uint64(req.Count - c.served)
	}
	s.recent[s.recentNext] = coldServed{from: req.From, end: end, at: now}
	s.recentNext = (s.recentNext + 1) % coldRecentSlots
	s.finishCold(c)
	return nil
}

// ColdFailed reports that the read for req failed; its slot is freed and
// the receiver will ask again.
func (s *Sender) ColdFailed(req ColdRequest) {
	if c := s.findCold(req); c != nil {
		s.finishCold(c)
		s.stats.ColdErrors++
	}
}

func (s *Sender) finishCold(c *coldSlot) {
	*c = coldSlot{}
	s.running--
}

func (s *Sender) findCold(req ColdRequest) *coldSlot {
	for j := range s.cold {
		c := &s.cold[j]
		if c.used && c.taken && c.req == req {
			return c
		}
	}
	return nil
}
