package benchkit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/cast"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath/mmsg"
	"github.com/walcast/walcast/wal"
	"github.com/walcast/walcast/wire"
)

// Cost runs one row of the breakdown (a name of CostRows) for
// c.Duration at c.Size-byte frames, senders pinned to c.CPUs[0] and
// receivers to c.CPUs[1], at most c.Window records in flight.
func Cost(name string, c ThroughputConfig) (CostRow, error) {
	if err := c.Validate(); err != nil {
		return CostRow{}, err
	}
	if c.Size < wire.HeaderSize+8 {
		return CostRow{}, fmt.Errorf("benchkit: cost rows need frames of at least %d bytes", wire.HeaderSize+8)
	}
	var r CostRow
	var err error
	switch name {
	case "floor-gso-gro":
		r, err = costRaw(c, func(c ThroughputConfig) (costEnds, error) { return costFloor(c, false) })
	case "floor+frame":
		r, err = costRaw(c, func(c ThroughputConfig) (costEnds, error) { return costFloor(c, true) })
	case "datapath":
		r, err = costRaw(c, func(c ThroughputConfig) (costEnds, error) { return costDatapath(c, dpPlain) })
	case "+framing/crc":
		r, err = costRaw(c, func(c ThroughputConfig) (costEnds, error) { return costDatapath(c, dpFraming) })
	case "+ring-copy":
		r, err = costRaw(c, func(c ThroughputConfig) (costEnds, error) { return costDatapath(c, dpRing) })
	case "casting-noflow":
		r, err = costCasting(c, false, false)
	case "casting":
		r, err = costCasting(c, true, false)
	case "casting+wal":
		r, err = costCasting(c, true, true)
	case "wal-alone":
		r, err = costRaw(c, costWAL)
	default:
		return CostRow{}, fmt.Errorf("benchkit: no cost row %q (have %s)", name, strings.Join(CostRows, ", "))
	}
	r.Name, r.Size = name, c.Size
	return r, err
}

// costEnds is a row's two ends for costRaw: tx sends one batch and
// returns the records it took (0: none, an idle poll), rx receives once
// and returns the records that arrived (0: an idle poll); rx nil: no
// receiver (flush then says what the sends made durable).
type costEnds struct {
	tx, rx func() (int, error)
	flush  func() error
	close  func()
	note   func() string
}

// costClock is one measured thread's account: every poll during the
// traffic reads the thread's CPU clock once, and the CPU time since the
// previous read goes to the poll, as work or, when the poll found
// nothing to do, as idle.
type costClock struct {
	tid        atomic.Int64
	prev       int64
	cpu, idleC int64
	idle, it   uint64
	out        atomic.Pointer[CostSide]
}

// tick accounts for the poll that just ended; phase is the row's phase
// (0 before the traffic, 1 during it, 2 after). After the traffic it
// publishes the account, once.
func (k *costClock) tick(phase int32, idle bool) {
	switch phase {
	case 0:
		return
	case 2:
		if k.out.Load() == nil {
			k.out.Store(&CostSide{CPU: k.cpu, IdleCPU: k.idleC, Idle: k.idle, Iters: k.it})
		}
		return
	}
	now := SelfThreadTime()
	if k.prev != 0 {
		d := now - k.prev
		k.cpu += d
		k.it++
		if idle {
			k.idleC += d
			k.idle++
		}
	}
	k.prev = now
}

// costMeter holds a row's phase and its two threads' accounts.
type costMeter struct {
	phase    atomic.Int32
	snd, rcv costClock
}

type costMark struct {
	other, soft int64 // every thread but the two measured (schedstat); ksoftirqd
	at          time.Time
}

func (m *costMeter) mark(soft []int) costMark {
	k := costMark{at: time.Now()}
	if all, err := ThreadTimes(); err == nil {
		for tid, ns := range all {
			if int64(tid) != m.snd.tid.Load() && int64(tid) != m.rcv.tid.Load() {
				k.other += ns
			}
		}
	}
	for _, pid := range soft {
		if ns, err := threadTime(fmt.Sprintf("/proc/%d/schedstat", pid)); err == nil {
			k.soft += ns
		}
	}
	return k
}

// begin marks the start of the traffic; end its end, and waits (5 s at
// most) for the threads' accounts.
func (m *costMeter) begin(soft []int) costMark {
	k := m.mark(soft)
	m.phase.Store(1)
	return k
}

func (m *costMeter) end(soft []int, r *CostRow, t0 costMark, recv bool) error {
	m.phase.Store(2)
	t1 := m.mark(soft)
	r.Other = max(0, t1.other-t0.other)
	r.Softirq = t1.soft - t0.soft
	r.Seconds = t1.at.Sub(t0.at).Seconds()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		s, v := m.snd.out.Load(), m.rcv.out.Load()
		if s != nil && (v != nil || !recv) {
			r.Send = *s
			if v != nil {
				r.Recv = *v
			}
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("benchkit: cost: a measured thread did not report its account within 5 s")
		}
	}
}

// softirqPIDs are the kernel's ksoftirqd threads.
func softirqPIDs() []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm")); err == nil && strings.HasPrefix(string(b), "ksoftirqd/") {
			out = append(out, pid)
		}
	}
	return out
}

// costRaw runs a row whose ends are plain loops: the sender thread
// calls tx while fewer than c.Window records are in flight (a poll that
// must wait counts as idle), the receiver thread calls rx. After
// c.Duration the sender stops sending; once the receiver has what was
// sent (or made no progress for 2 s) the traffic ends, and both threads
// go on polling idle for costTail.
func costRaw(c ThroughputConfig, open func(ThroughputConfig) (costEnds, error)) (CostRow, error) {
	ends, err := open(c)
	if err != nil {
		return CostRow{}, err
	}
	defer ends.close()
	affinity.EnsureGOMAXPROCS(2)
	soft := softirqPIDs()
	var m costMeter
	var sending, stop, stopped atomic.Bool
	var sent, got atomic.Int64
	var txErr, rxErr error
	var rxDone <-chan struct{}
	if ends.rx != nil {
		rxDone, err = floorThread(c.CPUs[1], func() {
			m.rcv.tid.Store(int64(Gettid()))
			var n64 int64
			for !stop.Load() {
				n, err := ends.rx()
				if err != nil {
					rxErr = err
					return
				}
				n64 += int64(n)
				got.Store(n64)
				m.rcv.tick(m.phase.Load(), n == 0)
			}
		})
		if err != nil {
			return CostRow{}, err
		}
	}
	sending.Store(true)
	txDone, err := floorThread(c.CPUs[0], func() {
		m.snd.tid.Store(int64(Gettid()))
		var s64 int64
		for !stop.Load() {
			ph := m.phase.Load()
			if ph == 1 && !sending.Load() && !stopped.Load() {
				stopped.Store(true) // sent is final
			}
			if ph == 0 || !sending.Load() || ends.rx != nil && c.Window > 0 && s64-got.Load() > int64(c.Window) {
				m.snd.tick(ph, true)
				continue
			}
			n, err := ends.tx()
			if err != nil {
				txErr = err
				sending.Store(false)
				continue
			}
			s64 += int64(n)
			sent.Store(s64)
			m.snd.tick(ph, n == 0)
		}
	})
	if err != nil {
		stop.Store(true)
		if rxDone != nil {
			<-rxDone
		}
		return CostRow{}, err
	}
	for m.snd.tid.Load() == 0 || (ends.rx != nil && m.rcv.tid.Load() == 0) {
		time.Sleep(time.Millisecond)
	}
	t0 := m.begin(soft)
	time.Sleep(c.Duration)
	sending.Store(false)
	for t := time.Now(); !stopped.Load() && time.Since(t) < 5*time.Second; {
		time.Sleep(time.Millisecond)
	}
	var flushErr error
	if ends.rx != nil {
		last, since := got.Load(), time.Now()
		for got.Load() < sent.Load() && time.Since(since) < 2*time.Second && rxErr == nil {
			time.Sleep(time.Millisecond)
			if g := got.Load(); g != last {
				last, since = g, time.Now()
			}
		}
	} else if ends.flush != nil {
		flushErr = ends.flush()
	}
	var r CostRow
	endErr := m.end(soft, &r, t0, ends.rx != nil)
	stop.Store(true)
	<-txDone
	if rxDone != nil {
		<-rxDone
	}
	if err := errors.Join(txErr, rxErr, flushErr, endErr); err != nil {
		return CostRow{}, err
	}
	r.Sent, r.Delivered = sent.Load(), got.Load()
	if ends.rx == nil {
		r.Delivered = r.Sent
	}
	if ends.note != nil {
		r.Note = ends.note()
	}
	return r, nil
}

// costFloor is floor-gso-gro's pair and system calls (ThroughputFloor):
// one sendto of as many frames as fit 65 000 bytes with UDP_SEGMENT,
// recvmsg into 64 KiB with UDP_GRO, frames counted from the segment
// size the kernel reports.
//
// framed is floor+frame: the same system calls, plus the per-record work
// the wire format asks of any implementation that can retransmit from
// memory, and nothing else of ours. The sender copies each record's
// payload from the producer's buffer into the next slot of a ring as
// large as the casting Sender's hot ring (protocol.DefaultSendRingSlots
// frames), stamps its seq and seals it (wire.Seal: header, CRC-32C of
// the payload), and sends the batch's slots, back to back in the ring,
// in one sendto; the receiver decodes and checks every frame
// (wire.DecodeFrame: header, CRC). No reorder window, no flow control,
// no Status, no delivery callback.
func costFloor(c ThroughputConfig, framed bool) (costEnds, error) {
	tx, rx, err := floorGSOPair(c.Size)
	if err != nil {
		return costEnds{}, err
	}
	closeFn := func() { unix.Close(tx); unix.Close(rx) }
	fb := newFloorBatch(c, framed)
	per := fb.per
	send := func() (int, error) {
		e := rawSend(tx, fb.next())
		if e == unix.EAGAIN || e == unix.ENOBUFS || e == unix.EINTR {
			return 0, nil
		}
		if e != 0 {
			return 0, fmt.Errorf("benchkit: cost floor sendto: %w", e)
		}
		fb.sent()
		return per, nil
	}
	g := newGRORecv(rx)
	recv := func() (int, error) {
		k, e := g.recv()
		if e == unix.EAGAIN || e == unix.EINTR {
			return 0, nil
		}
		if e != 0 {
			return 0, fmt.Errorf("benchkit: cost floor recvmsg: %w", e)
		}
		if framed && !checkFrames(g.buf[:g.n]) {
			return 0, errFrameCheck
		}
		return k, nil
	}
	note := func() string { return fmt.Sprintf("%d frames per GSO send", per) }
	return costEnds{tx: send, rx: recv, close: closeFn, note: note}, nil
}

// The datapath rows' layers: costDatapath's stack and what it adds.
const (
	dpPlain   = iota // datapath: frames with a seq stamped
	dpFraming        // +framing/crc: each frame sealed in place
	dpRing           // +ring copy: each record copied into a ring, then sealed
)

// costDatapath is datapath/mmsg with GSO and GRO (as c asks): batches
// of c.Batch frames. From dpFraming on each frame is sealed on send (seq,
// header, CRC32C) and decoded and checked on receive. dpRing copies each
// record from the producer's buffer into the next slot of a ring the
// casting Sender's hot ring's size first, as its Sender does, and sends
// views of those slots (rebuilt every batch, as the loop's batch is).
func costDatapath(c ThroughputConfig, layer int) (costEnds, error) {
	rc := mmsg.DefaultConfig()
	rc.NoGRO, rc.Batch = !c.GRO, c.Batch
	rx, err := mmsg.New(rc)
	if err != nil {
		return costEnds{}, err
	}
	sc := mmsg.DefaultConfig()
	sc.NoGSO, sc.Batch, sc.Peer = !c.GSO, c.Batch, rx.LocalAddr()
	tx, err := mmsg.New(sc)
	if err != nil {
		rx.Close()
		return costEnds{}, err
	}
	sv, frames := sendViews(c)
	rv := batch.New(c.Batch, 2048)
	framing := layer != dpPlain
	var rs *ringSend
	if layer == dpRing {
		rs = newRingSend(c, sv)
	}
	var seq uint64
	var bad int64
	send := func() (int, error) {
		if rs != nil {
			if err := rs.fill(seq); err != nil {
				return 0, err
			}
		} else {
			for j, b := range frames {
				if framing {
					binary.LittleEndian.PutUint64(b[wire.HeaderSize:], seq+uint64(j))
					if err := wire.Seal(b, 1); err != nil {
						return 0, err
					}
				} else {
					binary.LittleEndian.PutUint64(b, seq+uint64(j))
				}
			}
		}
		n, err := tx.Send(sv)
		seq += uint64(n)
		if rs != nil {
			rs.sent(n)
		}
		return n, err
	}
	recv := func() (int, error) {
		n, err := rx.Recv(rv)
		if err != nil || n == 0 {
			return 0, err
		}
		for i := 0; i < n; i++ {
			m, _ := rv.Msg(i)
			if !framing {
				if len(m) != c.Size {
					bad++
				}
				continue
			}
			if _, _, size, err := wire.DecodeFrame(m); err != nil || size != len(m) {
				bad++
			}
		}
		return n, nil
	}
	note := func() string {
		if bad > 0 {
			return fmt.Sprintf("%d frames bad", bad)
		}
		return ""
	}
	return costEnds{tx: send, rx: recv, close: func() { tx.Close(); rx.Close() }, note: note}, nil
}

// ringSend builds +ring-copy's batches: a send's worth of records, each
// copied from the producer's buffer into the next slot of a ring of whole
// batches at least as large as the casting Sender's hot ring, its seq
// stamped and sealed, and appended to v as a view of its slot.
type ringSend struct {
	v            *batch.Vec
	ring, record []byte
	per, size    int
	off          int // where the next batch starts in ring
}

func newRingSend(c ThroughputConfig, v *batch.Vec) *ringSend {
	per := c.PerSend()
	return &ringSend{v: v, per: per, size: c.Size,
		ring:   make([]byte, (protocol.DefaultSendRingSlots+per-1)/per*per*c.Size),
		record: make([]byte, c.Size-wire.HeaderSize)}
}

// fill makes v the next batch, its records numbered from seq; it starts
// over at the ring's start when the batch would not fit before its end.
func (r *ringSend) fill(seq uint64) error {
	if r.off+r.per*r.size > len(r.ring) {
		r.off = 0
	}
	r.v.Reset()
	for j := 0; j < r.per; j++ {
		at := r.off + j*r.size
		fr := r.ring[at : at+r.size : at+r.size]
		copy(fr[wire.HeaderSize:], r.record)
		binary.LittleEndian.PutUint64(fr[wire.HeaderSize:], seq+uint64(j))
		if err := wire.Seal(fr, 1); err != nil {
			return err
		}
		r.v.AppendView(fr, netip.AddrPort{})
	}
	return nil
}

// sent moves past the n records of the batch that went out; the next
// batch starts right after them.
func (r *ringSend) sent(n int) { r.off += n * r.size }

// costWAL is wal-alone: the sender thread appends c.Batch records per
// call to a wal.Writer in a fresh directory under c.Dir (a call the
// Writer refuses for backpressure is an idle poll); its I/O goroutine
// counts as the other threads. No receiver: what Flush made durable.
func costWAL(c ThroughputConfig) (costEnds, error) {
	dir, err := os.MkdirTemp(c.Dir, "walcast-cost-wal-")
	if err != nil {
		return costEnds{}, err
	}
	w, err := wal.Open(walConfig(dir))
	if err != nil {
		os.RemoveAll(dir)
		return costEnds{}, err
	}
	p := make([]byte, c.Size-wire.HeaderSize)
	send := func() (int, error) {
		for k := 0; k < c.Batch; k++ {
			if _, err := w.Append(1, p); err != nil {
				if errors.Is(err, wal.ErrBackpressure) {
					return k, nil
				}
				return k, err
			}
		}
		return c.Batch, nil
	}
	note := func() string {
		st := w.Stats()
		return fmt.Sprintf("%d flushes (p50 %v), backpressure %d, direct=%v", st.Flushes, st.FlushP50.Round(time.Microsecond), st.Backpressure, st.Direct)
	}
	return costEnds{tx: send, flush: w.Flush, close: func() { w.Close(); os.RemoveAll(dir) }, note: note}, nil
}

// costCasting runs cast.Loop on each side over datapath/mmsg: the
// producer inside the sender's loop (OnPoll, at most c.Batch records per
// iteration and c.Window in flight), the records counted in the
// receiver's OnRecord. flow: flow control and Status frames (the
// defaults); without, the sender ignores Status and the receiver sends
// none. withWAL: a wal.Writer is the Sender's log. The loops' own
// counters give the idle polls.
func costCasting(c ThroughputConfig, flow, withWAL bool) (CostRow, error) {
	a, b, err := ConnectedMmsg(c.GSO, c.GRO, c.Batch)
	if err != nil {
		return CostRow{}, err
	}
	var w *wal.Writer
	if withWAL {
		dir, err := os.MkdirTemp(c.Dir, "walcast-cost-")
		if err != nil {
			a.Close()
			b.Close()
			return CostRow{}, err
		}
		defer os.RemoveAll(dir)
		if w, err = wal.Open(walConfig(dir)); err != nil {
			a.Close()
			b.Close()
			return CostRow{}, err
		}
		defer w.Close()
	}
	soft := softirqPIDs()
	var m costMeter
	var delivered, produced atomic.Int64
	var sending, stopped atomic.Bool
	var sendErr error
	rc := protocol.DefaultReceiverConfig()
	rc.ReorderSlots, rc.NoStatus = 1<<16, !flow
	rcv, err := protocol.NewReceiver(rc)
	if err != nil {
		a.Close()
		b.Close()
		return CostRow{}, err
	}
	slot := max(protocol.DefaultMaxFrame, 2048)
	var got, gotPrev int64 // receiver loop only
	rl, err := cast.NewLoop(cast.LoopConfig{Path: b, Receiver: rcv, Thread: affinity.OnCPU(c.CPUs[1]), Batch: c.Batch, Slot: slot,
		OnRecord: func(*cast.Loop, wire.Header, []byte) { got++ },
		OnPoll: func(*cast.Loop, int64) {
			if m.rcv.tid.Load() == 0 {
				m.rcv.tid.Store(int64(Gettid()))
			}
			// Since the last OnPoll: the end of the last iteration and
			// this one's receive; idle when it delivered nothing.
			m.rcv.tick(m.phase.Load(), got == gotPrev)
			if got != gotPrev {
				delivered.Store(got)
				gotPrev = got
			}
		}})
	if err != nil {
		a.Close()
		b.Close()
		return CostRow{}, err
	}
	defer rl.Close()
	if err := rl.Start(); err != nil {
		a.Close()
		return CostRow{}, err
	}
	sc := protocol.DefaultSenderConfig()
	sc.NoFlowControl = !flow
	var log protocol.Log
	var cold cast.ColdReader
	if w != nil {
		log, cold = w, w
	}
	snd, err := protocol.NewSender(sc, log)
	if err != nil {
		a.Close()
		return CostRow{}, err
	}
	per := c.PerSend()
	payloads := sameRecord(per, c.Size-wire.HeaderSize)
	var n64, nPrev int64 // sender loop only
	sl, err := cast.NewLoop(cast.LoopConfig{Path: a, Sender: snd, Cold: cold, Thread: affinity.OnCPU(c.CPUs[0]), Batch: c.Batch, Slot: slot,
		OnPoll: func(l *cast.Loop, _ int64) {
			if m.snd.tid.Load() == 0 {
				m.snd.tid.Store(int64(Gettid()))
			}
			// Since the last OnPoll: the flush of what it sent and this
			// iteration's receive; idle when it sent nothing.
			m.snd.tick(m.phase.Load(), n64 == nPrev)
			nPrev = n64
			if !sending.Load() {
				if m.phase.Load() == 1 {
					stopped.Store(true) // produced is final
				}
				return
			}
			// The receiver's count read once a poll, as the floor reads
			// its count once a send.
			k, err := castingPoll(l, payloads, n64-delivered.Load(), c.Window)
			n64 += k
			if err != nil {
				sendErr = err
				sending.Store(false)
			}
			produced.Store(n64)
		}})
	if err != nil {
		a.Close()
		return CostRow{}, err
	}
	defer sl.Close()
	if err := sl.Start(); err != nil {
		return CostRow{}, err
	}
	for m.snd.tid.Load() == 0 || m.rcv.tid.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	t0 := m.begin(soft)
	sending.Store(true)
	time.Sleep(c.Duration)
	sending.Store(false)
	for t := time.Now(); !stopped.Load() && time.Since(t) < 5*time.Second; {
		time.Sleep(time.Millisecond)
	}
	last, since := delivered.Load(), time.Now()
	for delivered.Load() < produced.Load() && time.Since(since) < 3*time.Second {
		time.Sleep(time.Millisecond)
		if d := delivered.Load(); d != last {
			last, since = d, time.Now()
		}
	}
	var r CostRow
	if err := m.end(soft, &r, t0, true); err != nil {
		return CostRow{}, err
	}
	if sendErr != nil {
		return CostRow{}, sendErr
	}
	r.Sent, r.Delivered = produced.Load(), delivered.Load()
	ss, rs := sl.SenderStats(), rl.ReceiverStats()
	r.Note = fmt.Sprintf("naks=%d retx=%d status_sent=%d", rs.NaksSent, ss.RetxHot+ss.RetxCold, rs.StatusSent)
	if w != nil {
		st := w.Stats()
		r.Note += fmt.Sprintf(" wal: %d flushes (p50 %v), backpressure %d, direct=%v", st.Flushes, st.FlushP50.Round(time.Microsecond), st.Backpressure, st.Direct)
	}
	return r, nil
}
