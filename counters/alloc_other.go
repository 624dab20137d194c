//go:build unix && !linux

package counters

import "os"

// allocate sets f's size. Without fallocate the file stays sparse: a
// full file system faults the mirror, which recovers (see File.mirror).
func allocate(f *os.File, size int) error { return f.Truncate(int64(size)) }
