package wal

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/walcast/walcast/wire"
)

// ErrMislabelled matches every [*MislabelError]: sealed segments whose
// records are whole but whose names give other seq ranges.
var ErrMislabelled = errors.New("wal: segment names do not match their records")

// Mislabel is one sealed segment whose records are all good and
// consecutive, and continue the segments before and after it, but whose
// name says it holds another range. The reference writer leaves these:
// when it seals a segment before a write, the name already counts the
// batch being written, which goes to the next segment (so each such
// segment is named one batch further than it holds). No record is
// missing; only the name is wrong.
type Mislabel struct {
	File      string `json:"file"`       // the segment's path
	NameFirst uint64 `json:"name_first"` // the range its name says
	NameLast  uint64 `json:"name_last"`
	First     uint64 `json:"first"` // the range its records hold
	Last      uint64 `json:"last"`
	Truthful  string `json:"truthful"` // the name Repair gives it
}

func (m Mislabel) String() string {
	return fmt.Sprintf("%s holds seqs %d…%d (its name says %d…%d; truthful name %s)",
		filepath.Base(m.File), m.First, m.Last, m.NameFirst, m.NameLast, m.Truthful)
}

// MislabelError refuses a log with mislabelled segments: Open does not
// extend it (its names would mislead every reader by name), Repair
// renames them, nothing else changes.
type MislabelError struct {
	Segments []Mislabel
}

func (e *MislabelError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "wal: %d sealed segments are mislabelled (their records are whole and continue each other; only the names are wrong): %s", len(e.Segments), e.Segments[0])
	if len(e.Segments) > 1 {
		fmt.Fprintf(&b, ", and %d more", len(e.Segments)-1)
	}
	b.WriteString("; Repair (cast wal repair) renames them, nothing is lost")
	return b.String()
}

// Is makes errors.Is(err, ErrMislabelled) hold.
func (e *MislabelError) Is(target error) bool { return target == ErrMislabelled }

// segView is what a segment's records say about its seq range.
type segView struct {
	known       bool   // first (and, for sealed segments, last) come from good records
	clean       bool   // every byte of the file is a good record, seqs consecutive
	first, last uint64 // seqs of the first and last record
	skipFrom    uint64 // the first record is a Skip marker standing for skipFrom…first
	entries     []byte // index entries of a clean scan
}

// viewSegment reads what sf holds. A sealed segment whose sidecar matches
// its name (written by this package after the data was durable) is taken
// at its word without reading; any other is read whole.
func viewSegment(sf SegmentFile) segView {
	f, err := os.Open(sf.Path)
	if err != nil {
		return segView{}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return segView{}
	}
	if sf.Active {
		var v segView
		typ, sk, ok := firstRecord(sf.Path)
		if seq, _, err := FirstSeq(sf.Path); err == nil {
			v.known, v.first = true, seq
			if ok && typ == wire.TypeSkip {
				v.skipFrom = sk.From
			}
		}
		return v
	}
	if ifirst, count, e, err := readIdx(idxName(sf.Path)); err == nil && ifirst == sf.First && count == sf.Last-sf.First+1 &&
		checkIdxEntries(e, fi.Size()) == count {
		if o, l := idxEntryAt(e, count-1); int64(o)+int64(l) == fi.Size() {
			return segView{known: true, clean: true, first: sf.First, last: sf.Last}
		}
	}
	a := analyzeSegment(f, sf.Path, fi.Size(), 0, nil, 0)
	v := segView{first: a.first(), last: a.last()}
	v.known = a.ioe == nil && len(a.bad) == 0 && a.torn == nil && a.records() > 0
	v.clean = v.known && a.end == fi.Size() && len(a.runs) == 1
	if a.head.firstType == wire.TypeSkip && a.head.last != 0 {
		v.skipFrom = a.head.firstSkip.From
	}
	if v.clean {
		v.entries = a.runs[0].entries
	}
	return v
}

// findMislabels looks for sealed segments of files (ListSegments order)
// that hold whole, consecutive records under a name that says otherwise,
// where the log's records run on without a gap across them: the segment
// before ends right before the first record, the one after starts right
// after the last (or with a Skip marker standing for the seqs from
// there), and every seq the name claims is held by some record. Only
// then is the name wrong and nothing lost; anything else (a truncated or
// emptied segment, extra records, a missing neighbour) stays damage.
// views holds what each file's records say (for the mislabelled ones,
// their index entries).
func findMislabels(files []SegmentFile) (mis []Mislabel, views []segView) {
	views = make([]segView, len(files))
	need := false
	for i, sf := range files {
		views[i] = viewSegment(sf)
		if !sf.Active && views[i].clean && (views[i].first != sf.First || views[i].last != sf.Last) {
			need = true
		}
	}
	if !need {
		return nil, views
	}
	follows := func(v segView, last uint64) bool {
		return v.known && (v.first == last+1 || v.skipFrom == last+1)
	}
	for i, sf := range files {
		v := views[i]
		if sf.Active || !v.clean || (v.first == sf.First && v.last == sf.Last) {
			continue
		}
		if i == 0 && sf.First < v.first {
			continue // the name claims seqs before the oldest record
		}
		if i > 0 && !(views[i-1].known && follows(v, views[i-1].last)) {
			continue
		}
		if i+1 < len(files) && views[i+1].known {
			if !follows(views[i+1], v.last) {
				continue
			}
		} else if sf.Last > v.last {
			continue // the name claims seqs that no record holds
		}
		mis = append(mis, Mislabel{File: sf.Path, NameFirst: sf.First, NameLast: sf.Last,
			First: v.first, Last: v.last, Truthful: SealedName(sf.Stream, v.first, v.last)})
	}
	return mis, views
}

// truthfulFiles returns files with each mislabelled segment's First and
// Last taken from its records (the path stays), and the mislabels.
func truthfulFiles(files []SegmentFile) ([]SegmentFile, []Mislabel) {
	mis, _ := findMislabels(files)
	if len(mis) == 0 {
		return files, nil
	}
	out := append([]SegmentFile(nil), files...)
	for _, m := range mis {
		for i := range out {
			if out[i].Path == m.File {
				out[i].First, out[i].Last = m.First, m.Last
			}
		}
	}
	return out, mis
}

// relabel renames the mislabelled segments mis of files to their
// truthful names, with a fresh sidecar index each (views holds their
// scans). It runs as a repair plan (see applyPlan), so an interrupted
// relabel is finished by the next Repair or Open: the truthful names
// are first hard links in <dir>/relabel-<time>/new/, then moved in, then
// the old names go. The same directory keeps the undo record: undo.json
// and undo.sh (the renames back), report.txt, and the old sidecars.
func relabel(dir string, files []SegmentFile, mis []Mislabel, views []segView, rep *RepairReport) error {
	stamp := time.Now().UTC().Format("20060102T150405.000000000Z")
	qdir := filepath.Join(dir, "relabel-"+stamp)
	newDir := filepath.Join(qdir, "new")
	if err := os.MkdirAll(newDir, 0o755); err != nil {
		return fmt.Errorf("wal: relabel: %w", err)
	}
	var install, remove []string
	type rename struct {
		From string `json:"from"`
		To   string `json:"to"`
	}
	var undo []rename
	var sh, txt strings.Builder
	sh.WriteString("#!/bin/sh\n# Restores the segment names cast wal repair changed; run it in the stream directory.\nset -e\n")
	fmt.Fprintf(&txt, "stream directory %s: %d mislabelled segments renamed, no record moved or lost\n", dir, len(mis))
	for _, m := range mis {
		var v segView
		for i := range files {
			if files[i].Path == m.File {
				v = views[i]
			}
		}
		if !v.clean || len(v.entries) == 0 {
			return fmt.Errorf("wal: relabel: %s: no scan of its records", m.File)
		}
		old, nw := filepath.Base(m.File), filepath.Base(m.Truthful)
		if err := os.Link(m.File, filepath.Join(newDir, nw)); err != nil {
			return fmt.Errorf("wal: relabel: %w", err)
		}
		var h [idxHeaderSize]byte
		putIdxHeader(h[:], m.First, m.Last-m.First+1)
		if err := writeSynced(filepath.Join(newDir, idxName(nw)), append(h[:], v.entries...)); err != nil {
			return err
		}
		install = append(install, nw, idxName(nw))
		remove = append(remove, old)
		if _, err := os.Stat(idxName(m.File)); err == nil {
			remove = append(remove, idxName(old))
			os.Link(idxName(m.File), filepath.Join(qdir, idxName(old)))
		}
		undo = append(undo, rename{From: nw, To: old})
		fmt.Fprintf(&sh, "mv -n '%s' '%s'\nrm -f '%s'\n", nw, old, idxName(nw))
		fmt.Fprintf(&txt, "  %s -> %s (holds seqs %d…%d; the name said %d…%d)\n", old, nw, m.First, m.Last, m.NameFirst, m.NameLast)
	}
	b, _ := json.MarshalIndent(struct {
		Dir     string   `json:"dir"`
		Renames []rename `json:"renames"`
	}{dir, undo}, "", "  ")
	for _, f := range []struct {
		name string
		b    []byte
	}{{"undo.json", append(b, '\n')}, {"undo.sh", []byte(sh.String())}, {"report.txt", []byte(txt.String())}} {
		if err := writeSynced(filepath.Join(qdir, f.name), f.b); err != nil {
			return err
		}
	}
	os.Chmod(filepath.Join(qdir, "undo.sh"), 0o755)
	plan, _ := json.Marshal(repairPlan{Install: install, Remove: remove})
	if err := writeSynced(filepath.Join(qdir, "plan.json"), plan); err != nil {
		return err
	}
	syncDir(newDir)
	syncDir(qdir)
	syncDir(dir)
	if err := applyPlan(dir, qdir); err != nil {
		return err
	}
	rep.Relabel = qdir
	rep.Renamed = append(rep.Renamed, mis...)
	return nil
}
