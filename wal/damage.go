package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/walcast/walcast/wire"
)

// ErrDamaged matches every [DamageError]: the log holds records that were
// durable once and cannot be read back, or seqs that no segment holds and
// no Skip marker explains.
var ErrDamaged = errors.New("wal: log is damaged")

// DamageError names one damaged place of a log: the file, the byte offset
// and the seqs affected. Open refuses a damaged log with the first one
// (unless Config.AllowDamage); Verify and Repair list all of them.
type DamageError struct {
	File  string `json:"file"`           // segment path ("" for a seq range no segment holds)
	Off   int64  `json:"off"`            // byte offset in File (-1: not about one offset)
	Bytes int64  `json:"bytes"`          // damaged bytes from Off (0 when unknown)
	Seq   uint64 `json:"seq"`            // first seq affected
	Last  uint64 `json:"last"`           // last seq affected (≥ Seq)
	What  string `json:"what"`           // what is wrong, in words
	Err   error  `json:"-"`              // the codec error (ErrCRC, ErrVersion, …) when there is one
	More  int    `json:"more,omitempty"` // further damaged places after this one (Open's error only)
}

func (e *DamageError) Error() string {
	seqs := fmt.Sprintf("seq %d", e.Seq)
	if e.Last > e.Seq {
		seqs = fmt.Sprintf("seqs %d…%d", e.Seq, e.Last)
	}
	where := filepath.Base(e.File)
	if e.File == "" {
		where = "no segment"
	}
	if e.Off >= 0 {
		where += fmt.Sprintf(" offset %d", e.Off)
	}
	s := fmt.Sprintf("wal: damaged log: %s, %s: %s", where, seqs, e.What)
	if e.More > 0 {
		s += fmt.Sprintf(" (and %d more damaged places)", e.More)
	}
	return s
}

// Is makes errors.Is(err, ErrDamaged) hold; the codec error is reached by
// Unwrap.
func (e *DamageError) Is(target error) bool { return target == ErrDamaged }

func (e *DamageError) Unwrap() error { return e.Err }

// badRecord is one damaged stretch found inside a segment's data, with
// good records after it.
type badRecord struct {
	off, end   int64  // bytes [off, end) are not good records
	seq, last  uint64 // seqs those bytes should have held
	err        error
	resyncedBy string // how the next good record was found
}

// frameSource is what the scanners read: an *os.File, or a bytes.Reader in
// the fuzz targets.
type frameSource interface {
	io.ReaderAt
}

// resync looks for the next good record after a bad one at off that
// should have had seq expect. It tries, in order: the bad frame's own
// length (a payload flip leaves the header intact), the sidecar index
// (entries say where each record starts), and a byte scan for a frame
// that decodes, whose seq is above expect and not further above it than
// the bytes skipped allow. It returns the offset and seq of that record,
// or ok false when nothing good follows (a torn tail).
func resync(f frameSource, size, off int64, expect uint64, idx []byte, idxFirst uint64) (at int64, seq uint64, how string, ok bool) {
	good := func(o int64, min uint64) (uint64, bool) {
		var hdr [wire.HeaderSize]byte
		if _, err := f.ReadAt(hdr[:], o); err != nil {
			return 0, false
		}
		h, err := wire.ParseHeader(hdr[:])
		if err != nil || h.Len < 8 || o+wire.HeaderSize+int64(h.Len) > size {
			return 0, false
		}
		fr := make([]byte, wire.HeaderSize+int(h.Len))
		if _, err := f.ReadAt(fr, o); err != nil {
			return 0, false
		}
		if _, p, _, err := wire.DecodeFrame(fr); err == nil {
			if s := wire.Seq(p); s >= min && s <= expect+uint64(o-off)/(wire.HeaderSize+8)+1 {
				return s, true
			}
		}
		return 0, false
	}
	// 1. The header's length.
	var hdr [wire.HeaderSize]byte
	if _, err := f.ReadAt(hdr[:], off); err == nil {
		if h, err := wire.ParseHeader(hdr[:]); err == nil {
			next := off + wire.HeaderSize + int64(h.Len)
			if s, ok := good(next, expect+1); ok {
				return next, s, "frame length", true
			}
		}
	}
	// 2. The sidecar index.
	if idx != nil && expect >= idxFirst {
		n := uint64(len(idx) / idxEntrySize)
		for i := expect - idxFirst + 1; i < n && i < expect-idxFirst+1+64; i++ {
			o, _ := idxEntryAt(idx, i)
			if int64(o) <= off {
				continue
			}
			if s, ok := good(int64(o), expect+1); ok {
				return int64(o), s, "index", true
			}
		}
	}
	// 3. A byte scan: version byte 1, then a decodable frame.
	const chunk = 64 << 10
	buf := make([]byte, chunk+wire.HeaderSize)
	for base := off + 1; base < size; base += chunk {
		n, _ := f.ReadAt(buf, base)
		if n == 0 {
			break
		}
		for i := 0; i < min(n, chunk); i++ {
			if buf[i] != wire.Version {
				continue
			}
			if i+wire.HeaderSize <= n {
				l := int64(binary.LittleEndian.Uint16(buf[i+4:]))
				if l < 8 || base+int64(i)+wire.HeaderSize+l > size {
					continue
				}
			}
			if s, ok := good(base+int64(i), expect+1); ok {
				return base + int64(i), s, "byte scan", true
			}
		}
	}
	return 0, 0, "", false
}

// goodRun is a stretch of consecutive good records of one file.
type goodRun struct {
	first, last uint64 // seqs
	off, end    int64  // bytes [off, end)
	entries     []byte // index entries (offsets in the file)
}

// segScan is what analyzeSegment found in one segment file.
type segScan struct {
	runs []goodRun   // in file order; seqs increase
	bad  []badRecord // damaged stretches with good records after them
	torn error       // the bad record that ends the data (nil at a clean end)
	end  int64       // byte offset after the last good record
	ioe  error       // a read error (the analysis is then incomplete)
	head scanResult  // the first run's scan (first record type, Skip)
}

func (a *segScan) first() uint64 {
	if len(a.runs) == 0 {
		return 0
	}
	return a.runs[0].first
}

func (a *segScan) last() uint64 {
	if len(a.runs) == 0 {
		return 0
	}
	return a.runs[len(a.runs)-1].last
}

// records counts the good records.
func (a *segScan) records() uint64 {
	var n uint64
	for _, r := range a.runs {
		n += r.last - r.first + 1
	}
	return n
}

// analyzeSegment reads a segment file of size bytes from offset 0, where
// seq expect is required (0: take the first frame's seq), to the end of its
// data, stepping over damaged records with resync. idx/idxFirst are its
// sidecar's entries, when there are any (they help to find the record after
// a broken header).
func analyzeSegment(f frameSource, name string, size int64, expect uint64, idx []byte, idxFirst uint64) segScan {
	var a segScan
	res := scanSegmentAt(f, name, size, 0, expect)
	a.head = res
	off := int64(0)
	for {
		if res.last != 0 {
			a.runs = append(a.runs, goodRun{first: res.first, last: res.last, off: off, end: res.end, entries: res.entries})
			expect = res.last + 1
		}
		a.end = res.end
		if res.bad == nil {
			return a
		}
		var fe *FrameError
		if !errors.As(res.bad, &fe) {
			a.ioe = res.bad
			return a
		}
		badSeq := expect
		if badSeq == 0 {
			badSeq = idxFirst
		}
		at, seq, how, ok := resync(f, size, res.end, badSeq, idx, idxFirst)
		if !ok || (badSeq != 0 && seq < badSeq) {
			a.torn = res.bad
			return a
		}
		br := badRecord{off: res.end, end: at, err: fe.Err, resyncedBy: how}
		if badSeq != 0 { // else the first record is unreadable and nothing says its seq
			br.seq, br.last = badSeq, seq-1
		}
		a.bad = append(a.bad, br)
		off = at
		res = scanSegmentAt(f, name, size, at, seq)
	}
}

// describe says in words what is wrong with a damaged stretch.
func (b badRecord) describe() string {
	what := "unreadable record"
	if b.last > b.seq {
		what = fmt.Sprintf("%d unreadable records", b.last-b.seq+1)
	}
	if b.err != nil {
		what += ": " + b.err.Error()
	}
	return what
}

func (b badRecord) damage(file string) *DamageError {
	return &DamageError{File: file, Off: b.off, Bytes: b.end - b.off, Seq: b.seq, Last: b.last, What: b.describe(), Err: b.err}
}

// firstRecord reads the first frame of a segment file: its type and, for
// a Skip marker, the marker.
func firstRecord(path string) (typ uint16, sk wire.Skip, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, wire.Skip{}, false
	}
	defer f.Close()
	var b [wire.HeaderSize + 4096]byte
	n, _ := f.ReadAt(b[:], 0)
	h, p, _, err := wire.DecodeFrame(b[:n])
	if err != nil {
		return 0, wire.Skip{}, false
	}
	if h.Type == wire.TypeSkip {
		if sk, err = wire.ParseSkip(p); err != nil {
			return 0, wire.Skip{}, false
		}
	}
	return h.Type, sk, true
}

// FirstSeq returns the seq of the first record of the segment file at
// path and the first seq that record covers: its own, or, for a Skip
// marker, the marker's From (the seqs before it in the hole have no
// record). ErrNotFound when the file holds no readable first record.
func FirstSeq(path string) (seq, covers uint64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	var b [wire.HeaderSize + 4096]byte
	n, _ := f.ReadAt(b[:], 0)
	h, p, _, err := wire.DecodeFrame(b[:n])
	if err != nil || wire.Seq(p) == 0 {
		return 0, 0, ErrNotFound
	}
	seq, covers = wire.Seq(p), wire.Seq(p)
	if h.Type == wire.TypeSkip {
		if sk, err := wire.ParseSkip(p); err == nil {
			covers = sk.From
		}
	}
	return seq, covers, nil
}

// skipExplains reports whether the segment file at path starts with a
// Skip marker for from…first: the hole before it is explained.
func skipExplains(path string, from, first uint64) bool {
	typ, sk, ok := firstRecord(path)
	return ok && typ == wire.TypeSkip && sk.From == from && sk.Seq == first
}

// missing is the damage of seqs that no segment holds and no Skip
// explains (a deleted segment).
func missing(from, to uint64, before string) *DamageError {
	return &DamageError{Off: -1, Seq: from, Last: to,
		What: fmt.Sprintf("no segment holds these seqs and no Skip marker explains the gap before %s (a segment is missing)", filepath.Base(before))}
}

// frameErrText is a bad frame's reason without the file and offset (a
// DamageError names those itself).
func frameErrText(err error) string {
	var fe *FrameError
	if errors.As(err, &fe) {
		return fe.Err.Error()
	}
	return err.Error()
}
