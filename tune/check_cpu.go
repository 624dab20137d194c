package tune

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

func (h *host) checkOnline() Result {
	path := h.sys("devices/system/cpu/online")
	r := Result{ID: "cpu.online", Reads: path, Want: "loop CPUs online", Why: "a loop pinned to an offline or missing CPU fails to start"}
	v, err := readValue(path)
	if err != nil {
		r.Found, r.Severity = absent(err), Skip
		return r
	}
	r.Found = v
	if len(h.cpus) == 0 {
		r.Severity = Info
		r.Want = "loop CPUs online (none given: pass -cpus)"
		return r
	}
	r.Want = FormatCPUList(h.cpus) + " online"
	if _, off := cpusOf(h.cpus, h.online); len(off) > 0 {
		r.Severity = Fail
		r.Fix = fmt.Sprintf("pin to online CPUs, or: echo 1 > /sys/devices/system/cpu/cpuN/online for %s", FormatCPUList(off))
		return r
	}
	if len(h.housekeeping()) == 0 {
		r.Severity = Warn
		r.Fix = "leave at least one CPU for the kernel, IRQs and the Go runtime"
	}
	return r
}

func (h *host) checkCmdline(param, id, why string) Result {
	path := h.proc("cmdline")
	r := Result{ID: id, Reads: path + " " + param + "=", Want: h.cpusWant(), Why: why, Reboot: true}
	line, err := readValue(path)
	if err != nil {
		r.Found, r.Severity, r.Reboot = absent(err), Skip, false
		return r
	}
	v, ok := cmdlineParam(line, param)
	var cpus []int
	switch {
	case !ok:
		r.Found = "absent"
	case strings.HasSuffix(v, "all"):
		// cpulist_parse accepts "all" (nohz_full=all, rcu_nocbs=all).
		r.Found, cpus = v, h.online
	case param == "isolcpus":
		r.Found = v
		_, cpus, err = isolcpusList(v)
	default:
		r.Found = v
		cpus, err = ParseCPUList(v)
	}
	if err != nil {
		r.Severity, r.Fix = Warn, "fix the kernel command line: "+err.Error()
		return r
	}
	if len(h.cpus) == 0 {
		r.Severity, r.Reboot = Info, false
		return r
	}
	if _, missing := cpusOf(h.cpus, cpus); len(missing) > 0 {
		r.Severity, r.Fix = Warn, h.rebootFix()
		return r
	}
	r.Reboot = false
	return r
}

// checkSysList compares a CPU list in sysfs (what the running kernel
// applied) with the loop CPUs.
func (h *host) checkSysList(id, rel, why, missing string) Result {
	path := h.sys(rel)
	r := Result{ID: id, Reads: path, Want: h.cpusWant(), Why: why}
	cpus, err := readCPUList(path)
	if errors.Is(err, fs.ErrNotExist) {
		r.Found, r.Severity = "absent ("+missing+")", Skip
		return r
	}
	if err != nil {
		r.Found, r.Severity = absent(err), Skip
		return r
	}
	r.Found = FormatCPUList(cpus)
	if r.Found == "" {
		r.Found = "none"
	}
	if len(h.cpus) == 0 {
		r.Severity = Info
		return r
	}
	if _, miss := cpusOf(h.cpus, cpus); len(miss) > 0 {
		r.Severity, r.Fix, r.Reboot = Warn, h.rebootFix(), true
	}
	return r
}

func (h *host) checkIsolated() Result {
	return h.checkSysList("cpu.isolated", "devices/system/cpu/isolated",
		"what the running kernel isolated (the command line may differ from what took effect)", "none")
}

func (h *host) checkNohzFull() Result {
	return h.checkSysList("cpu.nohz_full", "devices/system/cpu/nohz_full",
		"ticks stop on a CPU running one task only if the kernel runs it nohz_full", "kernel built without CONFIG_NO_HZ_FULL")
}

// nicIRQs returns the IRQ numbers of iface: the MSI vectors of its device
// (or the device's parent, as for virtio) and /proc/interrupts lines that
// name the interface.
func (h *host) nicIRQs() []int {
	var irqs []int
	dev := h.sys("class/net/" + h.iface + "/device")
	dirs := []string{filepath.Join(dev, "msi_irqs")}
	if real, err := filepath.EvalSymlinks(dev); err == nil {
		dirs = append(dirs, filepath.Join(filepath.Dir(real), "msi_irqs"))
	}
	for _, d := range dirs {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if n, err := strconv.Atoi(e.Name()); err == nil {
				irqs = append(irqs, n)
			}
		}
	}
	if f, err := os.Open(h.proc("interrupts")); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := sc.Text()
			num, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
			n, err := strconv.Atoi(num)
			if !ok || err != nil {
				continue
			}
			for _, f := range strings.Fields(rest) {
				if f == h.iface || strings.HasPrefix(f, h.iface+"-") {
					irqs = append(irqs, n)
				}
			}
		}
		f.Close()
	}
	slices.Sort(irqs)
	return slices.Compact(irqs)
}

func (h *host) checkIRQAffinity() Result {
	r := Result{ID: "irq.affinity", Reads: h.proc("irq/N/smp_affinity_list"),
		Why: "a NIC interrupt on a loop CPU preempts the loop for the whole softirq"}
	if h.iface == "" {
		r.Found, r.Want, r.Severity = "no interface (no default route; pass -iface)", "-", Skip
		return r
	}
	irqs := h.nicIRQs()
	if len(irqs) == 0 {
		r.Found, r.Want, r.Severity = h.iface+": no IRQs (virtual interface)", "-", Skip
		return r
	}
	hk := h.housekeeping()
	r.Want = "off the loop CPUs"
	if len(h.cpus) > 0 {
		r.Want = "on " + FormatCPUList(hk)
	}
	var found []string
	bad := false
	for _, irq := range irqs {
		path := h.proc(fmt.Sprintf("irq/%d/smp_affinity_list", irq))
		cpus, err := readCPUList(path)
		if err != nil {
			found = append(found, fmt.Sprintf("%d:%s", irq, absent(err)))
			continue
		}
		eff := ""
		if e, err := readCPUList(h.proc(fmt.Sprintf("irq/%d/effective_affinity_list", irq))); err == nil {
			eff = "(eff " + FormatCPUList(e) + ")"
			if hit, _ := cpusOf(e, h.cpus); len(hit) > 0 {
				bad = true
			}
		}
		found = append(found, fmt.Sprintf("%d:%s%s", irq, FormatCPUList(cpus), eff))
		if hit, _ := cpusOf(cpus, h.cpus); len(hit) > 0 && len(hk) > 0 {
			bad = true
			r.Changes = append(r.Changes, Change{Kind: KindFile, Target: path, Value: FormatCPUList(hk)})
		}
	}
	r.Found = h.iface + " " + strings.Join(found, " ")
	switch {
	case len(h.cpus) == 0:
		r.Severity = Info
	case len(hk) == 0:
		r.Severity, r.Fix = Warn, "no housekeeping CPU left for IRQs; pin fewer loops"
	case bad && len(r.Changes) == 0:
		// The mask is right but the kernel still delivers there: a managed
		// IRQ, whose affinity user space cannot change.
		r.Severity = Warn
		r.Fix = "managed IRQs follow isolcpus=managed_irq,CPUS on the kernel command line"
		r.Reboot = true
	case bad:
		r.Severity = Warn
		r.Fix = fmt.Sprintf("for i in %s; do echo %s > /proc/irq/$i/smp_affinity_list; done", intsJoin(irqs), FormatCPUList(hk))
	}
	return r
}

func intsJoin(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, " ")
}

func (h *host) checkIRQBalance() Result {
	r := Result{ID: "irq.balance", Reads: h.proc("*/comm"), Want: "not running, or banned from the loop CPUs",
		Why: "irqbalance moves NIC interrupts back onto the loop CPUs every 10 s"}
	running := false
	ents, _ := os.ReadDir(h.cfg.Proc)
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		if v, err := readValue(h.proc(e.Name() + "/comm")); err == nil && v == "irqbalance" {
			running = true
			break
		}
	}
	r.Found = "not running"
	if running {
		r.Found = "running"
		if len(h.cpus) > 0 {
			r.Severity = Warn
			r.Fix = fmt.Sprintf("echo IRQBALANCE_BANNED_CPULIST=%s >> /etc/default/irqbalance && systemctl restart irqbalance", FormatCPUList(h.cpus))
		} else {
			r.Severity = Info
		}
	}
	return r
}

// checkCPUs are the CPUs per-CPU checks look at: the loop CPUs, else all online.
func (h *host) checkCPUs() []int {
	if len(h.cpus) > 0 {
		return h.cpus
	}
	return h.online
}

func (h *host) checkGovernor() Result {
	r := Result{ID: "cpu.governor", Reads: h.sys("devices/system/cpu/cpuN/cpufreq/scaling_governor"), Want: "performance",
		Why: "ondemand/powersave clock the CPU down between bursts; the first packets after idle run slow"}
	var found []string
	seen := false
	for _, c := range h.checkCPUs() {
		dir := h.sys(fmt.Sprintf("devices/system/cpu/cpu%d/cpufreq", c))
		g, err := readValue(filepath.Join(dir, "scaling_governor"))
		if err != nil {
			continue
		}
		seen = true
		found = append(found, fmt.Sprintf("cpu%d:%s", c, g))
		if g != "performance" {
			r.Severity = Warn
			if av, _ := readValue(filepath.Join(dir, "scaling_available_governors")); slices.Contains(strings.Fields(av), "performance") {
				r.Changes = append(r.Changes, Change{Kind: KindFile, Target: filepath.Join(dir, "scaling_governor"), Value: "performance"})
			}
		}
	}
	if !seen {
		r.Found, r.Severity = "absent (no cpufreq: VM or no driver)", Skip
		return r
	}
	r.Found = strings.Join(found, " ")
	if r.Severity == Warn {
		r.Fix = "for c in " + intsJoin(h.checkCPUs()) + "; do echo performance > /sys/devices/system/cpu/cpu$c/cpufreq/scaling_governor; done"
	}
	return r
}

func (h *host) checkIdle() Result {
	r := Result{ID: "cpu.idle", Reads: h.sys("devices/system/cpu/cpuN/cpuidle/stateK/{name,latency,disable}"),
		Want: fmt.Sprintf("states with exit latency > %d us disabled", h.cfg.MaxIdleLatency),
		Why:  "waking from a deep C-state adds its exit latency to the first packet after a pause"}
	var found, fix []string
	seen := false
	for _, c := range h.checkCPUs() {
		states, _ := filepath.Glob(h.sys(fmt.Sprintf("devices/system/cpu/cpu%d/cpuidle/state[0-9]*", c)))
		sort.Strings(states)
		for _, st := range states {
			name, err1 := readValue(filepath.Join(st, "name"))
			lat, err2 := readValue(filepath.Join(st, "latency"))
			dis, err3 := readValue(filepath.Join(st, "disable"))
			if err1 != nil || err2 != nil || err3 != nil {
				continue
			}
			seen = true
			l, _ := strconv.Atoi(lat)
			if l <= h.cfg.MaxIdleLatency || dis != "0" {
				continue
			}
			found = append(found, fmt.Sprintf("cpu%d:%s(%dus)", c, name, l))
			r.Changes = append(r.Changes, Change{Kind: KindFile, Target: filepath.Join(st, "disable"), Value: "1"})
			fix = append(fix, fmt.Sprintf("echo 1 > /sys/devices/system/cpu/cpu%d/cpuidle/%s/disable", c, filepath.Base(st)))
		}
	}
	if !seen {
		drv, err := readValue(h.sys("devices/system/cpu/cpuidle/current_driver"))
		if err != nil {
			drv = absent(err)
		}
		r.Found, r.Severity = "no idle states exposed (driver "+drv+")", Skip
		return r
	}
	if len(found) == 0 {
		r.Found = "no deep state enabled"
		return r
	}
	r.Found = strings.Join(found, " ") + " enabled"
	r.Severity, r.Fix = Warn, strings.Join(fix, "; ")
	return r
}

// bracketed returns the [selected] word of a sysfs choice file.
func bracketed(v string) string {
	if i := strings.IndexByte(v, '['); i >= 0 {
		if j := strings.IndexByte(v[i:], ']'); j > 0 {
			return v[i+1 : i+j]
		}
	}
	return v
}
