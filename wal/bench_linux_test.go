//go:build linux

package wal

import (
	"fmt"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkODirectSync is the disk cost under the WAL's flush, without the
// WAL: one O_DIRECT pwrite of the flush size then fdatasync per op, into
// a file that is preallocated as the WAL preallocates its segments
// (fallocate: unwritten extents, which every first write converts, so
// each fdatasync commits the filesystem's journal) or whose blocks were
// written once before (the fdatasync only flushes the device cache).
//
//	flock /tmp/walcast-bench.lock go test -run '^$' -bench ODirectSync ./wal
func BenchmarkODirectSync(b *testing.B) {
	const file = 256 << 20
	for _, ext := range []string{"fallocated", "written"} {
		for _, bs := range []int{256 << 10, 2 << 20} {
			b.Run(fmt.Sprintf("%s/write=%dKiB", ext, bs>>10), func(b *testing.B) {
				path := filepath.Join(b.TempDir(), "odirect")
				fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_DIRECT|unix.O_CLOEXEC, 0o644)
				if err != nil {
					b.Skipf("O_DIRECT: %v", err)
				}
				defer unix.Close(fd)
				buf := alignedBuf(bs, pageSize)
				for i := range buf {
					buf[i] = byte(i)
				}
				prepare := func() {
					if err := unix.Ftruncate(fd, 0); err != nil {
						b.Fatal(err)
					}
					if err := unix.Fallocate(fd, 0, 0, file); err != nil {
						b.Skipf("fallocate: %v", err)
					}
					if ext == "written" {
						for off := int64(0); off < file; off += int64(bs) {
							if err := pwriteFull(unix.Pwrite, fd, buf, off); err != nil {
								b.Fatal(err)
							}
						}
					}
					if err := unix.Fdatasync(fd); err != nil {
						b.Fatal(err)
					}
				}
				prepare()
				b.SetBytes(int64(bs))
				b.ResetTimer()
				off := int64(0)
				for i := 0; i < b.N; i++ {
					if off+int64(bs) > file {
						b.StopTimer()
						if ext == "fallocated" {
							prepare() // unwritten extents again
						}
						off = 0
						b.StartTimer()
					}
					if err := pwriteFull(unix.Pwrite, fd, buf, off); err != nil {
						b.Fatal(err)
					}
					if err := unix.Fdatasync(fd); err != nil {
						b.Fatal(err)
					}
					off += int64(bs)
				}
			})
		}
	}
}
