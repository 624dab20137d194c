package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/walcast/walcast/wal"
)

// The raw floors of `cast bench wal`: plain O_DIRECT syscalls on the same
// filesystem, no index, no CRC, no goroutine hand-off.

const rawBlock = 4096

func alignedBlock(n int) []byte {
	b := make([]byte, n+rawBlock)
	skip := (rawBlock - int(uintptr(unsafe.Pointer(&b[0]))&(rawBlock-1))) & (rawBlock - 1)
	return b[skip : skip+n]
}

type rawFile struct {
	fd  int
	buf []byte
}

// newRawFile creates a preallocated file written with O_DIRECT.
func newRawFile(path string, size int64) (*rawFile, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_TRUNC|unix.O_DIRECT|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("raw floor: open %s O_DIRECT: %w", path, err)
	}
	if err := unix.Fallocate(fd, 0, 0, size); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("raw floor: fallocate: %w", err)
	}
	b := alignedBlock(1<<20 + rawBlock)
	for i := range b {
		b[i] = byte(i)
	}
	return &rawFile{fd: fd, buf: b}, nil
}

// writeSync writes n bytes (rounded up to 4 KiB) at off and fdatasyncs;
// it returns the bytes written.
func (r *rawFile) writeSync(off int64, n int) (int, error) {
	n = (n + rawBlock - 1) &^ (rawBlock - 1)
	off &^= rawBlock - 1
	if _, err := unix.Pwrite(r.fd, r.buf[:n], off); err != nil {
		return 0, fmt.Errorf("raw floor: pwrite: %w", err)
	}
	if err := unix.Fdatasync(r.fd); err != nil {
		return 0, fmt.Errorf("raw floor: fdatasync: %w", err)
	}
	return n, nil
}

func (r *rawFile) close() { unix.Close(r.fd) }

type rawSegments struct {
	fds   []int
	sizes []int64
	blk   []byte
}

// openRawSegments opens the segment files of a log of n records of frame
// bytes each with O_DIRECT; random reads stay inside the records (the
// active file's preallocated tail is unwritten and would read as free
// zeros).
func openRawSegments(dir string, stream uint32, n uint64, frame int64) (*rawSegments, error) {
	files, err := wal.ListSegments(dir, stream)
	if err != nil {
		return nil, err
	}
	r := &rawSegments{blk: alignedBlock(rawBlock)}
	var sealed uint64
	for _, f := range files {
		fd, err := unix.Open(f.Path, unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
		if err != nil {
			r.close()
			return nil, fmt.Errorf("raw floor: open %s O_DIRECT: %w", f.Path, err)
		}
		size := int64(0)
		if f.Active {
			size = int64(n-sealed) * frame
		} else {
			var st unix.Stat_t
			unix.Fstat(fd, &st)
			size = st.Size
			sealed += f.Last - f.First + 1
		}
		if size < rawBlock {
			unix.Close(fd)
			continue
		}
		r.fds = append(r.fds, fd)
		r.sizes = append(r.sizes, size)
	}
	return r, nil
}

// readRandom preads one aligned 4 KiB block at a random offset of a random
// segment, weighted by size.
func (r *rawSegments) readRandom(rng *rand.Rand) error {
	var total int64
	for _, s := range r.sizes {
		total += s
	}
	x := rng.Int64N(total)
	i := 0
	for x >= r.sizes[i] {
		x -= r.sizes[i]
		i++
	}
	if _, err := unix.Pread(r.fds[i], r.blk, x&^(rawBlock-1)); err != nil {
		return fmt.Errorf("raw floor: pread: %w", err)
	}
	return nil
}

func (r *rawSegments) close() {
	for _, fd := range r.fds {
		unix.Close(fd)
	}
	r.fds = nil
}

// dropCaches empties the page cache (root only) so a "cold" row reads the
// device; false when it cannot.
func dropCaches() bool {
	unix.Sync()
	return os.WriteFile("/proc/sys/vm/drop_caches", []byte("1"), 0) == nil
}
