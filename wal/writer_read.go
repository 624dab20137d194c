package wal

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/walcast/walcast/wire"
)

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
		if err == errNoSegment {
			break // a hole (or pruned): not in the log
		}
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
		if seq <= w.published.Load() && seq >= w.oldestLocked() && w.findSeg(seq) != nil {
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

// errNoSegment: no segment holds the seq (a hole a Skip explains, or
// pruned).
var errNoSegment = errors.New("wal: no segment holds the seq")

// readDisk reads up to max consecutive frames from seq within one segment
// with one pread (caller holds mu.RLock).
func (w *Writer) readDisk(seq uint64, maxFrames int, dst []byte) (frames, bytes int, err error) {
	s := w.findSeg(seq)
	if s == nil {
		return 0, 0, errNoSegment
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
		return 0, 0, &FrameError{File: s.path, Off: int64(off0), Seq: seq, Err: wire.ErrLen}
	}
	w.coldReads.Add(1)
	p := int64(off0) - base
	for j := uint64(0); j < k; j++ {
		o, l := idxEntryAt(s.idx, i0+j)
		fr := buf[p : p+int64(l)]
		h, payload, size, derr := wire.DecodeFrame(fr)
		if derr == nil && (size != int(l) || wire.Seq(payload) != seq+j) {
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
