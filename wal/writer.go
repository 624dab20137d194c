package wal

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
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
	cfg    Config
	dir    string
	sys    sysOps
	epoch  time.Time
	lockFd int

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
	relSeq  uint64 // cached releasedSeq
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
}

type ioStats struct {
	flushes, flushErrs, rotations, pruned uint64
	lat                                   [1024]int64
	latN                                  uint64
	latMax                                int64
	lastErr                               string
	recovery                              Recovery
}

// Recovery describes what Open found and repaired.
type Recovery struct {
	Segments     int    // sealed segments found
	Records      uint64 // records in the log after recovery
	TornAt       int64  // byte offset in the active segment where a torn tail was cut (-1: none)
	TornReason   string // what was wrong with the first bad record
	IndexRebuilt int    // sidecar indexes rebuilt (missing or stale)
	ScannedBytes int64  // bytes of the active segment scanned past its index checkpoint
	// Corrupt lists damaged records found in the middle of segment data
	// ("file@offset"); they stay indexed (a read reports the damage) and
	// the records after them stay readable.
	Corrupt []string
}

// Stats is a snapshot of the Writer's counters.
type Stats struct {
	Direct       bool   // writes use O_DIRECT (false: buffered + fdatasync)
	DirectNote   string // why O_DIRECT is off, or the alignment source
	Align        int    // I/O block size in bytes
	NextSeq      uint64
	Durable      uint64
	Oldest       uint64
	Segments     int
	Flushes      uint64 // successful write+sync rounds
	FlushErrors  uint64
	FlushP50     time.Duration // over the last 1024 flushes
	FlushP99     time.Duration
	FlushMax     time.Duration // since Open
	Backpressure uint64        // Appends refused (or made to wait)
	Rotations    uint64
	Pruned       uint64 // sealed segments deleted by retention
	ColdReads    uint64 // ReadAt/ReadRange served from disk
	BufferReads  uint64 // ReadAt/ReadRange served from the unflushed buffer
	LastError    string // last flush error ("" after a success)
	Recovery     Recovery
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
	dir := StreamDir(cfg.Dir, cfg.Stream)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("wal: open: %w", err)
	}
	w := &Writer{
		cfg:      cfg,
		dir:      dir,
		sys:      defaultSys,
		epoch:    time.Now(),
		lockFd:   -1,
		actIdxFd: -1,
		notify:   make(chan struct{}),
		kick:     make(chan struct{}, 1),
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
		align:    pageSize,
	}
	w.rot.nextFd = -1
	if err := w.lockDir(); err != nil {
		return nil, err
	}
	if err := w.recover(); err != nil {
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
	last := w.committed
	w.seq = last + 1
	w.published.Store(last)
	w.durable.Store(last)
	w.releasedSeq.Store(last)
	w.relSeq = last
	w.kickSeq = last
	go w.ioLoop()
	return w, nil
}

func (w *Writer) lockDir() error {
	p := filepath.Join(w.dir, fmt.Sprintf("%d.lock", w.cfg.Stream))
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("wal: open lock %s: %w", p, err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		unix.Close(fd)
		if err == unix.EWOULDBLOCK {
			return fmt.Errorf("wal: open %s: %w", w.dir, ErrLocked)
		}
		return fmt.Errorf("wal: lock %s: %w", p, err)
	}
	w.lockFd = fd
	return nil
}

func (w *Writer) now() int64 { return int64(time.Since(w.epoch)) + 1 }

// NextSeq is the seq the next Append will carry.
func (w *Writer) NextSeq() uint64 { return w.published.Load() + 1 }

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
	if len(payload) < 8 || len(payload) > MaxPayload {
		return nil, ErrPayloadSize
	}
	if w.closed.Load() {
		return nil, ErrClosed
	}
	n := uint64(HeaderSize + len(payload))
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
	copy(buf[HeaderSize:], payload)
	binary.LittleEndian.PutUint64(buf[HeaderSize:], seq)
	Header{Type: typ, Len: uint16(len(payload)), CRC: CRC(buf[HeaderSize:])}.Put(buf)
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
	if pos+n-w.relPos > c || w.seq-w.relSeq > w.smask {
		w.relPos = w.releasedPos.Load()
		w.relSeq = w.releasedSeq.Load()
		if pos+n-w.relPos > c || w.seq-w.relSeq > w.smask {
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
	w.mu.Lock()
	w.closeFiles()
	w.mu.Unlock()
	w.broadcast()
	if e := w.ioErr.Load(); e != nil && w.durable.Load() < w.published.Load() {
		return e.err
	}
	return nil
}

func (w *Writer) closeFiles() {
	for _, s := range w.segs {
		dropSegment(s)
	}
	w.segs = nil
	if w.actIdxFd >= 0 {
		unix.Close(w.actIdxFd)
		w.actIdxFd = -1
	}
	if w.rot.nextFd >= 0 {
		unix.Close(w.rot.nextFd)
		os.Remove(w.rot.tmpPath)
		w.rot.nextFd = -1
	}
	if w.lockFd >= 0 {
		unix.Close(w.lockFd)
		w.lockFd = -1
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

// Stats returns a snapshot of the counters.
func (w *Writer) Stats() Stats {
	w.mu.RLock()
	nseg := len(w.segs)
	direct, note := w.direct, w.dirNote
	w.mu.RUnlock()
	w.statsMu.Lock()
	st := w.st
	w.statsMu.Unlock()
	s := Stats{
		Direct: direct, DirectNote: note, Align: int(w.align),
		NextSeq: w.NextSeq(), Durable: w.Durable(), Segments: nseg,
		Flushes: st.flushes, FlushErrors: st.flushErrs, FlushMax: time.Duration(st.latMax),
		Backpressure: w.bpCount.Load(), Rotations: st.rotations, Pruned: st.pruned,
		ColdReads: w.coldReads.Load(), BufferReads: w.bufReads.Load(),
		LastError: st.lastErr, Recovery: st.recovery,
	}
	s.Oldest, _ = w.Bounds()
	n := min(st.latN, uint64(len(st.lat)))
	if n > 0 {
		v := slices.Clone(st.lat[:n])
		slices.Sort(v)
		s.FlushP50 = time.Duration(v[(n-1)/2])
		s.FlushP99 = time.Duration(v[min(n-1, (n*99+99)/100-1)])
	}
	return s
}

// ---- I/O goroutine ----

func (w *Writer) ioLoop() {
	defer close(w.done)
	t := time.NewTicker(w.cfg.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-w.kick:
		case <-t.C:
		case <-w.quit:
			// Final flush; one retry if it fails.
			for i := 0; i < 2 && w.committed < w.published.Load(); i++ {
				w.flushCycle()
			}
			return
		}
		w.flushCycle()
	}
}

func (w *Writer) flushCycle() {
	pub := w.published.Load()
	if pub <= w.committed && !w.rotPending() {
		return
	}
	if w.flushStart.Load() == 0 {
		w.flushStart.Store(w.now())
	}
	t0 := time.Now()
	err := w.writePending(pub)
	d := time.Since(t0)
	w.statsMu.Lock()
	if err != nil {
		w.st.flushErrs++
		w.st.lastErr = err.Error()
	} else {
		w.st.flushes++
		w.st.lastErr = ""
		w.st.lat[w.st.latN%uint64(len(w.st.lat))] = int64(d)
		w.st.latN++
		w.st.latMax = max(w.st.latMax, int64(d))
	}
	w.statsMu.Unlock()
	if err != nil {
		w.ioErr.Store(&ioError{err: err})
	} else {
		w.ioErr.Store(nil)
		w.flushStart.Store(0)
	}
	w.attempts.Add(1)
	w.broadcast()
}

func (w *Writer) rotPending() bool { return w.rot.nextFd >= 0 || w.rot.sealed }

func (w *Writer) frameAt(seq uint64) (phys, n uint64) {
	phys = w.rpos[seq&w.smask] & w.rmask
	n = HeaderSize + uint64(binary.LittleEndian.Uint16(w.ring[phys+4:]))
	return phys, n
}

// writePending writes seqs committed+1 … pub, committing (sync, index,
// release, durable) at every segment boundary and at the end.
func (w *Writer) writePending(pub uint64) error {
	if w.rotPending() {
		if err := w.rotate(); err != nil {
			return err
		}
	}
	s := w.committed + 1
	for s <= pub {
		end := w.actEnd
		w.ents = w.ents[:0]
		full := false
		tail := end & (w.align - 1)
		copy(w.stage, w.tailBlock[:tail])
		for s <= pub && !full {
			// Fill the staging buffer with frames that fit in the segment.
			base := end - tail // aligned file offset of stage[0]
			n := tail
			for s <= pub {
				phys, fl := w.frameAt(s)
				off := base + n
				if off > 0 && off+int64(fl) > w.cfg.SegmentSize {
					full = true
					break
				}
				if n+int64(fl) > int64(len(w.stage))-w.align {
					break
				}
				copy(w.stage[n:], w.ring[phys:phys+fl])
				var e [idxEntrySize]byte
				putIdxEntry(e[:], uint32(off), uint32(fl))
				w.ents = append(w.ents, e[:]...)
				n += int64(fl)
				s++
			}
			if n == tail {
				break
			}
			wl := alignUp(n, w.align)
			clear(w.stage[n:wl])
			if err := w.writeBlocks(w.stage[:wl], base); err != nil {
				return err
			}
			end = base + n
			// Keep the new partial tail block at the front of the stage.
			tail = n & (w.align - 1)
			copy(w.stage, w.stage[n-tail:n])
		}
		if len(w.ents) > 0 {
			if err := w.sys.datasync(w.act.fd); err != nil {
				return fmt.Errorf("wal: fdatasync %s: %w", w.act.path, err)
			}
			w.commit(s-1, end)
		}
		if full {
			if err := w.rotate(); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeBlocks writes aligned blocks at off of the active segment, falling
// back to buffered I/O when the kernel refuses the O_DIRECT transfer.
func (w *Writer) writeBlocks(b []byte, off int64) error {
	err := pwriteFull(w.sys.pwrite, w.act.fd, b, off)
	if err != nil && w.direct && isDirectEINVAL(err) {
		if ferr := w.fallbackBuffered(fmt.Sprintf("O_DIRECT write refused (%v)", err)); ferr != nil {
			return ferr
		}
		err = pwriteFull(w.sys.pwrite, w.act.fd, b, off)
	}
	if err != nil {
		return fmt.Errorf("wal: write %s at %d: %w", w.act.path, off, err)
	}
	return nil
}

func (w *Writer) fallbackBuffered(why string) error {
	fd, err := unix.Open(w.act.path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("wal: reopen %s buffered: %w", w.act.path, err)
	}
	w.mu.Lock()
	old := w.act.fd
	w.act.fd = fd
	w.direct = false
	w.dirNote = why
	w.mu.Unlock()
	unix.Close(old)
	return nil
}

// commit publishes seqs up to last as durable: index entries, release of
// their ring space, durable watermark, sidecar.
func (w *Writer) commit(last uint64, end int64) {
	phys, fl := w.frameAt(last)
	relPos := w.rpos[last&w.smask] + fl
	_ = phys
	tail := end & (w.align - 1)
	copy(w.tailBlock, w.stage[:tail])
	prev := w.act.count()
	w.mu.Lock()
	if prev == 0 {
		w.act.first = w.committed + 1
	}
	w.act.idx = append(w.act.idx, w.ents...)
	w.act.last = last
	w.releasedSeq.Store(last)
	w.releasedPos.Store(relPos)
	w.durable.Store(last)
	w.mu.Unlock()
	w.committed = last
	w.actEnd = end
	w.broadcast() // wake WaitDurable/Flush now, before the sidecar write
	if w.actIdxFd >= 0 {
		if err := pwriteFull(unix.Pwrite, w.actIdxFd, w.ents, idxHeaderSize+int64(prev)*idxEntrySize); err != nil {
			// The sidecar is a hint: Open rebuilds it. Stop writing it.
			unix.Close(w.actIdxFd)
			w.actIdxFd = -1
		}
	}
}

// rotate seals the active segment (exact length, name with its seq range,
// full sidecar) and starts a new preallocated active segment. Each step is
// resumable, so a failed rotation (ENOSPC) is retried by the next flush.
func (w *Writer) rotate() error {
	act := w.act
	if w.rot.nextFd < 0 && !w.rot.sealed {
		tmp := filepath.Join(w.dir, fmt.Sprintf("%d_next.tmp", w.cfg.Stream))
		fd, err := w.openSegmentFile(tmp, unix.O_CREAT|unix.O_TRUNC)
		if err != nil {
			return err
		}
		if err := w.sys.prealloc(fd, w.cfg.SegmentSize); err != nil {
			unix.Close(fd)
			os.Remove(tmp)
			return fmt.Errorf("wal: preallocate next segment: %w", err)
		}
		w.rot.nextFd, w.rot.tmpPath = fd, tmp
	}
	if !w.rot.sealed {
		if err := unix.Ftruncate(act.fd, w.actEnd); err != nil {
			return fmt.Errorf("wal: seal %s: truncate: %w", act.path, err)
		}
		if err := w.sys.datasync(act.fd); err != nil {
			return fmt.Errorf("wal: seal %s: fdatasync: %w", act.path, err)
		}
		name := filepath.Join(w.dir, SealedName(w.cfg.Stream, act.first, act.last))
		if err := os.Rename(act.path, name); err != nil {
			return fmt.Errorf("wal: seal %s: %w", act.path, err)
		}
		w.rot.sealed = true
		// Sidecar: written whole from memory; a failure only leaves the
		// index in memory (Open rebuilds it).
		if w.actIdxFd >= 0 {
			unix.Close(w.actIdxFd)
			w.actIdxFd = -1
		}
		os.Remove(filepath.Join(w.dir, idxName(ActiveName(w.cfg.Stream))))
		ipath := idxName(name)
		mapped, _ := writeSealedIdx(ipath, act.first, act.count(), act.idx)
		w.mu.Lock()
		act.path = name
		act.sealed = true
		if mapped != nil {
			act.idx, act.mapped = mapped[idxHeaderSize:], mapped
		}
		w.mu.Unlock()
		syncDir(w.dir)
	}
	apath := filepath.Join(w.dir, ActiveName(w.cfg.Stream))
	if err := os.Rename(w.rot.tmpPath, apath); err != nil {
		return fmt.Errorf("wal: rotate: activate %s: %w", apath, err)
	}
	syncDir(w.dir)
	next := &segment{first: w.committed + 1, last: w.committed, path: apath, fd: w.rot.nextFd}
	w.rot = rotation{nextFd: -1}
	w.mu.Lock()
	w.segs = append(w.segs, next)
	w.mu.Unlock()
	w.act = next
	w.actEnd = 0
	clear(w.tailBlock)
	w.actIdxFd = createActiveIdx(filepath.Join(w.dir, idxName(ActiveName(w.cfg.Stream))), next.first, nil)
	w.statsMu.Lock()
	w.st.rotations++
	w.statsMu.Unlock()
	w.prune()
	return nil
}

// prune deletes sealed segments whose mtime is older than Retention.
func (w *Writer) prune() {
	if w.cfg.Retention == 0 {
		return
	}
	cut := time.Now().Add(-w.cfg.Retention)
	var drop []*segment
	w.mu.Lock()
	keep := w.segs[:0]
	for _, s := range w.segs {
		if s.sealed {
			if fi, err := os.Stat(s.path); err == nil && !fi.ModTime().After(cut) {
				drop = append(drop, s)
				continue
			}
		}
		keep = append(keep, s)
	}
	clear(w.segs[len(keep):])
	w.segs = keep
	if len(drop) > 0 {
		// An empty active segment's first is the next seq to be written,
		// so Bounds reports 0, 0 until a record exists.
		w.oldest.Store(w.segs[0].first)
	}
	w.mu.Unlock()
	for _, s := range drop {
		dropSegment(s)
		os.Remove(s.path)
		os.Remove(idxName(s.path))
	}
	w.statsMu.Lock()
	w.st.pruned += uint64(len(drop))
	w.statsMu.Unlock()
}

func syncDir(dir string) {
	if fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
		unix.Fsync(fd)
		unix.Close(fd)
	}
}

// writeSealedIdx writes a complete sidecar (header with count, entries)
// and returns it memory-mapped.
func writeSealedIdx(path string, first, count uint64, entries []byte) ([]byte, error) {
	f, err := os.OpenFile(path+".tmp", os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var h [idxHeaderSize]byte
	putIdxHeader(h[:], first, count)
	if _, err := f.Write(h[:]); err != nil {
		os.Remove(path + ".tmp")
		return nil, err
	}
	if _, err := f.Write(entries[:count*idxEntrySize]); err != nil {
		os.Remove(path + ".tmp")
		return nil, err
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		os.Remove(path + ".tmp")
		return nil, err
	}
	return unix.Mmap(int(f.Fd()), 0, idxHeaderSize+int(count)*idxEntrySize, unix.PROT_READ, unix.MAP_SHARED)
}

// createActiveIdx (re)creates the active sidecar with entries; -1 on error.
func createActiveIdx(path string, first uint64, entries []byte) int {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return -1
	}
	var h [idxHeaderSize]byte
	putIdxHeader(h[:], first, 0)
	if err := pwriteFull(unix.Pwrite, fd, h[:], 0); err != nil {
		unix.Close(fd)
		return -1
	}
	if len(entries) > 0 {
		if err := pwriteFull(unix.Pwrite, fd, entries, idxHeaderSize); err != nil {
			unix.Close(fd)
			return -1
		}
	}
	return fd
}

// openSegmentFile opens a segment read-write with O_DIRECT when the writer
// uses it.
func (w *Writer) openSegmentFile(path string, flag int) (int, error) {
	if w.direct {
		fd, err := openDirect(path, unix.O_RDWR|flag)
		if err == nil {
			return fd, nil
		}
	}
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC|flag, 0o644)
	if err != nil {
		return -1, fmt.Errorf("wal: open %s: %w", path, err)
	}
	return fd, nil
}

// ---- reads ----

// ReadAt copies the frame of seq into dst and returns its length. It is
// served from the unflushed buffer when the record is still there, else by
// one index lookup and one aligned (O_DIRECT where available) read, with
// the CRC and seq verified. Safe from any goroutine, concurrently with
// Append. ErrNotFound when the seq is not in the log; io.ErrShortBuffer
// when dst is too small; a *FrameError when the bytes on disk are bad.
func (w *Writer) ReadAt(seq uint64, dst []byte) (n int, err error) {
	frames, n, err := w.ReadRange(seq, 1, dst)
	if err == nil && frames == 0 {
		return 0, ErrNotFound
	}
	return n, err
}

// ReadRange copies up to n consecutive frames starting at seq from into
// dst (as many whole frames as fit), reading each run that is contiguous
// in a segment with one I/O. It returns the frame count and the bytes
// used. ErrNotFound when from is not in the log.
func (w *Writer) ReadRange(from uint64, n int, dst []byte) (frames, bytes int, err error) {
	if from == 0 {
		return 0, 0, ErrNotFound
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed.Load() && w.segs == nil {
		return 0, 0, ErrClosed
	}
	seq := from
	for frames < n {
		if seq > w.releasedSeq.Load() {
			if seq > w.published.Load() {
				break
			}
			phys, fl := w.frameAt(seq)
			if int(fl) > len(dst)-bytes {
				break
			}
			copy(dst[bytes:], w.ring[phys:phys+fl])
			w.bufReads.Add(1)
			bytes += int(fl)
			frames++
			seq++
			continue
		}
		k, b, err := w.readDisk(seq, n-frames, dst[bytes:])
		if err != nil {
			if frames > 0 {
				break // return the good prefix; the next call reports err
			}
			return 0, 0, err
		}
		if k == 0 {
			break
		}
		frames += k
		bytes += b
		seq += uint64(k)
	}
	if frames == 0 {
		if seq <= w.published.Load() && seq >= w.oldestLocked() {
			return 0, 0, io.ErrShortBuffer
		}
		return 0, 0, ErrNotFound
	}
	return frames, bytes, nil
}

func (w *Writer) oldestLocked() uint64 {
	o, _ := w.Bounds()
	return o
}

// findSeg returns the segment holding seq (caller holds mu).
func (w *Writer) findSeg(seq uint64) *segment {
	i, _ := slices.BinarySearchFunc(w.segs, seq, func(s *segment, q uint64) int {
		switch {
		case s.first > q:
			return 1
		case s.count() == 0 || s.last < q:
			return -1 // an empty segment's first is the next seq, so order holds
		}
		return 0
	})
	if i < len(w.segs) && w.segs[i].count() > 0 && w.segs[i].first <= seq && seq <= w.segs[i].last {
		return w.segs[i]
	}
	return nil
}

// readDisk reads up to max consecutive frames from seq within one segment
// with one pread (caller holds mu.RLock).
func (w *Writer) readDisk(seq uint64, maxFrames int, dst []byte) (frames, bytes int, err error) {
	s := w.findSeg(seq)
	if s == nil {
		return 0, 0, nil
	}
	i0 := seq - s.first
	off0, l0 := idxEntryAt(s.idx, i0)
	if int(l0) > len(dst) {
		return 0, 0, nil
	}
	endOff := int64(off0) + int64(l0)
	k := uint64(1)
	base := alignDown(int64(off0), w.align)
	for k < uint64(maxFrames) && seq+k <= s.last {
		o, l := idxEntryAt(s.idx, i0+k)
		e := int64(o) + int64(l)
		if int(e-int64(off0)) > len(dst) || alignUp(e, w.align)-base > readScratchSize {
			break
		}
		endOff = e
		k++
	}
	var scratch []byte
	select {
	case scratch = <-w.readScratch:
	default:
		scratch = alignedBuf(readScratchSize, int(w.align))
	}
	defer func() {
		select {
		case w.readScratch <- scratch:
		default:
		}
	}()
	span := alignUp(endOff, w.align) - base
	buf := scratch[:span]
	got, err := preadFull(w.sys.pread, s.fd, buf, base)
	if err != nil {
		return 0, 0, fmt.Errorf("wal: read %s at %d: %w", s.path, base, err)
	}
	if int64(got) < endOff-base {
		return 0, 0, &FrameError{File: s.path, Off: int64(off0), Seq: seq, Err: ErrLen}
	}
	w.coldReads.Add(1)
	p := int64(off0) - base
	for j := uint64(0); j < k; j++ {
		o, l := idxEntryAt(s.idx, i0+j)
		fr := buf[p : p+int64(l)]
		h, payload, size, derr := DecodeFrame(fr)
		if derr == nil && (size != int(l) || Seq(payload) != seq+j) {
			derr = ErrSeq
		}
		_ = h
		if derr != nil {
			if j == 0 {
				return 0, 0, &FrameError{File: s.path, Off: int64(o), Seq: seq, Err: derr}
			}
			break // return the good prefix; the caller reads on from the bad one
		}
		copy(dst[bytes:], fr)
		bytes += int(l)
		frames++
		p += int64(l)
	}
	return frames, bytes, nil
}
