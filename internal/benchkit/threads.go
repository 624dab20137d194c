package benchkit

import "sort"

// ThreadCPU is one thread's CPU time over an interval, from the kernel
// (the scheduler's run time of the thread, not wall time).
type ThreadCPU struct {
	TID int
	NS  int64
}

// ThreadDelta returns the CPU time each thread of after ran since
// before (threads born in between count from zero; threads that ended
// are missing from after and so from the result), busiest first.
func ThreadDelta(before, after map[int]int64) []ThreadCPU {
	var out []ThreadCPU
	for tid, ns := range after {
		if d := ns - before[tid]; d > 0 {
			out = append(out, ThreadCPU{TID: tid, NS: d})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NS > out[j].NS || out[i].NS == out[j].NS && out[i].TID < out[j].TID })
	return out
}
