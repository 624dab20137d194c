package wal

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/walcast/walcast/wal/internal/unix"
)

// rotate seals the active segment (exact length, name with its seq range,
// full sidecar) and starts a new preallocated active segment. Each step is
// resumable, so a failed rotation (ENOSPC) is retried by the next flush.
func (w *Writer) rotate() error {
	act := w.act
	if w.rot.nextFd < 0 && !w.rot.sealed {
		tmp := filepath.Join(w.dir, fmt.Sprintf("%d_next.tmp", w.cfg.Stream))
		fd, err := w.openSegmentFile(tmp, unix.O_CREAT|unix.O_TRUNC)
		if err != nil {
			return err
		}
		if err := w.sys.prealloc(fd, w.cfg.SegmentSize); err != nil {
			unix.Close(fd)
			os.Remove(tmp)
			return fmt.Errorf("wal: preallocate next segment: %w", err)
		}
		w.rot.nextFd, w.rot.tmpPath = fd, tmp
	}
	if !w.rot.sealed {
		if err := unix.Ftruncate(act.fd, w.actEnd); err != nil {
			return fmt.Errorf("wal: seal %s: truncate: %w", act.path, err)
		}
		if err := w.sys.datasync(act.fd); err != nil {
			return fmt.Errorf("wal: seal %s: fdatasync: %w", act.path, err)
		}
		name := filepath.Join(w.dir, SealedName(w.cfg.Stream, act.first, act.last))
		if err := os.Rename(act.path, name); err != nil {
			return fmt.Errorf("wal: seal %s: %w", act.path, err)
		}
		w.rot.sealed = true
		// Sidecar: written whole from memory; a failure only leaves the
		// index in memory (Open rebuilds it).
		if w.actIdxFd >= 0 {
			unix.Close(w.actIdxFd)
			w.actIdxFd = -1
		}
		os.Remove(filepath.Join(w.dir, idxName(ActiveName(w.cfg.Stream))))
		ipath := idxName(name)
		mapped, _ := writeSealedIdx(ipath, act.first, act.count(), act.idx)
		w.mu.Lock()
		act.path = name
		act.sealed = true
		if mapped != nil {
			if act.mapped == nil {
				// Readers use s.idx only under w.mu, so once the mapped
				// sidecar replaces the heap index no one sees that array:
				// the next segment reuses it (pages already faulted in).
				w.rot.spare = act.idx[:0]
			}
			act.idx, act.mapped = mapped[idxHeaderSize:], mapped
		}
		w.mu.Unlock()
		syncDir(w.dir)
	}
	apath := filepath.Join(w.dir, ActiveName(w.cfg.Stream))
	if err := os.Rename(w.rot.tmpPath, apath); err != nil {
		return fmt.Errorf("wal: rotate: activate %s: %w", apath, err)
	}
	syncDir(w.dir)
	// Records of one stream tend to keep their size: the sealed segment's
	// entry count sizes the new index, so it is allocated at most once.
	idx := w.rot.spare
	if need := act.count() * idxEntrySize; uint64(cap(idx)) < need {
		idx = make([]byte, 0, need)
	}
	next := &segment{first: w.committed + 1, last: w.committed, path: apath, fd: w.rot.nextFd, idx: idx}
	w.rot = rotation{nextFd: -1}
	w.mu.Lock()
	w.segs = append(w.segs, next)
	w.mu.Unlock()
	w.act = next
	w.actEnd = 0
	clear(w.tailBlock)
	w.actIdxFd = createActiveIdx(filepath.Join(w.dir, idxName(ActiveName(w.cfg.Stream))), next.first, nil)
	w.statsMu.Lock()
	w.st.rotations++
	w.statsMu.Unlock()
	w.prune()
	return nil
}

// prune deletes sealed segments whose mtime is older than Retention.
func (w *Writer) prune() {
	if w.cfg.Retention == 0 {
		return
	}
	cut := time.Now().Add(-w.cfg.Retention)
	var drop []*segment
	w.mu.Lock()
	keep := w.segs[:0]
	for _, s := range w.segs {
		if s.sealed {
			if fi, err := os.Stat(s.path); err == nil && !fi.ModTime().After(cut) {
				drop = append(drop, s)
				continue
			}
		}
		keep = append(keep, s)
	}
	clear(w.segs[len(keep):])
	w.segs = keep
	if len(drop) > 0 {
		// An empty active segment's first is the next seq to be written,
		// so Bounds reports 0, 0 until a record exists.
		w.oldest.Store(w.segs[0].first)
	}
	w.mu.Unlock()
	for _, s := range drop {
		dropSegment(s)
		// The index first: a kill between the two leaves a segment
		// without an index (rebuilt on open), never an orphan index.
		os.Remove(idxName(s.path))
		os.Remove(s.path)
	}
	w.statsMu.Lock()
	w.st.pruned += uint64(len(drop))
	w.statsMu.Unlock()
}

func syncDir(dir string) {
	if fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
		unix.Fsync(fd)
		unix.Close(fd)
	}
}

// writeSealedIdx writes a complete sidecar (header with count, entries)
// and returns it memory-mapped.
func writeSealedIdx(path string, first, count uint64, entries []byte) ([]byte, error) {
	f, err := os.OpenFile(path+".tmp", os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var h [idxHeaderSize]byte
	putIdxHeader(h[:], first, count)
	if _, err := f.Write(h[:]); err != nil {
		os.Remove(path + ".tmp")
		return nil, err
	}
	if _, err := f.Write(entries[:count*idxEntrySize]); err != nil {
		os.Remove(path + ".tmp")
		return nil, err
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		os.Remove(path + ".tmp")
		return nil, err
	}
	return unix.Mmap(int(f.Fd()), 0, idxHeaderSize+int(count)*idxEntrySize, unix.PROT_READ, unix.MAP_SHARED)
}

// createActiveIdx (re)creates the active sidecar with entries; -1 on error.
func createActiveIdx(path string, first uint64, entries []byte) int {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return -1
	}
	var h [idxHeaderSize]byte
	putIdxHeader(h[:], first, 0)
	if err := pwriteFull(unix.Pwrite, fd, h[:], 0); err != nil {
		unix.Close(fd)
		return -1
	}
	if len(entries) > 0 {
		if err := pwriteFull(unix.Pwrite, fd, entries, idxHeaderSize); err != nil {
			unix.Close(fd)
			return -1
		}
	}
	return fd
}

// openSegmentFile opens a segment read-write with O_DIRECT when the writer
// uses it.
func (w *Writer) openSegmentFile(path string, flag int) (int, error) {
	if w.direct {
		fd, err := openDirect(path, unix.O_RDWR|flag)
		if err == nil {
			return fd, nil
		}
	}
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC|flag, 0o644)
	if err != nil {
		return -1, fmt.Errorf("wal: open %s: %w", path, err)
	}
	return fd, nil
}
