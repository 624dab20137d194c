package wal

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/walcast/walcast/wal/internal/unix"
	"github.com/walcast/walcast/wire"
)

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
	extended, rerr := w.reserveAhead()
	pub := w.published.Load()
	if pub <= w.committed && !w.rotPending() && rerr == nil {
		if extended {
			w.broadcast() // wake appenders waiting for the reservation
		}
		return
	}
	if w.flushStart.Load() == 0 {
		w.flushStart.Store(w.now())
	}
	t0 := time.Now()
	err := rerr
	if err == nil {
		err = w.writePending(pub)
	}
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
	n = wire.HeaderSize + uint64(binary.LittleEndian.Uint16(w.ring[phys+4:]))
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
	w.act.idx = appendIdx(w.act.idx, w.ents)
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

// appendIdx appends index entries to the active segment's in-memory
// index. That index reaches megabytes (8 bytes a record: 3.7 MB for a
// 64 MiB segment of 144-byte frames), and append grows a slice that large
// by only 1.25× at a time: a fresh allocation, page faults and a copy of
// the whole index every few flushes, which was half of the I/O
// goroutine's CPU at 144-byte frames. It doubles instead (and rotate
// hands the next segment a sized, already faulted-in array).
func appendIdx(idx, ents []byte) []byte {
	if cap(idx)-len(idx) < len(ents) {
		idx = slices.Grow(idx, max(len(ents), len(idx)))
	}
	return append(idx, ents...)
}
