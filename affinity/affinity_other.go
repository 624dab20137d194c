//go:build !linux

package affinity

import (
	"runtime"
	"time"
)

// Lock locks the calling goroutine to its OS thread; pinning and
// SCHED_FIFO are Linux-only and return ErrNotSupported when asked for.
func Lock(c Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	runtime.LockOSThread()
	if c.CPU >= 0 || c.FIFO > 0 {
		return ErrNotSupported
	}
	return nil
}

// CurrentCPUs is Linux-only.
func CurrentCPUs() ([]int, error) { return nil, ErrNotSupported }

// Mlockall is Linux-only.
func Mlockall() error { return ErrNotSupported }

// Isolated is Linux-only.
func Isolated() (Isolation, error) { return Isolation{}, ErrNotSupported }

// OSYield yields the processor (runtime.Gosched here: the OS yield is
// Linux-only).
func OSYield() { runtime.Gosched() }

// OSSleep sleeps for d.
func OSSleep(d time.Duration) { time.Sleep(d) }
