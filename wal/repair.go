package wal

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/walcast/walcast/wire"
)

// RepairReport is what [Repair] found and did.
type RepairReport struct {
	Stream uint32 `json:"stream"`
	Dir    string `json:"dir"`
	// Quarantine is the directory (inside Dir) that now holds the
	// original files that were taken out of the log, one side file per
	// damaged stretch (its raw bytes) and this report as report.json and
	// report.txt. Empty when nothing was damaged.
	Quarantine string        `json:"quarantine,omitempty"`
	Damage     []DamageError `json:"damage"`
	// Markers are the Skip markers (reason SkipRepair) written in place of
	// the damaged or missing records: each stands for seqs From…Seq.
	Markers []wire.Skip `json:"markers"`
	Removed []string    `json:"removed"` // files taken out of the log (kept in Quarantine)
	Written []string    `json:"written"` // segment files written in their place
	Lost    uint64      `json:"lost"`    // seqs whose records are gone from the log
	// Renamed lists the mislabelled segments given their truthful
	// names (no record moved); Relabel is the directory (inside Dir)
	// with the undo record: undo.json, undo.sh, report.txt.
	Renamed []Mislabel `json:"renamed,omitempty"`
	Relabel string     `json:"relabel,omitempty"`
	// Dropped lists bytes quarantined that held no seq the log needs: a
	// torn tail, bytes after a sealed segment's last record.
	Dropped []string `json:"dropped,omitempty"`
}

// Repair takes the damage out of stream's log in dir (the stream
// directory, see [StreamDir]) so that it verifies and a Writer can extend
// it again. First it renames mislabelled segments (see [Mislabel]) to
// the seqs their records hold, with an undo record (RepairReport.Relabel);
// no record moves. Then every damaged stretch of records, and every seq range that no
// segment holds and no Skip explains, is replaced by one Skip marker
// (reason [wire.SkipRepair]) standing for those seqs; good records are kept
// byte for byte. Segments with damage are split where the damage was (a
// seq hole lies only between segments, and the segment after it starts
// with its marker). Nothing is deleted: the original files, the raw bytes
// of each damaged stretch and a report go to a quarantine directory in
// dir. A log without damage or wrong names is left alone (and no lock
// file is left behind). Repair takes the stream's lock
// (ErrLocked while a Writer has it open); an interrupted repair is
// finished by the next Repair or Open.
func Repair(dir string, stream uint32) (RepairReport, error) {
	l, err := lockStream(dir, stream)
	if err != nil {
		return RepairReport{Stream: stream, Dir: dir}, err
	}
	rep, err := repairLocked(dir, stream)
	// A repair that changed nothing leaves no lock file behind either.
	l.release(rep.Quarantine != "" || rep.Relabel != "")
	return rep, err
}

// piece is one segment file of the repaired log: records copied from an
// original file, possibly led by a Skip marker.
type piece struct {
	marker      *wire.Skip
	src         string    // original file the runs come from
	runs        []goodRun // consecutive, seqs continue each other (and the marker)
	first, last uint64
}

func (p *piece) add(r goodRun) {
	if p.first == 0 {
		p.first = r.first
	}
	p.last = r.last
	p.runs = append(p.runs, r)
}

type segPlan struct {
	sf     SegmentFile
	keep   bool
	pieces []piece
	cut    [][2]int64 // byte ranges quarantined as side files
	why    []string   // what each cut range was
}

func repairLocked(dir string, stream uint32) (RepairReport, error) {
	rep := RepairReport{Stream: stream, Dir: dir}
	if err := finishRepairs(dir); err != nil {
		return rep, err
	}
	files, err := ListSegments(dir, stream)
	if err != nil {
		return rep, fmt.Errorf("wal: repair: %w", err)
	}
	// Wrong names first: renaming loses nothing, and the damage (if any)
	// is then judged against names that tell the truth.
	if mis, views := findMislabels(files); len(mis) > 0 {
		if err := relabel(dir, files, mis, views, &rep); err != nil {
			return rep, err
		}
		if files, err = ListSegments(dir, stream); err != nil {
			return rep, fmt.Errorf("wal: repair: %w", err)
		}
	}
	var plans []segPlan
	var prevLast uint64
	changed := false
	for _, sf := range files {
		pl, dmg, err := planSegment(sf, prevLast)
		if err != nil {
			return rep, err
		}
		for _, d := range dmg {
			rep.Damage = append(rep.Damage, *d)
		}
		if !pl.keep || len(pl.pieces) > 0 {
			changed = true
		}
		plans = append(plans, pl)
		for _, p := range pl.pieces {
			prevLast = max(prevLast, p.last)
		}
		if pl.keep && !sf.Active {
			prevLast = max(prevLast, sf.Last)
		}
	}
	if !changed {
		return rep, nil
	}
	stamp := time.Now().UTC().Format("20060102T150405.000000000Z")
	qdir := filepath.Join(dir, "quarantine-"+stamp)
	newDir := filepath.Join(qdir, "new")
	if err := os.MkdirAll(newDir, 0o755); err != nil {
		return rep, fmt.Errorf("wal: repair: %w", err)
	}
	rep.Quarantine = qdir
	var install, remove []string
	for _, pl := range plans {
		if _, err := os.Stat(pl.sf.Path); err == nil && !pl.keep {
			base := filepath.Base(pl.sf.Path)
			remove = append(remove, base)
			rep.Removed = append(rep.Removed, pl.sf.Path)
			if err := os.Link(pl.sf.Path, filepath.Join(qdir, base)); err != nil {
				return rep, fmt.Errorf("wal: repair: keep %s: %w", base, err)
			}
			if _, err := os.Stat(idxName(pl.sf.Path)); err == nil {
				remove = append(remove, filepath.Base(idxName(pl.sf.Path)))
				os.Link(idxName(pl.sf.Path), filepath.Join(qdir, filepath.Base(idxName(pl.sf.Path))))
			}
			for i, c := range pl.cut {
				side := filepath.Join(qdir, fmt.Sprintf("%s.damaged-%d-%d", base, c[0], c[1]))
				if err := copyRange(pl.sf.Path, side, c[0], c[1]); err != nil {
					return rep, err
				}
				if pl.why[i] != "" {
					rep.Dropped = append(rep.Dropped, fmt.Sprintf("%s bytes %d…%d (%s)", base, c[0], c[1], pl.why[i]))
				}
			}
		}
		for _, p := range pl.pieces {
			name := SealedName(stream, p.first, p.last)
			if err := writePiece(filepath.Join(newDir, name), stream, &p); err != nil {
				return rep, err
			}
			install = append(install, name, filepath.Base(idxName(name)))
			rep.Written = append(rep.Written, filepath.Join(dir, name))
			if p.marker != nil {
				rep.Markers = append(rep.Markers, *p.marker)
				rep.Lost += p.marker.Seq - p.marker.From + 1
			}
		}
	}
	if err := writeReport(qdir, &rep); err != nil {
		return rep, err
	}
	plan, _ := json.Marshal(repairPlan{Install: install, Remove: remove})
	if err := writeSynced(filepath.Join(qdir, "plan.json"), plan); err != nil {
		return rep, err
	}
	syncDir(newDir)
	syncDir(qdir)
	syncDir(dir)
	return rep, applyPlan(dir, qdir)
}

// planSegment decides what becomes of one segment file: kept as it is,
// or replaced by pieces (good runs, split where damage was, each damaged
// stretch replaced by a Skip marker); plus a marker segment for seqs
// before it that nothing holds.
func planSegment(sf SegmentFile, prevLast uint64) (segPlan, []*DamageError, error) {
	pl := segPlan{sf: sf, keep: true}
	f, err := os.Open(sf.Path)
	if err != nil {
		return pl, nil, fmt.Errorf("wal: repair: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return pl, nil, fmt.Errorf("wal: repair: %w", err)
	}
	size := fi.Size()
	ifirst, _, idx, ierr := readIdx(idxName(sf.Path))
	if ierr != nil {
		idx = nil
	} else {
		idx = idx[:checkIdxEntries(idx, size)*idxEntrySize]
	}
	expect := sf.First
	if sf.Active {
		expect = 0
	}
	a := analyzeSegment(f, sf.Path, size, expect, idx, ifirst)
	if a.ioe != nil {
		return pl, nil, fmt.Errorf("wal: repair: read %s: %w", sf.Path, a.ioe)
	}
	first, last := sf.First, sf.Last
	var inner []*DamageError
	if sf.Active {
		first = a.first()
		if len(a.bad) > 0 && a.bad[0].off == 0 && a.bad[0].seq == 0 {
			switch {
			case len(idx) > 0:
				a.bad[0].seq = ifirst
			case prevLast != 0:
				a.bad[0].seq = prevLast + 1
			}
			if a.bad[0].seq != 0 {
				a.bad[0].last = max(a.bad[0].seq, first) - 1
			}
		}
		if len(a.bad) > 0 && a.bad[0].off == 0 && a.bad[0].seq != 0 {
			first = a.bad[0].seq
		}
		if first == 0 && len(idx) > 0 {
			first = ifirst
		}
		if first == 0 {
			return pl, nil, nil // an empty active segment
		}
		last = max(a.last(), first-1)
		covered := uint64(0)
		if len(idx) > 0 && ifirst == first {
			covered = ifirst + uint64(len(idx)/idxEntrySize) - 1
		}
		if a.torn != nil && covered > last {
			// Durable records at the tail that do not read back.
			a.bad = append(a.bad, badRecord{off: a.end, end: trimZeros(f, a.end, size), seq: last + 1, last: covered, err: a.torn})
			last = covered
		}
		for _, b := range a.bad {
			if b.seq != 0 {
				inner = append(inner, b.damage(sf.Path))
			}
		}
	} else {
		inner = sealedDamage(sf, size, &a)
	}
	if first <= prevLast && (!sf.Active || a.records() > 0) {
		return pl, nil, fmt.Errorf("wal: repair: %s starts at seq %d, inside the previous segment (which ends at %d): move one of them away", sf.Path, first, prevLast)
	}
	var dmg []*DamageError
	if prevLast != 0 && first > prevLast+1 && !(a.head.firstType == wire.TypeSkip && a.head.firstSkip.From == prevLast+1 && a.first() == first) {
		dmg = append(dmg, missing(prevLast+1, first-1, sf.Path))
		sk := wire.Skip{Seq: first - 1, From: prevLast + 1, Reason: wire.SkipRepair}
		pl.pieces = append(pl.pieces, piece{marker: &sk, first: sk.Seq, last: sk.Seq})
	}
	dmg = append(dmg, inner...)
	if len(inner) == 0 {
		return pl, dmg, nil // the file stays as it is
	}
	pl.keep = false
	// Walk the good runs and the damaged stretches in file order.
	var cur *piece
	flush := func() {
		if cur != nil && cur.last != 0 {
			pl.pieces = append(pl.pieces, *cur)
		}
		cur = nil
	}
	cut := func(off, end int64, why string) {
		if end > off {
			pl.cut = append(pl.cut, [2]int64{off, end})
			pl.why = append(pl.why, why)
		}
	}
	bi := 0
	for ri := 0; ri <= len(a.runs); ri++ {
		for bi < len(a.bad) && (ri == len(a.runs) || a.bad[bi].off < a.runs[ri].off) {
			b := a.bad[bi]
			bi++
			if b.seq == 0 {
				cut(b.off, b.end, "damaged bytes before the first readable record; nothing says their seqs")
				continue
			}
			cut(b.off, b.end, "")
			hi := min(b.last, last)
			if hi < b.seq {
				continue
			}
			flush()
			sk := wire.Skip{Seq: hi, From: b.seq, Reason: wire.SkipRepair}
			cur = &piece{marker: &sk, src: sf.Path, first: hi, last: hi}
		}
		if ri == len(a.runs) {
			break
		}
		r := a.runs[ri]
		if r.first > last {
			cut(r.off, r.end, fmt.Sprintf("records %d…%d after seq %d, the last the segment's name allows", r.first, r.last, last))
			continue
		}
		if r.last > last {
			k := last - r.first + 1
			o, l := idxEntryAt(r.entries, k-1)
			cut(int64(o)+int64(l), r.end, fmt.Sprintf("records after seq %d, the last the segment's name allows", last))
			r.entries = r.entries[:k*idxEntrySize]
			r.end = int64(o) + int64(l)
			r.last = last
		}
		if cur == nil {
			cur = &piece{}
		}
		cur.src = sf.Path
		cur.add(r)
	}
	flush()
	switch {
	case !sf.Active && a.last() < sf.Last:
		// The data ends before the name's last seq.
		from := max(a.last()+1, sf.First)
		sk := wire.Skip{Seq: sf.Last, From: from, Reason: wire.SkipRepair}
		pl.pieces = append(pl.pieces, piece{marker: &sk, first: sf.Last, last: sf.Last})
		cut(a.end, size, "")
	case !sf.Active:
		cut(a.end, size, fmt.Sprintf("bytes after seq %d, the segment's last record", sf.Last))
	case a.torn != nil && len(a.bad) == 0 || a.torn != nil && a.bad[len(a.bad)-1].off != a.end:
		cut(a.end, trimZeros(f, a.end, size), "the torn tail of the active segment (never durable)")
	}
	return pl, dmg, nil
}

// trimZeros returns the end of the last non-zero byte in [off, end).
func trimZeros(f frameSource, off, end int64) int64 {
	const chunk = 64 << 10
	buf := make([]byte, chunk)
	for end > off {
		lo := max(off, end-chunk)
		n, _ := f.ReadAt(buf[:end-lo], lo)
		for i := n - 1; i >= 0; i-- {
			if buf[i] != 0 {
				return lo + int64(i) + 1
			}
		}
		end = lo
	}
	return off
}

// writePiece writes one repaired segment file and its sidecar index.
func writePiece(path string, stream uint32, p *piece) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("wal: repair: %w", err)
	}
	defer f.Close()
	var idx []byte
	var off int64
	if p.marker != nil {
		var m [wire.SkipFrameSize]byte
		wire.PutSkipFrame(m[:], *p.marker)
		if _, err := f.Write(m[:]); err != nil {
			return fmt.Errorf("wal: repair: %w", err)
		}
		var e [idxEntrySize]byte
		putIdxEntry(e[:], 0, wire.SkipFrameSize)
		idx = append(idx, e[:]...)
		off = wire.SkipFrameSize
	}
	if len(p.runs) > 0 {
		src, err := os.Open(p.src)
		if err != nil {
			return fmt.Errorf("wal: repair: %w", err)
		}
		defer src.Close()
		for _, r := range p.runs {
			b := make([]byte, r.end-r.off)
			if _, err := src.ReadAt(b, r.off); err != nil {
				return fmt.Errorf("wal: repair: read %s: %w", p.src, err)
			}
			if _, err := f.Write(b); err != nil {
				return fmt.Errorf("wal: repair: %w", err)
			}
			for i := 0; i < len(r.entries); i += idxEntrySize {
				o, l := idxEntryAt(r.entries[i:], 0)
				var e [idxEntrySize]byte
				putIdxEntry(e[:], uint32(int64(o)-r.off+off), l)
				idx = append(idx, e[:]...)
			}
			off += r.end - r.off
		}
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("wal: repair: %w", err)
	}
	var h [idxHeaderSize]byte
	putIdxHeader(h[:], p.first, p.last-p.first+1)
	return writeSynced(idxName(path), append(h[:], idx...))
}

func copyRange(from, to string, off, end int64) error {
	src, err := os.Open(from)
	if err != nil {
		return fmt.Errorf("wal: repair: %w", err)
	}
	defer src.Close()
	b := make([]byte, end-off)
	n, _ := src.ReadAt(b, off)
	return writeSynced(to, b[:n])
}

func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("wal: repair: %w", err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		return fmt.Errorf("wal: repair: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("wal: repair: %w", err)
	}
	return nil
}

type repairPlan struct {
	Install []string `json:"install"` // files in new/ to move into the stream directory
	Remove  []string `json:"remove"`  // files to take out of it (not also installed)
}

// applyPlan installs a repair's new files and removes the originals it
// replaces. It is idempotent: a repair interrupted at any point is
// finished by running it again.
func applyPlan(dir, qdir string) error {
	b, err := os.ReadFile(filepath.Join(qdir, "plan.json"))
	if err != nil {
		return fmt.Errorf("wal: repair: %w", err)
	}
	var plan repairPlan
	if err := json.Unmarshal(b, &plan); err != nil {
		return fmt.Errorf("wal: repair: %s: %w", qdir, err)
	}
	installed := map[string]bool{}
	for _, n := range plan.Install {
		installed[n] = true
		src := filepath.Join(qdir, "new", n)
		if _, err := os.Stat(src); err != nil {
			continue // moved by an earlier run
		}
		if err := os.Rename(src, filepath.Join(dir, n)); err != nil {
			return fmt.Errorf("wal: repair: install %s: %w", n, err)
		}
	}
	for _, n := range plan.Remove {
		if installed[n] {
			continue
		}
		if err := os.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("wal: repair: remove %s: %w", n, err)
		}
	}
	syncDir(dir)
	if err := writeSynced(filepath.Join(qdir, "done"), nil); err != nil {
		return err
	}
	os.Remove(filepath.Join(qdir, "new"))
	return nil
}

// finishRepairs completes repairs that were interrupted.
func finishRepairs(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "quarantine-") && !strings.HasPrefix(e.Name(), "relabel-") {
			continue
		}
		q := filepath.Join(dir, e.Name())
		if _, err := os.Stat(filepath.Join(q, "plan.json")); err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(q, "done")); err == nil {
			continue
		}
		if err := applyPlan(dir, q); err != nil {
			return err
		}
	}
	return nil
}

func writeReport(qdir string, rep *RepairReport) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := writeSynced(filepath.Join(qdir, "report.json"), append(b, '\n')); err != nil {
		return err
	}
	return writeSynced(filepath.Join(qdir, "report.txt"), []byte(rep.Text()))
}

// Text is the report in words, one line per damaged place.
func (r *RepairReport) Text() string {
	var b strings.Builder
	if len(r.Renamed) > 0 {
		fmt.Fprintf(&b, "stream %d: %d mislabelled segments renamed (no record moved or lost; undo: %s)\n", r.Stream, len(r.Renamed), filepath.Join(r.Relabel, "undo.sh"))
		for _, m := range r.Renamed {
			fmt.Fprintf(&b, "  renamed %s -> %s (holds seqs %d…%d)\n", filepath.Base(m.File), filepath.Base(m.Truthful), m.First, m.Last)
		}
	}
	if r.Quarantine == "" && len(r.Damage) == 0 {
		if len(r.Renamed) == 0 {
			fmt.Fprintf(&b, "stream %d: no damage, nothing changed\n", r.Stream)
		}
		return b.String()
	}
	fmt.Fprintf(&b, "stream %d: %d damaged places, %d seqs lost, quarantine %s\n", r.Stream, len(r.Damage), r.Lost, r.Quarantine)
	for _, d := range r.Damage {
		fmt.Fprintf(&b, "  lost: %s\n", strings.TrimPrefix(d.Error(), "wal: damaged log: "))
	}
	markers := append([]wire.Skip(nil), r.Markers...)
	sort.Slice(markers, func(i, j int) bool { return markers[i].Seq < markers[j].Seq })
	for _, m := range markers {
		fmt.Fprintf(&b, "  Skip marker at seq %d stands for seqs %d…%d\n", m.Seq, m.From, m.Seq)
	}
	for _, p := range r.Removed {
		fmt.Fprintf(&b, "  moved out of the log: %s\n", filepath.Base(p))
	}
	for _, p := range r.Written {
		fmt.Fprintf(&b, "  written: %s\n", filepath.Base(p))
	}
	for _, d := range r.Dropped {
		fmt.Fprintf(&b, "  quarantined (no seq lost): %s\n", d)
	}
	return b.String()
}
