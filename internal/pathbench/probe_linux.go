package pathbench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/walcast/walcast/bpf"
	"github.com/walcast/walcast/internal/benchkit"
)

// probe measures one loop thread between begin and end. It is opened on
// the measuring goroutine once the thread's id is known; begin and end may
// run on any thread (the loop's own, for exact phase boundaries).
type probe struct {
	tid      int
	ctr      *benchkit.Counters
	ctrErr   error
	sys      *bpf.SyscallCounter // nil: n/a
	sysErr   error
	s0, s1   procSample
	sc0, sc1 uint64
	perf     []benchkit.PerfCount
	stopErr  error
}

// procSample is what /proc says about a thread at one moment.
type procSample struct {
	utime, stime uint64 // clock ticks
	vol, invol   uint64 // context switches
	run, wait    uint64 // ns on a CPU, ns runnable but waiting (schedstat)
	err          error
}

func openProbe(tid int, sys *bpf.SyscallCounter) *probe {
	p := &probe{tid: tid, sys: sys}
	p.ctr, p.ctrErr = benchkit.OpenCountersFor(tid)
	if sys != nil {
		p.sysErr = sys.Watch(tid)
	}
	return p
}

func (p *probe) begin() {
	if p.ctr != nil {
		_ = p.ctr.Start()
	}
	if p.sys != nil && p.sysErr == nil {
		p.sc0, p.sysErr = p.sys.Count(p.tid)
	}
	p.s0 = readProc(p.tid)
}

func (p *probe) end(ops int64) {
	if p.ctr != nil {
		p.perf, p.stopErr = p.ctr.Stop(ops)
	}
	if p.sys != nil && p.sysErr == nil {
		p.sc1, p.sysErr = p.sys.Count(p.tid)
	}
	p.s1 = readProc(p.tid)
}

func (p *probe) close() {
	if p.ctr != nil {
		p.ctr.Close()
	}
	if p.sys != nil {
		// Free the thread's slot: every row's loops are new threads, and
		// a full counter made every later row's syscalls n/a.
		_ = p.sys.Unwatch(p.tid)
	}
}

// thread turns the two samples into per-operation figures.
func (p *probe) thread(ops int64) Thread {
	t := Thread{CPUNs: -1, SysPct: -1, Syscalls: -1, CtxSw: -1, Involuntary: -1, RunqNs: -1}
	var why []string
	if ops <= 0 {
		return t
	}
	per := func(v uint64) float64 { return float64(v) / float64(ops) }
	for _, c := range p.perf {
		t.Perf = append(t.Perf, c) // n/a ones too, with the reason
		if !c.OK {
			continue
		}
		switch c.Name {
		case "task-clock":
			t.CPUNs = c.PerOp
		case "context-switches":
			t.CtxSw = c.PerOp
		}
	}
	if p.ctrErr != nil || p.stopErr != nil {
		why = append(why, fmt.Sprintf("perf: %v %v", p.ctrErr, p.stopErr))
	}
	switch {
	case p.sys == nil:
		why = append(why, "syscalls: no BPF counter")
	case p.sysErr != nil:
		why = append(why, "syscalls: "+p.sysErr.Error())
	default:
		t.Syscalls = per(p.sc1 - p.sc0)
	}
	a, b := p.s0, p.s1
	if a.err != nil || b.err != nil {
		why = append(why, fmt.Sprintf("/proc: %v %v", a.err, b.err))
	} else {
		if ticks := (b.utime - a.utime) + (b.stime - a.stime); ticks > 0 {
			t.SysPct = 100 * float64(b.stime-a.stime) / float64(ticks)
		}
		t.Involuntary = per(b.invol - a.invol)
		t.RunqNs = per(b.wait - a.wait)
		if t.CPUNs < 0 {
			t.CPUNs = per(b.run - a.run)
		}
		if t.CtxSw < 0 {
			t.CtxSw = per(b.vol - a.vol + b.invol - a.invol)
		}
	}
	t.Why = strings.Join(why, "; ")
	return t
}

// readProc samples /proc/self/task/TID/{stat,status,schedstat}.
func readProc(tid int) procSample {
	var s procSample
	dir := "/proc/self/task/" + strconv.Itoa(tid) + "/"
	b, err := os.ReadFile(dir + "stat")
	if err != nil {
		s.err = err
		return s
	}
	// Fields after the command name, which is in parentheses and may hold
	// spaces: state is field 3, utime 14, stime 15.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 {
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 12 {
			s.utime, _ = strconv.ParseUint(f[11], 10, 64)
			s.stime, _ = strconv.ParseUint(f[12], 10, 64)
		}
	}
	if b, err = os.ReadFile(dir + "status"); err != nil {
		s.err = err
		return s
	}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		switch k {
		case "voluntary_ctxt_switches":
			s.vol = n
		case "nonvoluntary_ctxt_switches":
			s.invol = n
		}
	}
	if b, err = os.ReadFile(dir + "schedstat"); err != nil {
		s.err = err
		return s
	}
	if f := strings.Fields(string(b)); len(f) >= 2 {
		s.run, _ = strconv.ParseUint(f[0], 10, 64)
		s.wait, _ = strconv.ParseUint(f[1], 10, 64)
	}
	return s
}
