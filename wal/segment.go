package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/walcast/walcast/wire"
)

// File naming (the reference implementation's, so each reads the other's
// logs): the active segment is
// <sid>_active.wal, a sealed one <sid>_<first>_<last>.wal holding exactly
// first…last. Each segment has a sidecar seq index with the same stem and
// the extension .idx. Files ending in .tmp are leftovers of an interrupted
// rotation and are removed by Open.

// ActiveName is the file name of stream's active segment.
func ActiveName(stream uint32) string { return fmt.Sprintf("%d_active.wal", stream) }

// SealedName is the file name of a sealed segment holding first…last.
func SealedName(stream uint32, first, last uint64) string {
	return fmt.Sprintf("%d_%d_%d.wal", stream, first, last)
}

func idxName(walName string) string { return strings.TrimSuffix(walName, ".wal") + ".idx" }

// SegmentFile is one segment file found in a stream directory.
type SegmentFile struct {
	Path        string
	Stream      uint32
	Active      bool
	First, Last uint64 // from the name; 0, 0 for the active file
}

// ListSegments returns the segments of stream in dir (the stream
// directory): sealed segments sorted by First, then the active file if it
// exists. Names that do not parse are ignored, as in the reference.
func ListSegments(dir string, stream uint32) ([]SegmentFile, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var sealed []SegmentFile
	var active *SegmentFile
	for _, e := range ents {
		sf, ok := parseSegmentName(e.Name())
		if !ok || sf.Stream != stream || e.IsDir() {
			continue
		}
		sf.Path = filepath.Join(dir, e.Name())
		if sf.Active {
			active = &sf
			continue
		}
		sealed = append(sealed, sf)
	}
	sort.Slice(sealed, func(i, j int) bool { return sealed[i].First < sealed[j].First })
	if active != nil {
		sealed = append(sealed, *active)
	}
	return sealed, nil
}

// Streams returns the stream ids that have segment files in dir.
func Streams(dir string) ([]uint32, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	seen := map[uint32]bool{}
	var out []uint32
	for _, e := range ents {
		if sf, ok := parseSegmentName(e.Name()); ok && !seen[sf.Stream] {
			seen[sf.Stream] = true
			out = append(out, sf.Stream)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

func parseSegmentName(name string) (SegmentFile, bool) {
	stem, ok := strings.CutSuffix(name, ".wal")
	if !ok {
		return SegmentFile{}, false
	}
	if sid, ok := strings.CutSuffix(stem, "_active"); ok {
		s, err := strconv.ParseUint(sid, 10, 32)
		if err != nil {
			return SegmentFile{}, false
		}
		return SegmentFile{Stream: uint32(s), Active: true}, true
	}
	parts := strings.Split(stem, "_")
	if len(parts) != 3 {
		return SegmentFile{}, false
	}
	s, err1 := strconv.ParseUint(parts[0], 10, 32)
	a, err2 := strconv.ParseUint(parts[1], 10, 64)
	b, err3 := strconv.ParseUint(parts[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || a == 0 || b < a {
		return SegmentFile{}, false
	}
	return SegmentFile{Stream: uint32(s), First: a, Last: b}, true
}

// Sidecar index layout: a 32-byte header ("WALIDX01", first seq u64,
// count u64 — 0 while the segment is active — reserved u64) followed by one
// 8-byte entry per record in seq order: byte offset u32, frame length u32.
const (
	idxHeaderSize = 32
	idxEntrySize  = 8
)

var idxMagic = [8]byte{'W', 'A', 'L', 'I', 'D', 'X', '0', '1'}

func putIdxHeader(b []byte, first, count uint64) {
	copy(b[0:8], idxMagic[:])
	binary.LittleEndian.PutUint64(b[8:], first)
	binary.LittleEndian.PutUint64(b[16:], count)
	binary.LittleEndian.PutUint64(b[24:], 0)
}

func putIdxEntry(b []byte, off, n uint32) {
	binary.LittleEndian.PutUint32(b[0:], off)
	binary.LittleEndian.PutUint32(b[4:], n)
}

func idxEntryAt(idx []byte, i uint64) (off, n uint32) {
	e := idx[i*idxEntrySize:]
	return binary.LittleEndian.Uint32(e[0:]), binary.LittleEndian.Uint32(e[4:])
}

// readIdx loads a sidecar; it returns the header's first seq and count and
// the entries (whole entries only; a torn last entry is dropped). It checks
// only the magic; callers validate entries against the segment.
func readIdx(path string) (first, count uint64, entries []byte, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, nil, err
	}
	if len(b) < idxHeaderSize || [8]byte(b[0:8]) != idxMagic {
		return 0, 0, nil, fmt.Errorf("wal: index %s: bad header", path)
	}
	first = binary.LittleEndian.Uint64(b[8:])
	count = binary.LittleEndian.Uint64(b[16:])
	e := b[idxHeaderSize:]
	e = e[:len(e)/idxEntrySize*idxEntrySize]
	return first, count, e, nil
}

// checkIdxEntries returns how many leading entries are plausible: offsets
// strictly increasing and contiguous (each entry starts where the previous
// frame ended) and inside size bytes of data.
func checkIdxEntries(e []byte, size int64) uint64 {
	n := uint64(len(e) / idxEntrySize)
	var end int64
	for i := uint64(0); i < n; i++ {
		off, l := idxEntryAt(e, i)
		if int64(off) != end || l < wire.HeaderSize+8 || int64(off)+int64(l) > size {
			return i
		}
		end = int64(off) + int64(l)
	}
	return n
}

// frameScanner reads consecutive frames of one file through a large
// buffer, from any starting offset.
type frameScanner struct {
	f    frameSource
	name string
	buf  []byte
	r, w int   // buf[r:w] holds file bytes starting at off
	off  int64 // file offset of buf[r]
	// loose: a CRC mismatch returns the frame with the error and moves
	// past it (the length field is still trusted), for dumps.
	loose bool
}

const scanBufSize = 1 << 20

// newScannerAt scans src (size bytes long) from off, with a buffer no
// larger than the data (small files, fuzzing).
func newScannerAt(src frameSource, name string, size, off int64) *frameScanner {
	n := int64(scanBufSize)
	if size >= 0 && size-off+wire.HeaderSize < n {
		n = max(size-off+wire.HeaderSize, 4096)
	}
	return &frameScanner{f: src, name: name, buf: make([]byte, n), off: off}
}

func (s *frameScanner) seek(off int64) { s.off, s.r, s.w = off, 0, 0 }

// discard forgets buffered bytes after the current offset, so the next
// call re-reads them from the file (used when the file may still change).
func (s *frameScanner) discard() { s.r, s.w = 0, 0 }

func (s *frameScanner) fill(n int) error {
	if s.w-s.r >= n {
		return nil
	}
	if s.r > 0 {
		copy(s.buf, s.buf[s.r:s.w])
		s.w -= s.r
		s.r = 0
	}
	for s.w < n {
		m, err := s.f.ReadAt(s.buf[s.w:], s.off+int64(s.w))
		s.w += m
		if errors.Is(err, io.EOF) {
			if s.w >= n {
				return nil
			}
			return io.EOF
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// errPartial: a frame starts but the file ends inside it.
var errPartial = io.ErrUnexpectedEOF

// next returns the frame at the current offset and advances past it. It
// returns io.EOF at the end of data (end of file, or a header of zeros:
// the preallocated tail of an active segment), errPartial when the file
// ends inside a frame, and a *FrameError for a frame that does not decode.
// frame is valid until the next call.
func (s *frameScanner) next() (frame []byte, off int64, err error) {
	off = s.off
	if err := s.fill(wire.HeaderSize); err != nil {
		if err == io.EOF && s.w-s.r > 0 && !allZero(s.buf[s.r:s.w]) {
			return nil, off, errPartial
		}
		return nil, off, err
	}
	hdr := s.buf[s.r : s.r+wire.HeaderSize]
	if allZero(hdr) {
		return nil, off, io.EOF
	}
	h, err := wire.ParseHeader(hdr)
	if err != nil {
		return nil, off, &FrameError{File: s.name, Off: off, Err: err}
	}
	need := wire.HeaderSize + int(h.Len)
	if err := s.fill(need); err != nil {
		if err == io.EOF {
			return nil, off, errPartial
		}
		return nil, off, err
	}
	frame = s.buf[s.r : s.r+need]
	if wire.CRC(frame[wire.HeaderSize:]) != h.CRC {
		if s.loose {
			s.r += need
			s.off += int64(need)
			return frame, off, &FrameError{File: s.name, Off: off, Err: wire.ErrCRC}
		}
		return nil, off, &FrameError{File: s.name, Off: off, Err: wire.ErrCRC}
	}
	s.r += need
	s.off += int64(need)
	return frame, off, nil
}

// scanResult is what a sequential scan of a segment found.
type scanResult struct {
	first, last uint64    // seqs of the first and last good record (0 if none)
	end         int64     // byte offset after the last good record
	entries     []byte    // index entries from the scan start
	bad         error     // the first bad frame (nil at a clean end)
	firstType   uint16    // record type of the first good record
	firstSkip   wire.Skip // the first record when it is a Skip marker
}

// scanSegment reads frames from off, where seq expect is required (0 = take
// the first frame's seq), until the end of data or the first bad frame,
// collecting index entries.
func scanSegment(f *os.File, off int64, expect uint64) scanResult {
	return scanSegmentAt(f, f.Name(), -1, off, expect)
}

// scanSegmentAt is scanSegment over any source of size bytes (-1:
// unknown).
func scanSegmentAt(f frameSource, name string, size, off int64, expect uint64) scanResult {
	s := newScannerAt(f, name, size, off)
	res := scanResult{end: off}
	for {
		fr, at, err := s.next()
		if err != nil {
			if err != io.EOF {
				if err == errPartial {
					err = &FrameError{File: s.name, Off: at, Seq: expect, Err: wire.ErrLen}
				} else if fe, ok := err.(*FrameError); ok {
					fe.Seq = expect
				}
				res.bad = err
			}
			return res
		}
		seq := wire.Seq(fr[wire.HeaderSize:])
		if (expect != 0 && seq != expect) || seq == 0 || int64(len(fr)) > 1<<32-1 || at > 1<<32-1 {
			res.bad = &FrameError{File: s.name, Off: at, Seq: expect, Err: ErrSeq}
			return res
		}
		if res.first == 0 {
			res.first = seq
			res.firstType = le.Uint16(fr[2:])
			if res.firstType == wire.TypeSkip {
				res.firstSkip, _ = wire.ParseSkip(fr[wire.HeaderSize:])
			}
		}
		res.last = seq
		expect = seq + 1
		var e [idxEntrySize]byte
		putIdxEntry(e[:], uint32(at), uint32(len(fr)))
		res.entries = append(res.entries, e[:]...)
		res.end = at + int64(len(fr))
	}
}

var le = binary.LittleEndian
