package wal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// ExportReport is what [Export] wrote.
type ExportReport struct {
	Dir     string   `json:"dir"`   // the stream directory written: out/<sid>
	Files   []string `json:"files"` // the segment files written, in seq order
	Records uint64   `json:"records"`
	First   uint64   `json:"first"`
	Last    uint64   `json:"last"`
	Bytes   int64    `json:"bytes"`
}

// Export copies stream's log in dir (the stream directory, see
// [StreamDir]) to out/<stream>/ in the form the reference's tools read
// to a clean end: segment files only (no sidecar index, lock or
// reservation file, no quarantine), sealed segments byte for byte under
// names that tell the truth (a mislabelled segment gets its truthful
// name), and the active segment cut to its last record — the zeros this
// package preallocates after it would make a strict sequential reader
// stop with a malformed header. Every byte of the copy is a frame.
//
// Export changes nothing in dir. It refuses a damaged log (repair it
// first) and an out/<stream>/ that already holds segment files. It may
// run while a Writer appends: it copies what was durable when it read
// each file, and checks the copy (a rotation in the middle of it is
// reported as an error; run it again).
func Export(dir string, stream uint32, out string) (ExportReport, error) {
	rep := ExportReport{Dir: StreamDir(out, stream)}
	vr, err := Verify(dir, stream)
	if err != nil {
		return rep, err
	}
	if len(vr.Damage) > 0 {
		e := vr.Damage[0]
		e.More = len(vr.Damage) - 1
		return rep, fmt.Errorf("wal: export: the log is damaged; repair it first: %w", &e)
	}
	files, err := ListSegments(dir, stream)
	if err != nil {
		return rep, fmt.Errorf("wal: export: %w", err)
	}
	if len(files) == 0 {
		return rep, fmt.Errorf("wal: export: %s: %w: no segments of stream %d", dir, ErrNotFound, stream)
	}
	if len(vr.Mislabelled) > 0 {
		files, _ = truthfulFiles(files)
	}
	if ents, err := os.ReadDir(rep.Dir); err == nil {
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".wal") {
				return rep, fmt.Errorf("wal: export: %s already holds a log (%s)", rep.Dir, e.Name())
			}
		}
	}
	if err := os.MkdirAll(rep.Dir, 0o755); err != nil {
		return rep, fmt.Errorf("wal: export: %w", err)
	}
	for _, sf := range files {
		name, end := "", int64(-1)
		if sf.Active {
			if end, err = dataEnd(sf.Path); err != nil {
				return rep, err
			}
			if end == 0 {
				continue // an empty active segment: the reference reads none either
			}
			name = ActiveName(stream)
		} else {
			name = SealedName(stream, sf.First, sf.Last)
		}
		n, err := copyFile(sf.Path, filepath.Join(rep.Dir, name), end)
		if err != nil {
			return rep, err
		}
		rep.Files = append(rep.Files, filepath.Join(rep.Dir, name))
		rep.Bytes += n
	}
	syncDir(rep.Dir)
	check, err := Verify(rep.Dir, stream)
	if err != nil {
		return rep, err
	}
	if check.Bad != nil {
		return rep, fmt.Errorf("wal: export: the copy in %s does not verify (was the log rotated meanwhile? run it again): %w", rep.Dir, check.Bad)
	}
	rep.Records, rep.First, rep.Last = check.Records, check.First, check.Last
	return rep, nil
}

// dataEnd returns the byte offset after the last good record of a
// segment file read from its start.
func dataEnd(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("wal: export: %w", err)
	}
	defer f.Close()
	res := scanSegment(f, 0, 0)
	var fe *FrameError
	if res.bad != nil && !errors.As(res.bad, &fe) {
		return 0, fmt.Errorf("wal: export: read %s: %w", path, res.bad)
	}
	return res.end, nil
}

// copyFile copies the first n bytes of from (all of it for n < 0) to a
// new file to, synced, and returns the bytes copied.
func copyFile(from, to string, n int64) (int64, error) {
	src, err := os.Open(from)
	if err != nil {
		return 0, fmt.Errorf("wal: export: %w", err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, fmt.Errorf("wal: export: %w", err)
	}
	defer dst.Close()
	var r io.Reader = src
	if n >= 0 {
		r = io.LimitReader(src, n)
	}
	c, err := io.Copy(dst, r)
	if err == nil && n >= 0 && c != n {
		err = io.ErrUnexpectedEOF
	}
	if err == nil {
		err = dst.Sync()
	}
	if err != nil {
		return c, fmt.Errorf("wal: export %s: %w", from, err)
	}
	return c, nil
}
