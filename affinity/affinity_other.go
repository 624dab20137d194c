//go:build !linux

package affinity

import (
	"runtime"
	"time"

	"github.com/walcast/walcast/internal/feature"
)

var errOS = feature.OnOS("thread affinity")

// Lock locks the calling goroutine to its OS thread; pinning and
// SCHED_FIFO are Linux-only and return errOS when asked for.
func Lock(c Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	runtime.LockOSThread()
	if c.Pin || c.FIFO > 0 {
		return errOS
	}
	return nil
}

// CurrentCPUs is Linux-only.
func CurrentCPUs() ([]int, error) { return nil, errOS }

// Mlockall is Linux-only.
func Mlockall() error { return errOS }

// Isolated is Linux-only.
func Isolated() (Isolation, error) { return Isolation{}, errOS }

// OSYield yields the processor (runtime.Gosched here: the OS yield is
// Linux-only).
func OSYield() { runtime.Gosched() }

// OSSleep sleeps for d.
func OSSleep(d time.Duration) { time.Sleep(d) }
