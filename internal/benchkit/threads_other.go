//go:build !linux

package benchkit

import "fmt"

// ThreadTimes needs /proc: Linux only.
func ThreadTimes() (map[int]int64, error) {
	return nil, fmt.Errorf("benchkit: per-thread CPU times: %w", ErrUnsupported)
}

// Gettid is 0 off Linux.
func Gettid() int { return 0 }

// ThreadTime is -1 off Linux.
func ThreadTime(int) int64 { return -1 }

// SelfThreadTime is -1 off Linux.
func SelfThreadTime() int64 { return -1 }
