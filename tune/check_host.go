package tune

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

func (h *host) checkRTRuntime() Result {
	path := h.proc("sys/kernel/sched_rt_runtime_us")
	r := Result{ID: "sched.rt_runtime", Reads: path, Want: "-1 when the loops run SCHED_FIFO",
		Why: "RT throttling parks a spinning SCHED_FIFO loop for up to 50 ms every second"}
	v, err := readValue(path)
	if err != nil {
		r.Found, r.Severity = absent(err), Skip
		return r
	}
	r.Found = v
	if !h.cfg.FIFO {
		r.Severity = Info
		return r
	}
	r.Want = "-1"
	if v != "-1" {
		r.Severity = Fail
		r.Fix = "sysctl -w kernel.sched_rt_runtime_us=-1"
		r.Changes = []Change{{Kind: KindFile, Target: path, Value: "-1"}}
	}
	return r
}

func (h *host) checkTimerSlack() Result {
	pid := "self"
	if h.cfg.PID > 0 {
		pid = strconv.Itoa(h.cfg.PID)
	}
	path := h.proc(pid + "/timerslack_ns")
	r := Result{ID: "proc.timerslack", Reads: path, Want: "1 on the loop process",
		Why: "the default 50 us slack rounds every timed sleep and timeout up by as much"}
	v, err := readValue(path)
	if err != nil {
		r.Found, r.Severity = absent(err), Skip
		return r
	}
	r.Found = v
	if h.cfg.PID == 0 {
		// Our own slack says only what a child would inherit.
		r.Severity = Info
		r.Want = "1 on the loop process (pass -pid to check it)"
		return r
	}
	if v != "1" {
		r.Severity = Warn
		r.Fix = fmt.Sprintf("echo 1 > /proc/%d/timerslack_ns (or prctl(PR_SET_TIMERSLACK, 1) in the loop)", h.cfg.PID)
		r.Changes = []Change{{Kind: KindFile, Target: path, Value: "1"}}
	}
	return r
}

func (h *host) checkWALDir() Result {
	r := Result{ID: "wal.dir", Reads: "probe: statfs, O_DIRECT write in " + h.cfg.WALDir,
		Want: "O_DIRECT works, misaligned writes rejected, durable filesystem",
		Why:  "without O_DIRECT every segment write goes through the page cache and writeback stalls"}
	if h.cfg.WALDir == "" {
		r.Found, r.Severity = "not probed (pass -wal-dir)", Skip
		return r
	}
	d, err := h.probe.DirectIO(h.cfg.WALDir)
	if errors.Is(err, ErrNotSupported) {
		r.Found, r.Severity = err.Error(), Skip
		return r
	}
	if err != nil {
		r.Found, r.Severity = err.Error(), Fail
		r.Fix = "mkdir -p " + h.cfg.WALDir + " on a local ext4 or xfs filesystem"
		return r
	}
	f := []string{d.FS}
	if d.Works {
		f = append(f, "O_DIRECT ok")
	} else {
		f = append(f, "O_DIRECT failed: "+d.Err)
	}
	if d.Works {
		if d.RejectsMisaligned {
			f = append(f, "misaligned rejected")
		} else {
			f = append(f, "misaligned accepted")
		}
	}
	if d.MemAlign > 0 {
		f = append(f, fmt.Sprintf("dioalign mem=%d off=%d", d.MemAlign, d.OffsetAlign))
	}
	r.Found = strings.Join(f, ", ")
	switch {
	case d.FS == "tmpfs" || d.FS == "ramfs":
		r.Severity, r.Fix = Warn, "tmpfs loses the WAL at reboot: put -wal-dir on ext4 or xfs"
	case !d.Works:
		r.Severity, r.Fix = Warn, "the WAL falls back to buffered writes + fdatasync: put -wal-dir on ext4 or xfs"
	}
	return r
}

func (h *host) checkClock() Result {
	dir := h.sys("devices/system/clocksource/clocksource0")
	r := Result{ID: "clock.source", Reads: dir + "/current_clocksource", Want: "tsc",
		Why: "time.Now runs in the vDSO only on tsc (and a few paravirt clocks); hpet/acpi_pm make it a ~1 us syscall"}
	cur, err := readValue(filepath.Join(dir, "current_clocksource"))
	if err != nil {
		r.Found, r.Severity = absent(err), Skip
		return r
	}
	r.Found = cur
	if cur == "tsc" {
		return r
	}
	av, _ := readValue(filepath.Join(dir, "available_clocksource"))
	if slices.Contains(strings.Fields(av), "tsc") {
		r.Severity = Warn
		r.Fix = "echo tsc > /sys/devices/system/clocksource/clocksource0/current_clocksource"
		r.Changes = []Change{{Kind: KindFile, Target: filepath.Join(dir, "current_clocksource"), Value: "tsc"}}
		return r
	}
	switch cur {
	case "kvm-clock", "hyperv_clocksource_tsc_page", "arch_sys_counter":
		r.Severity = Info // vDSO-capable
	default:
		r.Severity = Warn
		r.Fix = "boot with tsc=reliable if the TSC is invariant"
		r.Reboot = true
	}
	return r
}
