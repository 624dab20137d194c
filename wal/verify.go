package wal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/walcast/walcast/wire"
)

// SegmentReport is what Verify found in one segment file.
type SegmentReport struct {
	Path     string `json:"path"`
	Active   bool   `json:"active"`
	First    uint64 `json:"first"`     // first record's seq (0 if none)
	Last     uint64 `json:"last"`      // last good record's seq (0 if none), past any damage
	Records  uint64 `json:"records"`   // good records
	Bytes    int64  `json:"bytes"`     // bytes up to the end of the last good record
	FileSize int64  `json:"file_size"` // bytes on disk (the active file is preallocated)
	Index    string `json:"index"`     // "ok", "missing", "stale" or "lags" (active: behind the data)
	Damaged  int    `json:"damaged"`   // damaged places in this file
	Problem  string `json:"problem,omitempty"`
	// Truthful is the name the records call for when the segment is
	// mislabelled (see Mislabel); the other fields then describe it by
	// its records.
	Truthful string `json:"truthful,omitempty"`
}

// VerifyReport is the result of checking one stream directory.
type VerifyReport struct {
	Stream   uint32          `json:"stream"`
	Segments []SegmentReport `json:"segments"`
	Records  uint64          `json:"records"`
	First    uint64          `json:"first"`
	Last     uint64          `json:"last"` // the highest good seq (damage does not hide what follows it)
	// Damage lists every damaged place (Repair takes them out).
	Damage []DamageError `json:"damage,omitempty"`
	// Skips lists the Skip markers in the log (holes a crash or a repair
	// left, each explained).
	Skips []wire.Skip `json:"skips,omitempty"`
	// Mislabelled lists sealed segments whose records are whole and
	// continue the log but whose names say other seqs; the rest of the
	// report reads them by their records. Bad is then a *MislabelError
	// (errors.Is(Bad, ErrMislabelled)) unless something is damaged too.
	Mislabelled []Mislabel `json:"mislabelled,omitempty"`
	// Unknown lists *.wal files that are not segments of the stream;
	// OrphanIndexes sidecars without a segment (Open removes those).
	Unknown       []string `json:"unknown,omitempty"`
	OrphanIndexes []string `json:"orphan_indexes,omitempty"`
	// Bad is the first problem found (nil when the log verifies): a
	// *DamageError naming the file, byte offset and seq, a *FrameError,
	// or a naming/continuity error.
	Bad error `json:"-"`
}

// Verify reads every segment of stream in dir (the stream directory, see
// [StreamDir]) and checks: every frame decodes (version, len, CRC) and
// carries the next seq; sealed names tell the truth (exactly first…last,
// no bytes after the last record); segments continue each other, or the
// one after a hole starts with the Skip marker that explains it; the
// active segment is all zeros after its last record; sidecar indexes
// match. It reads past damage (so Last is the true end), lists every
// damaged place, and reports *.wal files of other names. It is read-only
// and works while a Writer appends (the active segment's tail may then
// look short). A directory it cannot read is an error.
func Verify(dir string, stream uint32) (VerifyReport, error) {
	rep := VerifyReport{Stream: stream}
	if _, err := os.ReadDir(dir); err != nil {
		return rep, fmt.Errorf("wal: verify: %w", err)
	}
	files, err := ListSegments(dir, stream)
	if err != nil {
		return rep, err
	}
	rep = verifyFiles(dir, stream, files)
	if rep.Bad == nil {
		return rep, nil
	}
	// Names that do not check out: if the records run on without a gap
	// and only names are wrong, verify by what the records hold and
	// report the names.
	fixed, mis := truthfulFiles(files)
	if len(mis) == 0 {
		return rep, nil
	}
	rep = verifyFiles(dir, stream, fixed)
	rep.Mislabelled = mis
	for i := range rep.Segments {
		for _, m := range mis {
			if rep.Segments[i].Path == m.File {
				rep.Segments[i].Truthful = filepath.Base(m.Truthful)
			}
		}
	}
	if rep.Bad == nil {
		rep.Bad = &MislabelError{Segments: mis}
	}
	return rep, nil
}

// verifyFiles is Verify over files, taking each one's First and Last as
// its name.
func verifyFiles(dir string, stream uint32, files []SegmentFile) VerifyReport {
	rep := VerifyReport{Stream: stream}
	rep.Unknown, rep.OrphanIndexes = tidyDir(dir, stream, false)
	setBad := func(e error) {
		if rep.Bad == nil {
			rep.Bad = e
		}
	}
	for _, u := range rep.Unknown {
		setBad(fmt.Errorf("%s: not a segment name of stream %d (move it out of the stream directory)", u, stream))
	}
	var prevLast uint64
	for _, sf := range files {
		sr, sk, dmg, bad := verifySegment(sf, prevLast)
		for _, d := range dmg {
			rep.Damage = append(rep.Damage, *d)
			sr.Damaged++
		}
		if sk != nil {
			rep.Skips = append(rep.Skips, *sk)
		}
		if sr.Records > 0 || len(dmg) > 0 {
			if rep.First == 0 && sr.First != 0 {
				rep.First = sr.First
				if sk != nil && sk.Seq == sr.First {
					rep.First = sk.From
				}
			}
			rep.Last = max(rep.Last, sr.Last)
			rep.Records += sr.Records
		}
		switch {
		case !sf.Active:
			prevLast = max(prevLast, sf.Last, sr.Last)
		case sr.Last != 0:
			prevLast = sr.Last
		}
		if len(dmg) > 0 {
			setBad(dmg[0])
		}
		if bad != nil {
			setBad(bad)
		}
		rep.Segments = append(rep.Segments, sr)
	}
	return rep
}

func verifySegment(sf SegmentFile, prevLast uint64) (SegmentReport, *wire.Skip, []*DamageError, error) {
	f, err := os.Open(sf.Path)
	if err != nil {
		return SegmentReport{Path: sf.Path, Active: sf.Active, Problem: err.Error()}, nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return SegmentReport{Path: sf.Path, Active: sf.Active, Problem: err.Error()}, nil, nil, err
	}
	ifirst, count, idx, ierr := readIdx(idxName(sf.Path))
	var st sidecarState
	switch {
	case ierr == nil:
		st = sidecarState{present: true, first: ifirst, count: count, entries: idx}
	case !errors.Is(ierr, os.ErrNotExist):
		st = sidecarState{bad: true}
	}
	return verifySource(f, fi.Size(), sf, prevLast, st)
}

// sidecarState is a segment's sidecar index as read from disk.
type sidecarState struct {
	present, bad bool
	first, count uint64
	entries      []byte
}

// verifySource checks one segment's bytes (src, size bytes long) against
// its name and the previous segment's last seq; it does no file I/O, so
// the fuzz targets run it in memory.
func verifySource(f frameSource, size int64, sf SegmentFile, prevLast uint64, side sidecarState) (SegmentReport, *wire.Skip, []*DamageError, error) {
	sr := SegmentReport{Path: sf.Path, Active: sf.Active, FileSize: size}
	expect := sf.First
	if sf.Active {
		expect = 0
	}
	ifirst, idx := side.first, side.entries
	if side.present {
		idx = idx[:checkIdxEntries(idx, sr.FileSize)*idxEntrySize]
	} else {
		idx = nil
	}
	a := analyzeSegment(f, sf.Path, sr.FileSize, expect, idx, ifirst)
	sr.First, sr.Last, sr.Bytes, sr.Records = a.first(), a.last(), a.end, a.records()
	var dmg []*DamageError
	var bad error
	if a.ioe != nil {
		bad = a.ioe
	}
	var sk *wire.Skip
	if a.head.firstType == wire.TypeSkip && a.head.last != 0 {
		s := a.head.firstSkip
		sk = &s
	}
	first := sr.First
	if len(a.bad) > 0 && a.bad[0].off == 0 && a.bad[0].seq != 0 {
		first = a.bad[0].seq
	}
	if !sf.Active {
		first = sf.First
	}
	if prevLast != 0 && first != 0 && first > prevLast+1 && (sk == nil || sk.From != prevLast+1 || sk.Seq != first) {
		dmg = append(dmg, missing(prevLast+1, first-1, sf.Path))
	}
	if prevLast != 0 && first != 0 && first <= prevLast {
		bad = fmt.Errorf("%s: starts at seq %d, previous segment ends at %d", sf.Path, first, prevLast)
	}
	if sf.Active {
		for _, b := range a.bad {
			dmg = append(dmg, b.damage(sf.Path))
		}
		if a.torn != nil {
			covered := uint64(0)
			if len(idx) > 0 && ifirst == first {
				covered = ifirst + uint64(len(idx)/idxEntrySize) - 1
			}
			last := max(a.last(), first-1)
			if covered > last {
				dmg = append(dmg, &DamageError{File: sf.Path, Off: a.end, Seq: last + 1, Last: covered,
					What: "unreadable although the index lists it as durable: " + frameErrText(a.torn)})
			} else if bad == nil {
				bad = a.torn // a torn tail: Open cuts it (or a record in flight)
			}
		} else if off, ok := firstNonZero(f, a.end, size); !ok && bad == nil {
			bad = &FrameError{File: sf.Path, Off: off, Seq: a.last() + 1, Err: errors.New("non-zero bytes after the last record")}
		}
	} else {
		dmg = append(dmg, sealedDamage(sf, sr.FileSize, &a)...)
	}
	switch {
	case len(dmg) > 0:
		sr.Problem = dmg[0].Error()
	case bad != nil:
		sr.Problem = bad.Error()
	}
	res := a.head
	if len(a.runs) == 1 && len(a.bad) == 0 {
		res.entries = a.runs[0].entries
	}
	sr.Index = checkSidecar(side, sf, res)
	return sr, sk, dmg, bad
}

// firstNonZero reports whether f is all zeros from off to size, and the
// first offset that is not.
func firstNonZero(f frameSource, off, size int64) (int64, bool) {
	buf := make([]byte, min(1<<20, max(size-off, 0)+1))
	for off < size {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
		for i, c := range buf[:n] {
			if c != 0 {
				return off + int64(i), false
			}
		}
		off += int64(n)
		if n == 0 || err != nil {
			break
		}
	}
	return off, true
}

func checkSidecar(side sidecarState, sf SegmentFile, res scanResult) string {
	if !side.present {
		if side.bad {
			return "stale"
		}
		return "missing"
	}
	first, count, e := side.first, side.count, side.entries
	n := uint64(len(res.entries) / idxEntrySize)
	if n == 0 {
		return "ok"
	}
	if first != res.first {
		return "stale"
	}
	k := uint64(len(e) / idxEntrySize)
	if !sf.Active && (count != n || k != n) {
		return "stale"
	}
	for i := uint64(0); i < min(k, n); i++ {
		o1, l1 := idxEntryAt(e, i)
		o2, l2 := idxEntryAt(res.entries, i)
		if o1 != o2 || l1 != l2 {
			return "stale"
		}
	}
	if k < n {
		return "lags"
	}
	if k > n {
		return "stale"
	}
	return "ok"
}

// ScannedRecord is one record as ScanSegment saw it.
type ScannedRecord struct {
	Off   int64  // byte offset in the file
	Seq   uint64 // payload[0:8] (0 when the payload is shorter)
	Type  uint16
	Len   uint16 // payload length
	CRCOK bool
	Frame []byte // header and payload; valid during the callback only
	// Unreadable is the bytes before Off that are no frame (a broken
	// header the scan stepped over, as Verify does); 0 normally.
	Unreadable int64
}

// ScanSegment calls fn for every record of the segment file at path, in
// file order, until fn returns false or the data ends. A record whose CRC
// does not match is reported with CRCOK false and the scan continues
// after it. Bytes that are not a frame (a broken header) are stepped over
// the way Verify does — by the sidecar index or a scan for the next frame
// that decodes with a plausible seq — and reported as the next record's
// Unreadable count; when nothing good follows them, they end the scan as
// a *FrameError. So the records with CRCOK true are the good records
// Verify counts in the file.
func ScanSegment(path string, fn func(ScannedRecord) bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	ifirst, _, idx, ierr := readIdx(idxName(path))
	if ierr != nil {
		idx = nil
	} else {
		idx = idx[:checkIdxEntries(idx, fi.Size())*idxEntrySize]
	}
	return scanRecords(f, path, fi.Size(), idx, ifirst, fn)
}

// scanRecords is ScanSegment over any source of size bytes, with the
// sidecar's entries (or nil).
func scanRecords(f frameSource, path string, size int64, idx []byte, ifirst uint64, fn func(ScannedRecord) bool) error {
	s := newScannerAt(f, path, size, 0)
	s.loose = true
	var expect uint64 // the seq after the last frame seen (0: none yet)
	var gap int64
	for {
		fr, off, err := s.next()
		var fe *FrameError
		switch {
		case err == nil:
		case errors.As(err, &fe) && fe.Err == wire.ErrCRC && fr != nil:
		case err == io.EOF:
			return nil
		case err == errPartial || errors.As(err, &fe):
			bad := &FrameError{File: path, Off: off, Seq: expect, Err: wire.ErrLen}
			if fe != nil {
				bad.Err = fe.Err
			}
			want := expect
			if want == 0 {
				want = ifirst
				if sf, ok := parseSegmentName(filepath.Base(path)); ok && !sf.Active {
					want = sf.First
				}
			}
			at, _, _, ok := resync(f, size, off, want, idx, ifirst)
			if !ok {
				return bad
			}
			gap += at - off
			s.seek(at)
			continue
		default:
			return err
		}
		h, _ := wire.ParseHeader(fr)
		seq := wire.Seq(fr[wire.HeaderSize:])
		if err == nil {
			expect = seq + 1
		} else if expect != 0 {
			expect++
		}
		if !fn(ScannedRecord{Off: off, Seq: seq, Type: h.Type, Len: h.Len, CRCOK: err == nil, Frame: fr, Unreadable: gap}) {
			return nil
		}
		gap = 0
	}
}
