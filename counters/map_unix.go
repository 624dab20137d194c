//go:build unix

package counters

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// mapNew creates dir (0755), a file of size bytes under a hidden name
// with every page allocated (a full tmpfs fails here, at start, and not
// later with SIGBUS on the first touch of a page), maps it shared and
// writable, lets init fill it, then renames it to final (0644): a reader
// never sees a file without its header. A file of a dead process with
// the same pid is replaced. The caller keeps the file open (to restore
// it should someone truncate it).
func mapNew(dir, final string, size int, init func([]byte)) ([]byte, *os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	tmp := filepath.Join(dir, "."+filepath.Base(final)+".new")
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) ([]byte, *os.File, error) {
		f.Close()
		os.Remove(tmp)
		return nil, nil, err
	}
	if err := f.Chmod(0o644); err != nil {
		return fail(err)
	}
	if err := allocate(f, size); err != nil {
		return fail(fmt.Errorf("allocate %d bytes for %s: %w", size, tmp, err))
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail(fmt.Errorf("mmap %s: %w", tmp, err))
	}
	init(mem)
	if err := os.Rename(tmp, final); err != nil {
		unix.Munmap(mem)
		return fail(err)
	}
	return mem, f, nil
}

// restore gives a file that someone cut short its size and pages back
// (the mapping covers them again). It reports whether the file was short.
func restore(f *os.File, size int) (bool, error) {
	fi, err := f.Stat()
	if err != nil || fi.Size() >= int64(size) {
		return false, err
	}
	return true, allocate(f, size)
}

func unmap(mem []byte) error { return unix.Munmap(mem) }

// mapRead maps path read-only: the reader can never write the writer's
// memory. It returns the mapping and its release.
func mapRead(path string) ([]byte, func(), error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if fi.Size() < HeaderSize || fi.Size() > 64<<20 {
		return nil, nil, fmt.Errorf("%w: %s is %d bytes", ErrFormat, path, fi.Size())
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("counters: mmap %s: %w", path, err)
	}
	return mem, func() { unix.Munmap(mem) }, nil
}

// alive reports whether process pid exists (EPERM: it does, as another user's).
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := unix.Kill(pid, 0)
	return err == nil || err == unix.EPERM
}

// writable reports whether this process may create entries in dir:
// access(2) answers for this user's permissions and for a read-only
// mount (EROFS). A variable: the seam tests use to make a directory
// unwritable for root, whom permissions do not stop.
var writable = func(dir string) bool { return unix.Access(dir, unix.W_OK|unix.X_OK) == nil }
