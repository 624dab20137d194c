package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/walcast/walcast/wal/internal/unix"
	"github.com/walcast/walcast/wire"
)

// Reader reads one stream's records in seq order from the files on disk,
// starting at any seq: it seeks through the sidecar index (never scanning
// from the start of a segment when the index is there), crosses segment
// boundaries, and at the end of the active segment returns io.EOF; a later
// Next continues with whatever became durable since. It works on a
// directory another process is writing. Not safe for concurrent use.
type Reader struct {
	dir    string
	stream uint32
	next   uint64 // seq wanted next; 0 = the first record found
	f      *os.File
	sc     *frameScanner
	active bool
	seeked bool // positioned by an index entry not yet confirmed
	// unverified: the active file was empty when opened, so nothing showed
	// it is the segment that holds next. A writer may have sealed that one
	// and started the next between the directory listing and the open.
	unverified bool
	// finished is the sealed file read to its end last: if its name
	// still claims r.next, the name is wrong (contents win) and the
	// reader goes on with the file after it.
	finished string
	buf      []byte
}

// testHookListed runs in open between listing the directory and opening
// the file picked, so a test can rotate the writer in that window.
var testHookListed func()

// OpenReader opens a sequential reader of stream under the WAL root dir
// (the Config.Dir of the Writer) at seq from; from = 0 starts at the oldest
// record. It returns ErrNotFound when from is older than the oldest record
// on disk. A from above the highest record waits for it (Next returns
// io.EOF until it is written).
func OpenReader(dir string, stream uint32, from uint64) (*Reader, error) {
	return OpenReaderBuffer(dir, stream, from, make([]byte, scanBufSize))
}

// MinReaderBuffer is the smallest buffer [OpenReaderBuffer] takes: one
// frame of the largest payload, in bytes.
const MinReaderBuffer = wire.HeaderSize + wire.MaxPayload

// OpenReaderBuffer is [OpenReader] reading through buf (at least
// MinReaderBuffer bytes) instead of a 1 MiB buffer of its own, so the
// caller bounds and owns the memory (replay gives each connection one).
// Frames returned by Next alias buf; the caller must not touch buf until
// Close.
func OpenReaderBuffer(dir string, stream uint32, from uint64, buf []byte) (*Reader, error) {
	if len(buf) < MinReaderBuffer {
		return nil, fmt.Errorf("wal: open reader: buffer of %d bytes, want ≥ %d", len(buf), MinReaderBuffer)
	}
	r := &Reader{dir: StreamDir(dir, stream), stream: stream, next: from, buf: buf}
	if _, err := os.Stat(r.dir); err != nil {
		return nil, fmt.Errorf("wal: open reader: %w", err)
	}
	if _, err := r.open(); err != nil {
		return nil, err
	}
	return r, nil
}

// Close releases the reader's file.
func (r *Reader) Close() error {
	if r.f == nil {
		r.buf = nil
		return nil
	}
	err := r.f.Close()
	r.f, r.sc, r.buf = nil, nil, nil
	return err
}

// NextSeq is the seq the next record returned by Next will carry (0 when
// the reader started at the oldest record and has not read one yet).
func (r *Reader) NextSeq() uint64 { return r.next }

// open positions the reader on the file holding r.next. It returns false
// when no such file exists yet.
//
// The listing and the open race the writer's rotation (active → sealed,
// then a new active): the file opened as "active" may be a later segment
// than the one listed. An active file that starts after r.next is
// therefore listed again, twice at most, before it counts as a gap.
func (r *Reader) open() (bool, error) {
	for try := 0; ; try++ {
		ok, stale, err := r.openOnce(try == 2)
		if !stale {
			return ok, err
		}
	}
}

// openOnce is one listing and open; stale reports an active file that
// starts after r.next (closed again) when last is false.
func (r *Reader) openOnce(last bool) (ok, stale bool, err error) {
	if r.buf == nil {
		return false, false, ErrClosed
	}
	files, err := ListSegments(r.dir, r.stream)
	if err != nil {
		return false, false, fmt.Errorf("wal: reader: %w", err)
	}
	if testHookListed != nil {
		testHookListed()
	}
	var pick *SegmentFile
	for i := range files {
		sf := &files[i]
		if sf.Active {
			if pick == nil {
				pick = sf
			}
			break
		}
		if r.next == 0 || (sf.First <= r.next && r.next <= sf.Last) {
			pick = sf
			if sf.Path == r.finished {
				// Read to its end without reaching r.next: the records
				// say it ends before its name does. The next file holds
				// r.next if the log is whole (Next checks the seq).
				if i+1 == len(files) {
					return false, false, nil
				}
				pick = &files[i+1]
			}
			break
		}
		if r.next < sf.First {
			// Seqs no segment holds: a Skip marker at the start of sf
			// explains them (the reader continues with it), or the oldest
			// segment starts after them (pruned), or a segment is missing.
			if typ, sk, ok := firstRecord(sf.Path); ok && typ == wire.TypeSkip && sk.Seq == sf.First && sk.From <= r.next {
				r.next = sf.First
				pick = sf
				break
			}
			if i == 0 {
				return false, false, fmt.Errorf("wal: reader: seq %d: %w (oldest on disk is %d)", r.next, ErrNotFound, sf.First)
			}
			return false, false, missing(files[i-1].Last+1, sf.First-1, sf.Path)
		}
	}
	if pick == nil {
		return false, false, nil
	}
	f, err := os.Open(pick.Path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, false, nil // rotated away meanwhile; list again next time
		}
		return false, false, fmt.Errorf("wal: reader: %w", err)
	}
	r.f = f
	r.finished = ""
	r.active = pick.Active
	r.sc = &frameScanner{f: f, name: pick.Path, buf: r.buf}
	off := int64(0)
	if r.next != 0 {
		off = seekIndex(idxName(pick.Path), pick.First, r.next, pick.Active)
	}
	r.sc.seek(off)
	r.seeked = off != 0
	r.unverified = false
	if pick.Active && r.next != 0 {
		// The active segment must not start after the seq we need.
		// r.sc has read nothing yet (seek reset it): s0 may borrow its buffer.
		s0 := &frameScanner{f: f, name: pick.Path, buf: r.buf}
		fr, _, err := s0.next()
		r.unverified = err != nil
		if err == nil {
			if first := wire.Seq(fr[wire.HeaderSize:]); first > r.next {
				if sk, err := wire.ParseSkip(fr[wire.HeaderSize:]); err == nil && le.Uint16(fr[2:]) == wire.TypeSkip && sk.From <= r.next {
					r.next = first // the Skip marker at the start explains the seqs before it
					r.sc.seek(0)
					r.seeked = false
					return true, false, nil
				}
				r.f.Close()
				r.f, r.sc = nil, nil
				if !last {
					return false, true, nil // perhaps rotated since the listing: list again
				}
				if len(files) > 1 {
					return false, false, missing(files[len(files)-2].Last+1, first-1, pick.Path)
				}
				return false, false, fmt.Errorf("wal: reader: seq %d: %w (active segment starts at %d)", r.next, ErrNotFound, first)
			}
		}
	}
	return true, false, nil
}

// seekIndex returns the byte offset of seq (or of the last indexed record
// before it, for an active segment whose index lags) from the sidecar, or
// 0 when the sidecar is missing or does not cover it.
func seekIndex(path string, first, seq uint64, active bool) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	var h [idxHeaderSize]byte
	if _, err := f.ReadAt(h[:], 0); err != nil || [8]byte(h[0:8]) != idxMagic {
		return 0
	}
	ifirst := binary.LittleEndian.Uint64(h[8:])
	if !active && ifirst != first {
		return 0
	}
	if seq < ifirst {
		return 0
	}
	i := seq - ifirst
	if active {
		fi, err := f.Stat()
		if err != nil || fi.Size() < idxHeaderSize+idxEntrySize {
			return 0
		}
		i = min(i, uint64(fi.Size()-idxHeaderSize)/idxEntrySize-1)
	}
	var e [idxEntrySize]byte
	if _, err := f.ReadAt(e[:], idxHeaderSize+int64(i)*idxEntrySize); err != nil {
		return 0
	}
	return int64(binary.LittleEndian.Uint32(e[0:]))
}

// Next returns the next record's frame (header and payload, CRC verified),
// valid until the next call. io.EOF means no more durable records for now;
// call again later. A bad frame in a sealed segment is a *FrameError.
func (r *Reader) Next() (frame []byte, err error) {
	for {
		if r.f == nil {
			ok, err := r.open()
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, io.EOF
			}
		}
		fr, off, err := r.sc.next()
		if err == nil {
			seq := wire.Seq(fr[wire.HeaderSize:])
			if r.next != 0 && seq < r.next {
				continue // seeking forward from an index checkpoint
			}
			if r.next != 0 && seq > r.next && le.Uint16(fr[2:]) == wire.TypeSkip {
				if sk, err := wire.ParseSkip(fr[wire.HeaderSize:]); err == nil && sk.From <= r.next {
					r.seeked, r.unverified = false, false
					r.next = seq + 1 // the marker stands for the seqs up to it
					return fr, nil
				}
			}
			if r.next != 0 && seq > r.next && r.unverified {
				// The active file was empty when opened: it may be a
				// segment started after the listing. Open again; open
				// now sees its first record and lists again if needed.
				r.unverified = false
				r.f.Close()
				r.f, r.sc = nil, nil
				continue
			}
			if r.next != 0 && seq > r.next {
				if r.seeked {
					// The index pointed past the seq: scan this file instead.
					r.seeked = false
					r.sc.seek(0)
					continue
				}
				return nil, r.damaged(off, &FrameError{File: r.sc.name, Off: off, Seq: r.next, Err: ErrSeq})
			}
			r.seeked, r.unverified = false, false
			r.next = seq + 1
			return fr, nil
		}
		var fe *FrameError
		if r.seeked && errors.As(err, &fe) {
			// The index pointed at something that is not a frame (a stale
			// sidecar): scan this file from its start instead.
			r.seeked = false
			r.sc.discard()
			r.sc.seek(0)
			continue
		}
		if !r.active {
			if err == io.EOF {
				r.finished = r.sc.name
				r.f.Close()
				r.f, r.sc = nil, nil
				if r.next == 0 {
					return nil, io.EOF
				}
				continue
			}
			if err == errPartial {
				err = &FrameError{File: r.sc.name, Off: off, Seq: r.next, Err: wire.ErrLen}
			}
			return nil, r.damaged(off, err)
		}
		// End of the active segment's data (or a frame still being
		// written): forget buffered bytes and see whether the file has
		// been sealed meanwhile.
		r.sc.discard()
		r.sc.seek(off)
		cur, serr := os.Stat(filepath.Join(r.dir, ActiveName(r.stream)))
		mine, merr := r.f.Stat()
		if serr == nil && merr == nil && os.SameFile(cur, mine) {
			if err == io.EOF || err == errPartial {
				return nil, io.EOF
			}
			if errors.As(err, &fe) {
				if r.indexed(r.next) && !readsBack(r.sc.name, off, r.next) {
					// The writer made this record durable (it indexes a
					// record only after fdatasync) and the disk, read past
					// the page cache, has it bad too: damage, not a record
					// still being written.
					return nil, r.damaged(off, err)
				}
				return nil, io.EOF // possibly a block being rewritten; retry later
			}
			return nil, err
		}
		if merr != nil {
			return nil, fmt.Errorf("wal: reader: %w", merr)
		}
		// Sealed: its length is final; read it to the end as a sealed file.
		r.active = false
	}
}

// damaged turns a bad frame at off (the record r.next should be there)
// into a *DamageError that also matches the codec error.
func (r *Reader) damaged(off int64, err error) error {
	var fe *FrameError
	if !errors.As(err, &fe) {
		return err
	}
	return &DamageError{File: fe.File, Off: off, Seq: r.next, Last: r.next, What: "unreadable record: " + fe.Err.Error(), Err: fe.Err}
}

// indexed reports whether the active segment's sidecar lists seq: the
// writer wrote and synced it.
func (r *Reader) indexed(seq uint64) bool {
	if seq == 0 {
		return false
	}
	f, err := os.Open(filepath.Join(r.dir, idxName(ActiveName(r.stream))))
	if err != nil {
		return false
	}
	defer f.Close()
	var h [idxHeaderSize]byte
	if _, err := f.ReadAt(h[:], 0); err != nil || [8]byte(h[0:8]) != idxMagic {
		return false
	}
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	first := binary.LittleEndian.Uint64(h[8:])
	n := uint64(max(fi.Size()-idxHeaderSize, 0)) / idxEntrySize
	return n > 0 && seq >= first && seq < first+n
}

// readsBack reports whether the frame of seq at off reads back intact from
// the disk itself (O_DIRECT where the filesystem allows): a buffered read
// racing the writer's O_DIRECT rewrite of a block can see a stale page.
func readsBack(path string, off int64, seq uint64) bool {
	fd, err := openDirect(path, unix.O_RDONLY)
	if err != nil {
		if fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
			return false
		}
	}
	defer unix.Close(fd)
	base := alignDown(off, pageSize)
	buf := alignedBuf(int(alignUp(2*pageSize+wire.HeaderSize+wire.MaxPayload, pageSize)), pageSize)
	n, err := preadFull(unix.Pread, fd, buf, base)
	if err != nil || int64(n) < off-base+wire.HeaderSize {
		return false
	}
	_, p, _, err := wire.DecodeFrame(buf[off-base : n])
	return err == nil && wire.Seq(p) == seq
}
