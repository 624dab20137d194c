package wal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/walcast/walcast/wal/internal/unix"
	"github.com/walcast/walcast/wire"
)

// recover loads the stream directory: sealed segments with their indexes
// (rebuilt when missing or stale), then the active segment, whose every
// record is read and checked; a torn tail is cut and everything after the
// last good record is zero again. It leaves the writer ready to append at
// committed+1. Damage — a durable record that does not read back, a seq
// range no segment holds and no Skip explains, a sealed segment that does
// not hold what its name says — is returned as a *DamageError (the first
// one; Stats().Recovery.Damage lists all) and nothing is changed on disk.
func (w *Writer) recover() error {
	w.st.recovery = Recovery{TornAt: -1}
	if err := finishRepairs(w.dir); err != nil {
		return err
	}
	ents, err := os.ReadDir(w.dir)
	if err != nil {
		return fmt.Errorf("wal: open: %w", err)
	}
	// First a read-only pass: nothing on disk changes unless the log is
	// whole.
	w.probeDirect()
	unknown, orphans := tidyDir(w.dir, w.cfg.Stream, false)
	w.st.recovery.Unknown = unknown
	files, err := ListSegments(w.dir, w.cfg.Stream)
	if err != nil {
		return fmt.Errorf("wal: open: %w", err)
	}
	apath := filepath.Join(w.dir, ActiveName(w.cfg.Stream))
	var dmg []*DamageError
	var fixes []func()
	var prevLast uint64
	for _, sf := range files {
		if sf.Active {
			continue
		}
		if sf.First <= prevLast {
			if me := mislabelled(files); me != nil {
				return me
			}
			return &DamageError{File: sf.Path, Off: -1, Seq: sf.First, Last: prevLast,
				What: fmt.Sprintf("overlaps the previous segment (which ends at seq %d); move one of them away", prevLast)}
		}
		if prevLast != 0 && sf.First > prevLast+1 && !skipExplains(sf.Path, prevLast+1, sf.First) {
			dmg = append(dmg, missing(prevLast+1, sf.First-1, sf.Path))
		}
		s, d, fix, err := w.loadSealed(sf)
		if err != nil {
			return err
		}
		dmg = append(dmg, d...)
		if fix != nil {
			fixes = append(fixes, fix)
		}
		w.segs = append(w.segs, s)
		prevLast = sf.Last
		w.st.recovery.Segments++
		w.st.recovery.Records += s.count()
	}
	plan, d, err := w.analyzeActive(apath, prevLast)
	if err != nil {
		return err
	}
	dmg = append(dmg, d...)
	for _, e := range dmg {
		w.st.recovery.Damage = append(w.st.recovery.Damage, *e)
	}
	if len(dmg) > 0 {
		if me := mislabelled(files); me != nil {
			w.st.recovery.Damage = nil
			return me
		}
		e := *dmg[0]
		e.More = len(dmg) - 1
		return &e
	}
	// The log is whole: tidy up (leftovers of an interrupted rotation,
	// orphan sidecars), complete the indexes, cut the torn tail.
	prefix := fmt.Sprintf("%d_", w.cfg.Stream)
	for _, e := range ents {
		if n := e.Name(); strings.HasPrefix(n, prefix) && strings.HasSuffix(n, ".tmp") {
			os.Remove(filepath.Join(w.dir, n))
		}
	}
	for _, o := range orphans {
		os.Remove(o)
	}
	w.st.recovery.OrphanIndexes = orphans
	for _, fix := range fixes {
		fix()
	}
	afd, err := w.openActive(apath)
	if err != nil {
		return err
	}
	act := &segment{path: apath, fd: afd}
	w.segs = append(w.segs, act)
	w.act = act
	if err := w.applyActive(act, plan); err != nil {
		return err
	}
	w.st.recovery.Records += act.count()
	w.committed = max(prevLast, act.last)
	if act.count() == 0 {
		act.first = w.committed + 1
		act.last = w.committed
	}
	w.oldest.Store(w.segs[0].first)
	if w.segs[0].count() > 0 {
		// A log that begins with a Skip covers the seqs from its From.
		if typ, sk, ok := firstRecord(w.segs[0].path); ok && typ == wire.TypeSkip && sk.Seq == w.segs[0].first {
			w.oldest.Store(sk.From)
		}
	}
	return nil
}

// mislabelled returns the refusal of a log whose only fault may be
// wrong names (see findMislabels), or nil when no segment is mislabelled.
// It reads every sealed segment without a matching sidecar, so Open asks
// only after the names failed to check out.
func mislabelled(files []SegmentFile) error {
	if mis, _ := findMislabels(files); len(mis) > 0 {
		return &MislabelError{Segments: mis}
	}
	return nil
}

// tidyDir looks at a stream directory's file names: it returns the
// *.wal files whose names are not segment names of stream, and the
// sidecar indexes without a segment (left by a kill during pruning), which
// it removes when remove is set.
func tidyDir(dir string, stream uint32, remove bool) (unknown, orphans []string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil
	}
	have := map[string]bool{}
	for _, e := range ents {
		have[e.Name()] = true
	}
	for _, e := range ents {
		n := e.Name()
		switch {
		case e.IsDir():
		case strings.HasSuffix(n, ".wal"):
			if sf, ok := parseSegmentName(n); !ok || sf.Stream != stream {
				unknown = append(unknown, filepath.Join(dir, n))
			}
		case strings.HasSuffix(n, ".idx"):
			stem := strings.TrimSuffix(n, ".idx")
			if sf, ok := parseSegmentName(stem + ".wal"); ok && sf.Stream == stream && !have[stem+".wal"] {
				orphans = append(orphans, filepath.Join(dir, n))
				if remove {
					os.Remove(filepath.Join(dir, n))
				}
			}
		}
	}
	return unknown, orphans
}

// probeDirect decides between O_DIRECT and buffered writes + fdatasync
// for the stream directory, on a probe file it removes again (so that
// nothing is created before recovery knows the log is whole): open with
// O_DIRECT, then statx STATX_DIOALIGN. Any refusal means buffered, with
// the reason kept for Stats.
func (w *Writer) probeDirect() {
	if w.cfg.DisableDirectIO {
		w.dirNote = "O_DIRECT disabled by config"
		return
	}
	// The probe file is created exclusively and removed at once; a
	// leftover of an earlier run is probed as it is and left for the tidy
	// step, so that a refused Open changes nothing.
	probe := filepath.Join(w.dir, fmt.Sprintf("%d_probe.tmp", w.cfg.Stream))
	fd, err := openDirect(probe, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL)
	if err == nil {
		defer os.Remove(probe)
	} else if errors.Is(err, os.ErrExist) {
		fd, err = openDirect(probe, unix.O_RDWR)
	}
	if err != nil {
		w.dirNote = fmt.Sprintf("open O_DIRECT: %v", err)
		return
	}
	defer unix.Close(fd)
	mem, off, err := dioAlign(fd)
	switch {
	case err == nil:
		w.direct = true
		w.align = max(pageSize, int64(mem), int64(off))
		w.dirNote = fmt.Sprintf("statx DIOALIGN: mem %d, offset %d; using %d-byte blocks", mem, off, w.align)
	case errors.Is(err, ErrNotSupported):
		w.dirNote = "statx DIOALIGN: filesystem has no O_DIRECT for this file"
	default:
		w.direct = true
		w.dirNote = fmt.Sprintf("%v; assuming %d-byte alignment", err, pageSize)
	}
}

// openActive opens (creating) the active segment for writing, with
// O_DIRECT when probeDirect chose it.
func (w *Writer) openActive(path string) (int, error) {
	return w.openSegmentFile(path, unix.O_CREAT)
}

func (w *Writer) openRead(path string) (int, error) {
	if w.direct {
		if fd, err := openDirect(path, unix.O_RDONLY); err == nil {
			return fd, nil
		}
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("wal: open %s: %w", path, err)
	}
	return fd, nil
}

// loadSealed opens a sealed segment and its index. A sidecar that matches
// (header, entries, file size, first and last record) is trusted without
// reading the rest, unless Config.VerifySealed; otherwise every record is
// read and checked, and the index rebuilt. A segment that does not hold
// exactly what its name says is reported as damage.
func (w *Writer) loadSealed(sf SegmentFile) (s *segment, dmg []*DamageError, fix func(), err error) {
	fd, err := w.openRead(sf.Path)
	if err != nil {
		return nil, nil, nil, err
	}
	s = &segment{first: sf.First, last: sf.Last, path: sf.Path, fd: fd, sealed: true}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, nil, nil, fmt.Errorf("wal: stat %s: %w", sf.Path, err)
	}
	want := sf.Last - sf.First + 1
	ipath := idxName(sf.Path)
	first, count, e, ierr := readIdx(ipath)
	if ierr == nil && first == sf.First && count == want && checkIdxEntries(e, st.Size) == want && !w.cfg.VerifySealed {
		lo, ll := idxEntryAt(e, want-1)
		if int64(lo)+int64(ll) == st.Size && w.verifyEntry(fd, e, 0, sf.First) && w.verifyEntry(fd, e, want-1, sf.Last) {
			if m, err := mmapIdx(ipath, want); err == nil {
				s.idx, s.mapped = m[idxHeaderSize:], m
				return s, nil, nil, nil
			}
			s.idx = e
			return s, nil, nil, nil
		}
	}
	// Read every record.
	f, err := os.Open(sf.Path) // buffered: the scanner's buffer is not aligned
	if err != nil {
		unix.Close(fd)
		return nil, nil, nil, fmt.Errorf("wal: open: %w", err)
	}
	var hint []byte
	if ierr == nil && first == sf.First {
		hint = e
	}
	a := analyzeSegment(f, sf.Path, st.Size, sf.First, hint, sf.First)
	f.Close()
	if a.ioe != nil {
		unix.Close(fd)
		return nil, nil, nil, fmt.Errorf("wal: read %s: %w", sf.Path, a.ioe)
	}
	if dmg = sealedDamage(sf, st.Size, &a); len(dmg) > 0 {
		s.last = s.first - 1
		return s, dmg, nil, nil
	}
	entries := a.runs[0].entries
	s.idx = entries
	if ierr == nil && first == sf.First && count == want && bytes.Equal(e, entries) {
		return s, nil, nil, nil // the sidecar was right (VerifySealed read the data)
	}
	fix = func() {
		w.st.recovery.IndexRebuilt++
		if m, err := writeSealedIdx(ipath, sf.First, want, entries); err == nil {
			s.idx, s.mapped = m[idxHeaderSize:], m
		}
	}
	return s, nil, fix, nil
}

// sealedDamage compares what a scan found in a sealed segment with its
// name: damaged records inside, a data end before (or after) the name's
// last seq, bytes after the last record.
func sealedDamage(sf SegmentFile, size int64, a *segScan) []*DamageError {
	var dmg []*DamageError
	for _, b := range a.bad {
		dmg = append(dmg, b.damage(sf.Path))
	}
	last := a.last()
	switch {
	case a.torn != nil && last < sf.Last:
		from := max(last+1, sf.First)
		var fe *FrameError
		errors.As(a.torn, &fe)
		d := &DamageError{File: sf.Path, Off: a.end, Bytes: size - a.end, Seq: from, Last: sf.Last, What: "unreadable: " + frameErrText(a.torn)}
		if fe != nil {
			d.Err = fe.Err
		}
		dmg = append(dmg, d)
	case last < sf.Last:
		from := max(last+1, sf.First)
		dmg = append(dmg, &DamageError{File: sf.Path, Off: a.end, Seq: from, Last: sf.Last,
			What: fmt.Sprintf("the file ends after %d bytes; its name says it holds seqs %d…%d", a.end, sf.First, sf.Last)})
	case last > sf.Last || a.torn != nil || a.end != size:
		dmg = append(dmg, &DamageError{File: sf.Path, Off: a.end, Bytes: size - a.end, Seq: sf.Last + 1, Last: sf.Last + 1,
			What: fmt.Sprintf("%d bytes after seq %d, the last its name allows", size-a.end, sf.Last)})
	}
	return dmg
}

func mmapIdx(path string, count uint64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return unix.Mmap(int(f.Fd()), 0, idxHeaderSize+int(count)*idxEntrySize, unix.PROT_READ, unix.MAP_SHARED)
}

// verifyEntry reads the frame index entry i points at and checks it
// decodes with seq want.
func (w *Writer) verifyEntry(fd int, e []byte, i, want uint64) bool {
	off, l := idxEntryAt(e, i)
	base := alignDown(int64(off), w.align)
	span := alignUp(int64(off)+int64(l), w.align) - base
	buf := alignedBuf(int(span), int(w.align))
	n, err := preadFull(unix.Pread, fd, buf, base)
	if err != nil || int64(n) < int64(off)+int64(l)-base {
		return false
	}
	_, p, size, err := wire.DecodeFrame(buf[int64(off)-base : int64(off)-base+int64(l)])
	return err == nil && size == int(l) && wire.Seq(p) == want
}

// activePlan is what analyzeActive found in the active segment.
type activePlan struct {
	first, last uint64
	end         int64
	entries     []byte
}

// analyzeActive reads and checks every record of the active segment (a
// missing file is an empty segment) without changing anything: a bad
// record with nothing good after it that the index does not list is a
// torn tail (it was never durable: cut by applyActive); damage is
// returned.
func (w *Writer) analyzeActive(path string, prevLast uint64) (activePlan, []*DamageError, error) {
	var plan activePlan
	// The sidecar lists records that were durable: a record it covers
	// cannot be a torn write, and a record it covers must be there.
	ifirst, _, e, ierr := readIdx(idxName(path))
	f, err := os.Open(path) // buffered: the scanner's buffer is not aligned
	if errors.Is(err, os.ErrNotExist) {
		if ierr == nil && len(e) >= idxEntrySize {
			if covered := ifirst + uint64(len(e)/idxEntrySize) - 1; covered > prevLast {
				return plan, []*DamageError{{File: path, Off: -1, Seq: max(ifirst, prevLast+1), Last: covered,
					What: "the active segment is missing; its index lists these seqs as durable"}}, nil
			}
		}
		plan.first, plan.last = prevLast+1, prevLast
		return plan, nil, nil
	}
	if err != nil {
		return plan, nil, fmt.Errorf("wal: open: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return plan, nil, fmt.Errorf("wal: stat %s: %w", path, err)
	}
	size := fi.Size()
	var k uint64
	if ierr == nil {
		k = uint64(len(e) / idxEntrySize) // entries beyond the data are the damage, if any
		e = e[:checkIdxEntries(e, size)*idxEntrySize]
	} else {
		e = nil
	}
	a := analyzeSegment(f, path, size, 0, e, ifirst)
	if a.ioe != nil {
		return plan, nil, fmt.Errorf("wal: read %s: %w", path, a.ioe)
	}
	first := a.first()
	if len(a.bad) > 0 && a.bad[0].off == 0 {
		// The first record is damaged: its seq is the index's first, or
		// follows the sealed data.
		if a.bad[0].seq == 0 {
			a.bad[0].seq = prevLast + 1
			if ierr == nil && k > 0 {
				a.bad[0].seq = ifirst
			}
			a.bad[0].last = max(a.bad[0].seq, first) - 1
		}
		first = a.bad[0].seq
	}
	if first == 0 {
		first = prevLast + 1
		if ierr == nil && k > 0 {
			first = ifirst // the data is gone but the index says what was there
		}
	}
	var dmg []*DamageError
	if first <= prevLast && a.records() > 0 {
		dmg = append(dmg, &DamageError{File: path, Off: 0, Seq: first, Last: prevLast,
			What: fmt.Sprintf("the active segment starts at seq %d, inside sealed data (which ends at %d)", first, prevLast)})
	}
	if prevLast != 0 && first > prevLast+1 && a.records() > 0 {
		if h := a.head; h.firstType != wire.TypeSkip || h.firstSkip.From != prevLast+1 || h.firstSkip.Seq != first || len(a.bad) > 0 && a.bad[0].off == 0 {
			dmg = append(dmg, missing(prevLast+1, first-1, path))
		}
	}
	for _, b := range a.bad {
		dmg = append(dmg, b.damage(path))
	}
	last := a.last()
	if last == 0 {
		last = first - 1
	}
	covered := uint64(0)
	if ierr == nil && k > 0 && ifirst == first {
		covered = ifirst + k - 1
	}
	switch {
	case covered > last:
		what := "the data ends before the records its index lists as durable"
		var fe *FrameError
		if a.torn != nil {
			what = "unreadable although the index lists it as durable: " + frameErrText(a.torn)
			errors.As(a.torn, &fe)
		}
		d := &DamageError{File: path, Off: a.end, Seq: last + 1, Last: covered, What: what}
		if fe != nil {
			d.Err = fe.Err
		}
		dmg = append(dmg, d)
	case a.torn != nil:
		w.st.recovery.TornAt = a.end
		w.st.recovery.TornReason = a.torn.Error()
	}
	if len(dmg) > 0 {
		return plan, dmg, nil
	}
	plan.first, plan.last, plan.end = first, last, a.end
	if len(a.runs) > 0 {
		plan.entries = a.runs[0].entries
	}
	return plan, nil, nil
}

// applyActive makes the active segment what analyzeActive found: every
// byte after the last record zero (a torn tail, or blocks of a write that
// never completed), the file SegmentSize long again, the sidecar
// rewritten.
func (w *Writer) applyActive(act *segment, plan activePlan) error {
	end := plan.end
	w.st.recovery.ScannedBytes = end
	act.first, act.last, act.idx = plan.first, plan.last, plan.entries
	var st unix.Stat_t
	if err := unix.Fstat(act.fd, &st); err != nil {
		return fmt.Errorf("wal: stat %s: %w", act.path, err)
	}
	if st.Size > end || st.Size < w.cfg.SegmentSize {
		if err := unix.Ftruncate(act.fd, end); err != nil {
			return fmt.Errorf("wal: truncate %s at %d: %w", act.path, end, err)
		}
		if err := w.sys.prealloc(act.fd, max(w.cfg.SegmentSize, end)); err != nil {
			return fmt.Errorf("wal: preallocate %s: %w", act.path, err)
		}
		if err := w.sys.datasync(act.fd); err != nil {
			return fmt.Errorf("wal: fdatasync %s: %w", act.path, err)
		}
	}
	w.actEnd = end
	w.tailBlock = alignedBuf(int(w.align), int(w.align))
	if tail := end & (w.align - 1); tail > 0 {
		buf := alignedBuf(int(w.align), int(w.align))
		if n, err := preadFull(unix.Pread, act.fd, buf, end-tail); err != nil || int64(n) < tail {
			return fmt.Errorf("wal: read tail block of %s: %v", act.path, err)
		}
		copy(w.tailBlock, buf[:tail])
	}
	w.actIdxFd = createActiveIdx(idxName(act.path), plan.first, plan.entries)
	return nil
}
