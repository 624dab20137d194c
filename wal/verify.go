package wal

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// SegmentReport is what Verify found in one segment file.
type SegmentReport struct {
	Path     string `json:"path"`
	Active   bool   `json:"active"`
	First    uint64 `json:"first"`     // first record's seq (0 if none)
	Last     uint64 `json:"last"`      // last good record's seq (0 if none)
	Records  uint64 `json:"records"`   // good records
	Bytes    int64  `json:"bytes"`     // bytes of good records
	FileSize int64  `json:"file_size"` // bytes on disk (the active file is preallocated)
	Index    string `json:"index"`     // "ok", "missing", "stale" or "lags" (active: behind the data)
	Problem  string `json:"problem,omitempty"`
}

// VerifyReport is the result of checking one stream directory.
type VerifyReport struct {
	Stream   uint32          `json:"stream"`
	Segments []SegmentReport `json:"segments"`
	Records  uint64          `json:"records"`
	First    uint64          `json:"first"`
	Last     uint64          `json:"last"`
	// Bad is the first problem found (nil when the log verifies): a
	// *FrameError naming the file and byte offset, or a naming/continuity
	// error.
	Bad error `json:"-"`
}

// Verify reads every segment of stream in dir (the stream directory, see
// [StreamDir]) and checks: every frame decodes (version, len, CRC) and
// carries the next seq; sealed names tell the truth (exactly first…last,
// no bytes after the last record); segments continue each other; the
// active segment is all zeros after its last record; sidecar indexes match.
// It is read-only and works while a Writer appends (the active segment's
// tail may then look short).
func Verify(dir string, stream uint32) (VerifyReport, error) {
	rep := VerifyReport{Stream: stream}
	files, err := ListSegments(dir, stream)
	if err != nil {
		return rep, err
	}
	setBad := func(e error) {
		if rep.Bad == nil {
			rep.Bad = e
		}
	}
	var prevLast uint64
	for _, sf := range files {
		sr, bad := verifySegment(sf)
		if sr.Records > 0 {
			if prevLast != 0 && sr.First != prevLast+1 {
				msg := fmt.Sprintf("starts at seq %d, previous segment ends at %d", sr.First, prevLast)
				if sr.Problem == "" {
					sr.Problem = msg
				}
				setBad(fmt.Errorf("%s: %s", sf.Path, msg))
			}
			if rep.First == 0 {
				rep.First = sr.First
			}
			rep.Last = sr.Last
			prevLast = sr.Last
			rep.Records += sr.Records
		} else if !sf.Active {
			prevLast = sf.Last
		}
		if bad != nil {
			setBad(bad)
		}
		rep.Segments = append(rep.Segments, sr)
	}
	return rep, nil
}

func verifySegment(sf SegmentFile) (SegmentReport, error) {
	sr := SegmentReport{Path: sf.Path, Active: sf.Active}
	f, err := os.Open(sf.Path)
	if err != nil {
		sr.Problem = err.Error()
		return sr, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		sr.Problem = err.Error()
		return sr, err
	}
	sr.FileSize = fi.Size()
	expect := sf.First
	res := scanSegment(f, 0, expect)
	sr.First, sr.Last, sr.Bytes = res.first, res.last, res.end
	sr.Records = uint64(len(res.entries) / idxEntrySize)
	var bad error
	if res.bad != nil {
		bad = res.bad
		sr.Problem = res.bad.Error()
	}
	if !sf.Active && bad == nil {
		switch {
		case res.last != sf.Last || res.first != sf.First:
			bad = fmt.Errorf("%s: name says %d…%d, file holds %d…%d", sf.Path, sf.First, sf.Last, res.first, res.last)
		case res.end != fi.Size():
			bad = &FrameError{File: sf.Path, Off: res.end, Seq: res.last + 1, Err: errors.New("bytes after the last record of a sealed segment")}
		}
		if bad != nil {
			sr.Problem = bad.Error()
		}
	}
	if sf.Active && bad == nil {
		if off, ok := firstNonZero(f, res.end); !ok {
			bad = &FrameError{File: sf.Path, Off: off, Seq: res.last + 1, Err: errors.New("non-zero bytes after the last record")}
			sr.Problem = bad.Error()
		}
	}
	sr.Index = checkSidecar(idxName(sf.Path), sf, res)
	return sr, bad
}

// firstNonZero reports whether f is all zeros from off to its end, and the
// first offset that is not.
func firstNonZero(f *os.File, off int64) (int64, bool) {
	buf := make([]byte, 1<<20)
	for {
		n, err := f.ReadAt(buf, off)
		for i, c := range buf[:n] {
			if c != 0 {
				return off + int64(i), false
			}
		}
		off += int64(n)
		if err == io.EOF || n == 0 {
			return off, true
		}
		if err != nil {
			return off, true
		}
	}
}

func checkSidecar(path string, sf SegmentFile, res scanResult) string {
	first, count, e, err := readIdx(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "missing"
		}
		return "stale"
	}
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
}

// ScanSegment calls fn for every record of the segment file at path, in
// file order, until fn returns false, the data ends, or a frame cannot be
// delimited (bad version, or the file ends inside it: returned as a
// *FrameError). A record whose CRC does not match is reported with
// CRCOK false and the scan continues after it.
func ScanSegment(path string, fn func(ScannedRecord) bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	s := newFrameScanner(f, 0)
	s.loose = true
	for {
		fr, off, err := s.next()
		var fe *FrameError
		switch {
		case err == nil:
		case errors.As(err, &fe) && fe.Err == ErrCRC && fr != nil:
		case err == io.EOF:
			return nil
		case err == errPartial:
			return &FrameError{File: path, Off: off, Err: ErrLen}
		default:
			return err
		}
		h, _ := ParseHeader(fr)
		if !fn(ScannedRecord{Off: off, Seq: Seq(fr[HeaderSize:]), Type: h.Type, Len: h.Len, CRCOK: err == nil, Frame: fr}) {
			return nil
		}
	}
}
