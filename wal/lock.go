package wal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/walcast/walcast/wal/internal/unix"
)

// streamLock is the flock on <sid>.lock that makes one Writer (or one
// Repair) the only one changing a stream directory. Opening a log that is
// then refused must leave the directory as it found it, so a lock file
// this process had to create is removed again by release(false) while the
// lock is still held.
type streamLock struct {
	f       *os.File
	path    string
	created bool // the file did not exist before this lock
}

func lockFileName(stream uint32) string { return fmt.Sprintf("%d.lock", stream) }

// lockStream takes the lock of stream in dir without waiting (ErrLocked
// when someone holds it). A lock file that another process removed
// between our open and our flock (a refused opener cleaning up) is not
// the lock any more: the open is retried on the file now at the path.
func lockStream(dir string, stream uint32) (*streamLock, error) {
	p := filepath.Join(dir, lockFileName(stream))
	for try := 0; ; try++ {
		created := false
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if errors.Is(err, os.ErrNotExist) {
			f, err = os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
			created = err == nil
			if errors.Is(err, os.ErrExist) && try < 100 {
				continue
			}
		}
		if err != nil {
			return nil, fmt.Errorf("wal: open lock %s: %w", p, err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			// Even a file this call created stays: whoever holds the
			// lock opened it after us and keeps it.
			f.Close()
			if err == unix.EWOULDBLOCK {
				return nil, fmt.Errorf("wal: %s: %w", dir, ErrLocked)
			}
			return nil, fmt.Errorf("wal: lock %s: %w", p, err)
		}
		fi, err1 := f.Stat()
		cur, err2 := os.Stat(p)
		if err1 == nil && err2 == nil && os.SameFile(fi, cur) {
			return &streamLock{f: f, path: p, created: created}, nil
		}
		f.Close()
		if try >= 100 {
			return nil, fmt.Errorf("wal: lock %s: the file keeps being replaced", p)
		}
	}
}

// release unlocks. With keep false, a lock file this lock created is
// removed first (a refused Open leaves nothing behind).
func (l *streamLock) release(keep bool) {
	if l == nil || l.f == nil {
		return
	}
	if !keep && l.created {
		os.Remove(l.path)
	}
	l.f.Close()
	l.f = nil
}
