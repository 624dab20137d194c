package benchkit

import (
	"fmt"

	"github.com/walcast/walcast/internal/feature"
)

// ErrUnsupported is wrapped by every probe and counter that the kernel,
// the CPU or the VM does not offer. Callers print the reason and go on;
// a missing feature is never a benchmark failure.
var ErrUnsupported = feature.ErrNotSupported

// PerfEvents are the counters a [Counters] group tries to open, hardware
// first. On a VM that hides the PMU (this project's 2 vCPU test machine:
// every hardware event gives ENOENT) the hardware ones read "n/a" and
// the software ones still count.
var PerfEvents = []string{
	"cycles", "instructions", "cache-misses", "branch-misses",
	"task-clock", "context-switches", "cpu-migrations", "page-faults",
}

// PerfCount is one counter of a reading, divided by the operations the
// caller measured. task-clock is in ns; the others are event counts.
type PerfCount struct {
	Name  string  `json:"name"`
	OK    bool    `json:"ok"`
	PerOp float64 `json:"per_op,omitempty"`
	Total uint64  `json:"total,omitempty"`
	Why   string  `json:"why,omitempty"` // why it is n/a
}

// String is "name=value/op" or "name=n/a".
func (c PerfCount) String() string {
	if !c.OK {
		return c.Name + "=n/a"
	}
	return fmt.Sprintf("%s=%.3g/op", c.Name, c.PerOp)
}
