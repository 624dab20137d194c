package affinity

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Lock locks the calling goroutine to its OS thread for good (it never
// unlocks: when the goroutine exits the runtime retires the thread, so
// the placement cannot leak) and applies c: pin to c.CPU, and SCHED_FIFO
// at c.FIFO when set.
func Lock(c Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	runtime.LockOSThread()
	if c.Pin {
		var s unix.CPUSet
		s.Set(c.CPU)
		// pid 0 is the calling thread: x/sys passes its tid.
		if err := unix.SchedSetaffinity(0, &s); err != nil {
			return fmt.Errorf("affinity: pin thread to CPU %d: %w", c.CPU, err)
		}
	}
	if c.FIFO > 0 {
		if err := unix.SchedSetAttr(0, &unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: uint32(c.FIFO)}, 0); err != nil {
			return fmt.Errorf("affinity: SCHED_FIFO priority %d (needs CAP_SYS_NICE or RLIMIT_RTPRIO): %w", c.FIFO, err)
		}
	}
	return nil
}

// CurrentCPUs returns the calling thread's allowed CPUs.
func CurrentCPUs() ([]int, error) {
	var s unix.CPUSet
	if err := unix.SchedGetaffinity(0, &s); err != nil {
		return nil, err
	}
	var out []int
	for c := 0; c < 1024; c++ {
		if s.IsSet(c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// Mlockall locks every current and future page of the process in memory
// (MCL_ONFAULT: pages are locked as they are touched), so a page fault
// never stalls the hot loop. Opt-in: it counts against RLIMIT_MEMLOCK
// without CAP_IPC_LOCK, and a process that grows past what it may lock
// fails its allocations (the Go runtime then aborts).
func Mlockall() error {
	if err := unix.Mlockall(unix.MCL_CURRENT | unix.MCL_FUTURE | unix.MCL_ONFAULT); err != nil {
		return fmt.Errorf("affinity: mlockall: %w", err)
	}
	return nil
}

// Isolated reads which CPUs the kernel keeps free of other work:
// /sys/devices/system/cpu/isolated and nohz_full (a missing file means
// none), plus /proc/cmdline for isolcpus=, nohz_full= and rcu_nocbs=.
func Isolated() (Isolation, error) {
	var iso Isolation
	var err error
	if iso.Isolated, err = readCPUList("/sys/devices/system/cpu/isolated"); err != nil {
		return iso, err
	}
	if iso.NohzFull, err = readCPUList("/sys/devices/system/cpu/nohz_full"); err != nil {
		return iso, err
	}
	if b, err := os.ReadFile("/proc/cmdline"); err == nil {
		var keep []string
		for _, f := range strings.Fields(string(b)) {
			if strings.HasPrefix(f, "isolcpus=") || strings.HasPrefix(f, "nohz_full=") || strings.HasPrefix(f, "rcu_nocbs=") {
				keep = append(keep, f)
			}
		}
		iso.Cmdline = strings.Join(keep, " ")
	}
	return iso, nil
}

func readCPUList(path string) ([]int, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("affinity: %w", err)
	}
	return ParseCPUList(string(b))
}

// OSYield gives the calling thread's CPU to another runnable thread on
// it, if any (sched_yield); with none it returns at once. A spinning
// loop calls it when a thread it depends on (the WAL's I/O goroutine)
// needs the core: unlike runtime.Gosched it does not hand a locked
// goroutine's P around.
func OSYield() { unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }

// OSSleep blocks the calling thread for about d (nanosleep; the kernel's
// timer slack, 50 µs by default, is added), leaving its CPU to whatever
// is runnable — the scheduler pulls waiting threads onto a CPU that goes
// idle.
func OSSleep(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	_ = unix.Nanosleep(&ts, nil)
}
