package wal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walcast/walcast/wal/internal/unix"
	"github.com/walcast/walcast/wire"
)

// Writer appends records to one stream's log. One goroutine calls Append
// (and NextSeq); a dedicated I/O goroutine writes and syncs; ReadAt,
// ReadRange, Durable, WaitDurable, Bounds, Flush and Stats may be called
// from any goroutine. Close must not run concurrently with Append.
//
// Memory: Append copies each frame into a ring of BufferSize bytes; the
// I/O goroutine copies runs of frames from the ring into an aligned
// staging buffer, writes whole aligned blocks at the segment's tail
// (rewriting the partial tail block in place, zero after the last
// record), fdatasyncs, then publishes the durable seq, extends the seq
// index and releases the ring space.
type Writer struct {
	cfg   Config
	dir   string
	sys   sysOps
	epoch time.Time
	lock  *streamLock

	// ring: frames at monotonically increasing positions; physical index
	// pos & rmask. A frame never wraps: when it does not fit before the end
	// of the array the position skips to the next multiple of the size.
	ring  []byte
	rmask uint64
	rpos  []uint64 // ring position of seq s at rpos[s&smask]
	smask uint64

	// Appender-owned.
	seq     uint64 // next seq to assign
	head    uint64 // next free ring position
	relPos  uint64 // cached releasedPos
	seqLim  uint64 // cached min(releasedSeq + slots − 1, reserved): highest seq Append may assign
	kickSeq uint64
	kickPos uint64
	lagN    uint32
	lagging bool

	// Shared.
	published   atomic.Uint64 // highest appended seq
	durable     atomic.Uint64 // highest fdatasynced seq
	releasedSeq atomic.Uint64 // every seq ≤ this is on disk and out of the ring
	releasedPos atomic.Uint64 // ring positions below this are free
	flushStart  atomic.Int64  // ns since epoch of the running/failing flush; 0 idle
	oldest      atomic.Uint64
	reserved    atomic.Uint64 // highest seq covered by the durable reservation (reserve.go)
	closed      atomic.Bool
	ioErr       atomic.Pointer[ioError]
	attempts    atomic.Uint64 // flush attempts finished (success or failure)

	bpCount     atomic.Uint64
	coldReads   atomic.Uint64
	bufReads    atomic.Uint64
	readScratch chan []byte // free aligned read buffers (a channel, not a sync.Pool: deterministic, allocation-free reuse)

	mu   sync.RWMutex // segs, active index growth, release, close
	segs []*segment   // sealed by first seq, then the active segment last

	notifyMu sync.Mutex
	notify   chan struct{}

	kick chan struct{}
	quit chan struct{}
	done chan struct{}

	// I/O-goroutine-owned.
	committed uint64 // == durable
	act       *segment
	actEnd    int64  // data bytes in the active segment
	actIdxFd  int    // sidecar of the active segment (-1 when broken)
	stage     []byte // aligned staging buffer
	tailBlock []byte // committed bytes of the partial tail block
	ents      []byte // index entries of the current flush
	align     int64
	direct    bool
	dirNote   string
	rot       rotation
	seqFd     int    // reservation file
	seqGen    uint64 // generation of its last slot written
	skipFrame []byte // the Skip marker Open wrote after a crash, or nil

	statsMu sync.Mutex
	st      ioStats
}

// segment is one file of the log as the Writer knows it.
type segment struct {
	first, last uint64 // last < first while empty
	path        string
	fd          int
	idx         []byte // index entries (sidecar mmap or memory)
	mapped      []byte // mmap of the sidecar, unmapped when dropped
	sealed      bool
}

func (s *segment) count() uint64 {
	if s.last < s.first {
		return 0
	}
	return s.last - s.first + 1
}

type rotation struct {
	nextFd  int // preallocated next active (tmp name), -1 when none
	sealed  bool
	tmpPath string
	spare   []byte // the sealed segment's in-memory index array, for the next one
}

const readScratchSize = 256 << 10

// Open opens (creating if needed) the log of cfg.Stream under cfg.Dir,
// recovers it — truncating a torn tail of the active segment and
// rebuilding missing or stale indexes — and starts the I/O goroutine.
// NextSeq is the last recovered seq + 1 (1 on an empty log).
func Open(cfg Config) (*Writer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	dir := StreamDir(cfg.Dir, cfg.Stream)
	made, err := mkdirs(dir)
	if err != nil {
		return nil, fmt.Errorf("wal: open: %w", err)
	}
	w := &Writer{
		cfg:      cfg,
		dir:      dir,
		sys:      defaultSys,
		epoch:    time.Now(),
		actIdxFd: -1,
		seqFd:    -1,
		notify:   make(chan struct{}),
		kick:     make(chan struct{}, 1),
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
		align:    pageSize,
	}
	w.rot.nextFd = -1
	if cfg.sys != nil {
		w.sys = *cfg.sys
	}
	// A refused Open (a damaged or mislabelled log, a locked one) leaves
	// the directory as it was: what Open created up to the refusal goes
	// again, and nothing is created before the log is known whole.
	refuse := func(err error) (*Writer, error) {
		w.lock.release(false)
		w.lock = nil
		w.closeFiles()
		for i := len(made) - 1; i >= 0; i-- {
			os.Remove(made[i]) // only if still empty
		}
		return nil, err
	}
	if w.lock, err = lockStream(dir, cfg.Stream); err != nil {
		return refuse(err)
	}
	reserved, _, err := readReservation(filepath.Join(dir, seqFileName(cfg.Stream)))
	if err != nil {
		return refuse(err)
	}
	if err := w.recover(); err != nil {
		var de *DamageError
		var me *MislabelError
		if cfg.Repair && (errors.As(err, &de) || errors.As(err, &me)) {
			w.closeSegments()
			var rep RepairReport
			if rep, err = repairLocked(dir, cfg.Stream); err == nil {
				err = w.recover()
				w.st.recovery.Repaired = &rep
			}
		}
		if err != nil {
			return refuse(err)
		}
	}
	if err := w.openReservation(); err != nil {
		w.closeFiles()
		return nil, err
	}
	c := uint64(1) << bits.Len64(uint64(cfg.BufferSize-1))
	w.ring = make([]byte, c)
	w.rmask = c - 1
	ns := c / 32
	w.rpos = make([]uint64, ns)
	w.smask = ns - 1
	stageSize := min(int64(c), 4<<20) + 2*w.align
	w.stage = alignedBuf(int(stageSize), int(w.align))
	w.readScratch = make(chan []byte, 8)
	if reserved > w.committed {
		// A crash: seqs committed+1 … reserved may have been handed out
		// (and sent) without becoming durable. Continue past them.
		if err := w.skipPast(reserved); err != nil {
			w.closeFiles()
			return nil, err
		}
	}
	last := w.committed
	w.seq = last + 1
	w.published.Store(last)
	w.durable.Store(last)
	w.releasedSeq.Store(last)
	w.kickSeq = last
	if err := w.writeReservation(last + uint64(cfg.SeqReserve)); err != nil {
		w.closeFiles()
		return nil, err
	}
	w.seqLim = min(last+w.smask, w.reserved.Load())
	go w.ioLoop()
	if w.skipFrame != nil {
		if err := w.writeSkip(); err != nil {
			w.Close()
			return nil, err
		}
	}
	return w, nil
}

// mkdirs is os.MkdirAll that returns the directories it created,
// outermost first.
func mkdirs(dir string) ([]string, error) {
	var made []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		made = append(made, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	slices.Reverse(made)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return made, nil
}

func (w *Writer) now() int64 { return int64(time.Since(w.epoch)) + 1 }

// Flushing reports that the I/O goroutine is in a write + sync (or
// retrying a failed one). A spinning caller sharing cores with it yields
// then (cast.Loop does).
func (w *Writer) Flushing() bool { return w.flushStart.Load() != 0 }

// NextSeq is the seq the next Append will carry.
func (w *Writer) NextSeq() uint64 { return w.published.Load() + 1 }

// StallTimeout is how long a write+sync may go without returning before
// Err reports ErrStalled.
const StallTimeout = 5 * time.Second

// Err says whether appended records can become durable now: nil while
// flushes succeed; the failing flush's error while they fail (it wraps
// the I/O error: errors.Is(err, syscall.ENOSPC) on a full disk, and it
// matches ErrBackpressure); ErrStalled while a write+sync has not
// returned for StallTimeout. It clears by itself when a flush succeeds.
// It allocates nothing, so a loop may call it on every tick.
func (w *Writer) Err() error {
	if e := w.ioErr.Load(); e != nil {
		return e
	}
	if fs := w.flushStart.Load(); fs != 0 && w.now()-fs > int64(StallTimeout) {
		return ErrStalled
	}
	return nil
}

// Durable is the highest seq known fdatasynced (0 if none).
func (w *Writer) Durable() uint64 { return w.durable.Load() }

// Bounds returns the oldest seq still on disk or in the buffer and the
// highest seq appended; 0, 0 when the log is empty.
func (w *Writer) Bounds() (oldest, highest uint64) {
	h := w.published.Load()
	if h == 0 {
		return 0, 0
	}
	o := w.oldest.Load()
	if o == 0 || o > h {
		return 0, 0
	}
	return o, h
}

// Append stamps the next seq into payload[0:8] of a copy of payload, seals
// header and CRC once and queues the frame for the I/O goroutine. It never
// touches the disk and allocates nothing. The returned frame is the exact
// bytes that go on disk and on the wire; it is owned by the Writer and
// valid until the next Append or Close. The caller's payload is not
// modified. When the buffer is full or the flush lag exceeds MaxFlushLag it
// returns ErrBackpressure (an error that also wraps the I/O error while
// flushes fail) — or waits, with BlockOnBackpressure. Records are never
// dropped or reordered.
func (w *Writer) Append(typ uint16, payload []byte) (frame []byte, err error) {
	if len(payload) < 8 || len(payload) > wire.MaxPayload {
		return nil, ErrPayloadSize
	}
	if w.closed.Load() {
		return nil, ErrClosed
	}
	n := uint64(wire.HeaderSize + len(payload))
	var pos uint64
	for {
		var ok bool
		pos, ok = w.reserve(n)
		if ok {
			break
		}
		w.bpCount.Add(1)
		w.kickIO()
		if !w.cfg.BlockOnBackpressure {
			if e := w.ioErr.Load(); e != nil {
				return nil, e
			}
			return nil, ErrBackpressure
		}
		// Take the notification channel first, then look again: a flush
		// that finished between the first look and now has already closed
		// an older channel, and an idle I/O goroutine sends no further
		// wake-up (lost wake-up, found by cast bench wal).
		w.notifyMu.Lock()
		ch := w.notify
		w.notifyMu.Unlock()
		if pos, ok = w.reserve(n); ok {
			break
		}
		if w.closed.Load() {
			return nil, ErrClosed
		}
		select {
		case <-ch:
		case <-w.done:
			return nil, ErrClosed
		}
	}
	seq := w.seq
	phys := pos & w.rmask
	buf := w.ring[phys : phys+n : phys+n]
	copy(buf[wire.HeaderSize:], payload)
	binary.LittleEndian.PutUint64(buf[wire.HeaderSize:], seq)
	wire.Header{Type: typ, Len: uint16(len(payload)), CRC: wire.CRC(buf[wire.HeaderSize:])}.Put(buf)
	w.rpos[seq&w.smask] = pos
	w.head = pos + n
	w.seq = seq + 1
	w.published.Store(seq)
	if seq-w.kickSeq >= uint64(w.cfg.FlushRecords) || w.head-w.kickPos >= uint64(w.cfg.FlushBytes) {
		w.kickSeq, w.kickPos = seq, w.head
		w.kickIO()
	}
	return buf, nil
}

// reserve finds room for an n-byte frame; false means backpressure.
func (w *Writer) reserve(n uint64) (uint64, bool) {
	if fs := w.flushStart.Load(); fs != 0 {
		w.lagN++
		if w.lagN&15 == 1 {
			w.lagging = w.now()-fs > int64(w.cfg.MaxFlushLag)
		}
		if w.lagging {
			return 0, false
		}
	} else if w.lagN != 0 {
		w.lagN, w.lagging = 0, false
	}
	c := w.rmask + 1
	pos := w.head
	if phys := pos & w.rmask; phys+n > c {
		pos += c - phys
	}
	if pos+n-w.relPos > c || w.seq > w.seqLim {
		// The slot array and the seq reservation bound the seq in one
		// check: seqLim is the lower of the two limits.
		w.relPos = w.releasedPos.Load()
		w.seqLim = min(w.releasedSeq.Load()+w.smask, w.reserved.Load())
		if pos+n-w.relPos > c || w.seq > w.seqLim {
			return 0, false
		}
	}
	return pos, true
}

func (w *Writer) kickIO() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

func (w *Writer) broadcast() {
	w.notifyMu.Lock()
	close(w.notify)
	w.notify = make(chan struct{})
	w.notifyMu.Unlock()
}

// WaitDurable blocks until Durable() > after and returns it. It wakes on
// every flush (no polling). It returns ErrClosed once the Writer is closed
// and ctx.Err() when ctx ends.
func (w *Writer) WaitDurable(ctx context.Context, after uint64) (uint64, error) {
	for {
		w.notifyMu.Lock()
		ch := w.notify
		w.notifyMu.Unlock()
		if d := w.durable.Load(); d > after {
			return d, nil
		}
		if w.closed.Load() {
			return w.durable.Load(), ErrClosed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return w.durable.Load(), ctx.Err()
		case <-w.done:
		}
	}
}

// Flush makes everything appended so far durable before it returns, or
// returns the I/O error of the attempt that failed.
func (w *Writer) Flush() error {
	target := w.published.Load()
	start := w.attempts.Load()
	for {
		w.notifyMu.Lock()
		ch := w.notify
		w.notifyMu.Unlock()
		if w.durable.Load() >= target {
			return nil
		}
		if e := w.ioErr.Load(); e != nil && w.attempts.Load() > start+1 {
			return e.err
		}
		select {
		case <-w.done:
			if w.durable.Load() >= target {
				return nil
			}
			if e := w.ioErr.Load(); e != nil {
				return e.err
			}
			return ErrClosed
		default:
		}
		w.kickIO()
		select {
		case <-ch:
		case <-w.done:
		}
	}
}

// Close flushes what is buffered, stops the I/O goroutine and closes the
// files. The active segment stays active; Open recovers it. It returns the
// final flush's error, if any.
func (w *Writer) Close() error {
	if w.closed.Swap(true) {
		return ErrClosed
	}
	close(w.quit)
	<-w.done
	clean := w.durable.Load() >= w.published.Load()
	var rerr error
	if clean {
		// Everything handed out is durable: shrink the reservation so
		// that the next Open continues at durable + 1 without a Skip.
		rerr = w.writeReservation(w.durable.Load())
	}
	w.mu.Lock()
	w.closeFiles()
	w.mu.Unlock()
	w.broadcast()
	if e := w.ioErr.Load(); e != nil && !clean {
		return e.err
	}
	return rerr
}

func (w *Writer) closeFiles() {
	w.closeSegments()
	if w.rot.nextFd >= 0 {
		unix.Close(w.rot.nextFd)
		os.Remove(w.rot.tmpPath)
		w.rot.nextFd = -1
	}
	if w.seqFd >= 0 {
		unix.Close(w.seqFd)
		w.seqFd = -1
	}
	if w.lock != nil {
		w.lock.release(true)
		w.lock = nil
	}
}

// closeSegments closes the segment files and forgets them.
func (w *Writer) closeSegments() {
	for _, s := range w.segs {
		dropSegment(s)
	}
	if w.act != nil && (len(w.segs) == 0 || w.segs[len(w.segs)-1] != w.act) {
		dropSegment(w.act)
	}
	w.segs, w.act = nil, nil
	if w.actIdxFd >= 0 {
		unix.Close(w.actIdxFd)
		w.actIdxFd = -1
	}
}

func dropSegment(s *segment) {
	if s.fd >= 0 {
		unix.Close(s.fd)
		s.fd = -1
	}
	if s.mapped != nil {
		unix.Munmap(s.mapped)
		s.mapped = nil
	}
	s.idx = nil
}
