package benchkit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// perfEventOpen is the one syscall seam of the counters; tests replace it
// to inject ENOENT, EACCES and friends.
var perfEventOpen = unix.PerfEventOpen

type perfSpec struct {
	typ    uint32
	config uint64
}

var perfSpecs = []perfSpec{
	{unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_CPU_CYCLES},
	{unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_INSTRUCTIONS},
	{unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_CACHE_MISSES},
	{unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_BRANCH_MISSES},
	{unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_TASK_CLOCK},
	{unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_CONTEXT_SWITCHES},
	{unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_CPU_MIGRATIONS},
	{unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_PAGE_FAULTS},
}

// Counters is one perf_event_open group counting the calling OS thread
// (pid 0, cpu -1). Open it on the locked, pinned thread that runs the
// measured loop: a counter opened elsewhere counts another thread.
// Events the kernel refuses are n/a, one by one; the group never fails
// because of them.
type Counters struct {
	fd     []int    // per PerfEvents entry; -1 when n/a
	why    []string // per entry, why it is n/a
	leader int
	order  []int // PerfEvents index of each group member, in open order
	buf    []byte
}

// OpenCounters opens the group on the calling thread. It returns an error
// only when no event at all could be opened (then every reading is n/a);
// the returned Counters is usable either way.
func OpenCounters() (*Counters, error) { return OpenCountersFor(0) }

// OpenCountersFor opens the group on thread tid of this process (0: the
// calling thread), for a thread that cannot open its own, such as a loop
// whose code is not the caller's.
func OpenCountersFor(tid int) (*Counters, error) {
	c := &Counters{fd: make([]int, len(perfSpecs)), why: make([]string, len(perfSpecs)), leader: -1}
	for i, s := range perfSpecs {
		c.fd[i] = -1
		fd, err := openPerf(s, tid, c.leader)
		if err != nil {
			c.why[i] = perfWhy(err)
			continue
		}
		if c.leader < 0 {
			c.leader = fd
		}
		c.fd[i] = fd
		c.order = append(c.order, i)
	}
	c.buf = make([]byte, 8*(3+len(c.order)))
	if c.leader < 0 {
		return c, fmt.Errorf("benchkit: perf_event_open: no event available (%s): %w", c.why[0], ErrUnsupported)
	}
	return c, nil
}

func openPerf(s perfSpec, tid, group int) (int, error) {
	attr := unix.PerfEventAttr{
		Type:        s.typ,
		Config:      s.config,
		Size:        uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Read_format: unix.PERF_FORMAT_GROUP | unix.PERF_FORMAT_TOTAL_TIME_ENABLED | unix.PERF_FORMAT_TOTAL_TIME_RUNNING,
	}
	if group < 0 {
		attr.Bits = unix.PerfBitDisabled
	}
	fd, err := perfEventOpen(&attr, tid, -1, group, unix.PERF_FLAG_FD_CLOEXEC)
	if err == unix.EACCES || err == unix.EPERM {
		// perf_event_paranoid >= 2 without CAP_PERFMON: user space only.
		// Software events such as context switches then read 0, which is
		// still better than nothing for cycles and instructions.
		attr.Bits |= unix.PerfBitExcludeKernel | unix.PerfBitExcludeHv
		fd, err = perfEventOpen(&attr, tid, -1, group, unix.PERF_FLAG_FD_CLOEXEC)
	}
	return fd, err
}

// perfWhy names the reason an event is n/a. ENOENT is what a VM without a
// virtual PMU answers for every hardware event (measured on Linux 6.18
// under Firecracker), EOPNOTSUPP/ENODEV what bare metal without the event
// answers.
func perfWhy(err error) string {
	var en unix.Errno
	if errors.As(err, &en) {
		switch en {
		case unix.ENOENT:
			return "ENOENT: event not exposed (VM without PMU?)"
		case unix.EOPNOTSUPP, unix.ENODEV:
			return en.Error() + ": CPU lacks the event"
		case unix.EACCES, unix.EPERM:
			return en.Error() + ": perf_event_paranoid forbids it"
		}
	}
	return err.Error()
}

// Available lists the events that count, in PerfEvents order.
func (c *Counters) Available() []string {
	var out []string
	for _, i := range c.order {
		out = append(out, PerfEvents[i])
	}
	return out
}

// Start resets and enables every counter of the group.
func (c *Counters) Start() error {
	if c.leader < 0 {
		return nil
	}
	if err := unix.IoctlSetInt(c.leader, unix.PERF_EVENT_IOC_RESET, unix.PERF_IOC_FLAG_GROUP); err != nil {
		return fmt.Errorf("benchkit: perf reset: %w", err)
	}
	if err := unix.IoctlSetInt(c.leader, unix.PERF_EVENT_IOC_ENABLE, unix.PERF_IOC_FLAG_GROUP); err != nil {
		return fmt.Errorf("benchkit: perf enable: %w", err)
	}
	return nil
}

// Stop disables the group and returns each counter divided by ops
// (scaled by enabled/running time when the kernel multiplexed them).
func (c *Counters) Stop(ops int64) ([]PerfCount, error) {
	out := make([]PerfCount, len(PerfEvents))
	for i, n := range PerfEvents {
		out[i] = PerfCount{Name: n, Why: c.why[i]}
	}
	if c.leader < 0 {
		return out, nil
	}
	if err := unix.IoctlSetInt(c.leader, unix.PERF_EVENT_IOC_DISABLE, unix.PERF_IOC_FLAG_GROUP); err != nil {
		return out, fmt.Errorf("benchkit: perf disable: %w", err)
	}
	n, err := unix.Read(c.leader, c.buf)
	if err != nil {
		return out, fmt.Errorf("benchkit: perf read: %w", err)
	}
	vals, err := parseGroupRead(c.buf[:n], len(c.order))
	if err != nil {
		return out, err
	}
	for k, i := range c.order {
		out[i].OK = true
		out[i].Why = ""
		out[i].Total = vals[k]
		if ops > 0 {
			out[i].PerOp = float64(vals[k]) / float64(ops)
		}
	}
	return out, nil
}

// parseGroupRead decodes {nr, time_enabled, time_running, value[nr]} as
// read from a group leader with PERF_FORMAT_GROUP|TOTAL_TIME_*, scaling
// for multiplexing.
func parseGroupRead(b []byte, want int) ([]uint64, error) {
	if len(b) < 24 {
		return nil, fmt.Errorf("benchkit: perf read: short read %d bytes", len(b))
	}
	le := binary.NativeEndian
	nr := int(le.Uint64(b))
	enabled, running := le.Uint64(b[8:]), le.Uint64(b[16:])
	if nr != want || len(b) < 24+8*nr {
		return nil, fmt.Errorf("benchkit: perf read: %d values for %d events", nr, want)
	}
	vals := make([]uint64, nr)
	for i := range vals {
		v := le.Uint64(b[24+8*i:])
		if running > 0 && running < enabled {
			v = uint64(float64(v) * float64(enabled) / float64(running))
		}
		vals[i] = v
	}
	return vals, nil
}

// Close releases every counter fd.
func (c *Counters) Close() error {
	for i, fd := range c.fd {
		if fd >= 0 {
			unix.Close(fd)
			c.fd[i] = -1
		}
	}
	c.leader = -1
	c.order = nil
	return nil
}
