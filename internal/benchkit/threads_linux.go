package benchkit

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ThreadTimes returns the CPU time in ns of every thread of this
// process: the first field of /proc/self/task/TID/schedstat, the
// scheduler's sum of the thread's run time (the clock
// CLOCK_THREAD_CPUTIME_ID reads). Softirq work the kernel runs in a
// thread's context counts as the thread's here (this kernel has no
// IRQ_TIME_ACCOUNTING); work deferred to ksoftirqd does not.
func ThreadTimes() (map[int]int64, error) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, err
	}
	m := make(map[int]int64, len(ents))
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ns, err := threadTime("/proc/self/task/" + e.Name() + "/schedstat"); err == nil {
			m[tid] = ns
		}
	}
	return m, nil
}

func threadTime(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	f, _, _ := strings.Cut(string(b), " ")
	return strconv.ParseInt(strings.TrimSpace(f), 10, 64)
}

// Gettid is the calling thread's id (0 where there is none).
func Gettid() int { return unix.Gettid() }

// ThreadTime is the CPU time in ns of thread tid of this process (-1
// when it is gone), read from the thread's CPU clock: exact even while
// the thread runs, where /proc's schedstat of a running thread lags by
// up to a scheduler tick.
func ThreadTime(tid int) int64 {
	// MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED): ^tid << 3, the
	// per-thread bit (4) and the scheduler clock (2).
	var ts unix.Timespec
	if unix.ClockGettime(int32(^tid<<3|6), &ts) != nil {
		return -1
	}
	return ts.Nano()
}

// SelfThreadTime is the calling thread's CPU time in ns
// (CLOCK_THREAD_CPUTIME_ID).
func SelfThreadTime() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return -1
	}
	return ts.Nano()
}
