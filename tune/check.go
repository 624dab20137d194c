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

// host is one run's view of the machine: roots, resolved CPUs and NIC.
type host struct {
	cfg      *Config
	probe    Prober
	cpus     []int  // loop CPUs
	cpusFrom string // "-cpus", "isolated", or ""
	online   []int
	iface    string
	features map[string]bool
	featErr  error
}

// Run performs every check in a fixed order and returns one [Result] per
// check. It changes nothing on the host. An error means cfg is invalid;
// unreadable files are results, not errors.
func Run(cfg Config) ([]Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	h := &host{cfg: &cfg, probe: cfg.Probe}
	if h.probe == nil {
		h.probe = NewProber()
	}
	h.online, _ = readCPUList(h.sys("devices/system/cpu/online"))
	switch {
	case len(cfg.CPUs) > 0:
		h.cpus, h.cpusFrom = slices.Clone(cfg.CPUs), "-cpus"
	default:
		if iso, err := readCPUList(h.sys("devices/system/cpu/isolated")); err == nil && len(iso) > 0 {
			h.cpus, h.cpusFrom = iso, "isolated"
		}
	}
	h.iface = cfg.Iface
	if h.iface == "" {
		h.iface = defaultRouteIface(h.proc("net/route"))
	}
	if h.iface != "" {
		h.features, h.featErr = h.probe.Features(h.iface)
	}
	checks := []func() Result{
		h.checkOnline,
		func() Result {
			return h.checkCmdline("isolcpus", "cmdline.isolcpus", "the scheduler keeps other tasks off the loop CPUs only if they are isolated")
		},
		func() Result {
			return h.checkCmdline("nohz_full", "cmdline.nohz_full", "without nohz_full a spinning loop still takes a timer tick (up to 1000/s)")
		},
		func() Result {
			return h.checkCmdline("rcu_nocbs", "cmdline.rcu_nocbs", "RCU callbacks otherwise run on the loop CPUs in softirq")
		},
		h.checkIsolated,
		h.checkNohzFull,
		h.checkIRQAffinity,
		h.checkIRQBalance,
		h.checkGovernor,
		h.checkIdle,
		h.checkTHP,
		h.checkTHPDefrag,
		h.checkSwap,
		func() Result {
			return h.sysctlMin("net.rmem_max", "net.core.rmem_max", cfg.SockBuf, "caps SO_RCVBUF: a small cap drops bursts before the loop drains them")
		},
		func() Result {
			return h.sysctlMin("net.wmem_max", "net.core.wmem_max", cfg.SockBuf, "caps SO_SNDBUF: a small cap turns send bursts into ENOBUFS/EAGAIN")
		},
		func() Result {
			return h.sysctlMin("net.rmem_default", "net.core.rmem_default", cfg.SockBuf, "what UDP sockets that never set SO_RCVBUF (peers, tools) get")
		},
		func() Result {
			return h.sysctlMin("net.busy_read", "net.core.busy_read", cfg.BusyPoll, "default SO_BUSY_POLL: recv polls the NIC queue instead of waiting for the IRQ")
		},
		func() Result {
			return h.sysctlMin("net.busy_poll", "net.core.busy_poll", cfg.BusyPoll, "busy polling for poll/epoll users (the netpoller path)")
		},
		h.checkSockBuf,
		func() Result {
			return h.sysctlEq("net.udp_early_demux", "net.ipv4.udp_early_demux", "1",
				"early demux finds a connected UDP socket before the route lookup (per network namespace)")
		},
		func() Result {
			return h.checkFeature("nic.gro", "rx-gro", true, "GRO on veth switches the receive side to NAPI, which busy polling needs")
		},
		func() Result {
			return h.checkFeature("nic.gso", "tx-generic-segmentation", true, "UDP GSO sends of the mmsg datapath fall back to per-datagram sends without it")
		},
		h.checkUDPGROFwd,
		h.checkNapi,
		h.checkNapiID,
		h.checkCoalesce,
		h.checkRTRuntime,
		h.checkTimerSlack,
		h.checkWALDir,
		h.checkClock,
	}
	out := make([]Result, 0, len(checks))
	for _, c := range checks {
		out = append(out, c())
	}
	return out, nil
}

func (h *host) proc(rel string) string { return filepath.Join(h.cfg.Proc, rel) }
func (h *host) sys(rel string) string  { return filepath.Join(h.cfg.Sys, rel) }

// readValue returns a file's content without surrounding white space.
func readValue(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

func readCPUList(path string) ([]int, error) {
	v, err := readValue(path)
	if err != nil {
		return nil, err
	}
	return ParseCPUList(v)
}

// absent describes a read error for the Found column.
func absent(err error) string {
	if errors.Is(err, fs.ErrNotExist) {
		return "absent"
	}
	return "unreadable: " + err.Error()
}

// defaultRouteIface returns the interface of the IPv4 default route in
// /proc/net/route, or "".
func defaultRouteIface(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) >= 8 && fs[1] == "00000000" && fs[7] == "00000000" {
			return fs[0]
		}
	}
	return ""
}

func (h *host) cpusWant() string {
	if len(h.cpus) == 0 {
		return "contains the loop CPUs (none given: pass -cpus)"
	}
	return "contains " + FormatCPUList(h.cpus)
}

// housekeeping returns the online CPUs that are not loop CPUs.
func (h *host) housekeeping() []int {
	_, hk := cpusOf(h.online, h.cpus)
	return hk
}

func (h *host) rebootFix() string {
	c := FormatCPUList(h.cpus)
	if c == "" {
		c = "CPUS"
	}
	return fmt.Sprintf(`add "isolcpus=domain,managed_irq,%s nohz_full=%s rcu_nocbs=%s" to GRUB_CMDLINE_LINUX in /etc/default/grub, run update-grub, reboot`, c, c, c)
}

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

func (h *host) checkChoice(id, rel string, ok []string, set, why string) Result {
	path := h.sys(rel)
	r := Result{ID: id, Reads: path, Want: strings.Join(ok, "|"), Why: why}
	v, err := readValue(path)
	if err != nil {
		r.Found, r.Severity = absent(err), Skip
		return r
	}
	r.Found = bracketed(v)
	if !slices.Contains(ok, r.Found) {
		r.Severity = Warn
		r.Fix = fmt.Sprintf("echo %s > /sys/%s", set, rel)
		r.Changes = []Change{{Kind: KindFile, Target: path, Value: set}}
	}
	return r
}

func (h *host) checkTHP() Result {
	return h.checkChoice("mm.thp", "kernel/mm/transparent_hugepage/enabled", []string{"madvise", "never"}, "madvise",
		"THP=always lets khugepaged and page faults compact memory under the loop (ms stalls)")
}

func (h *host) checkTHPDefrag() Result {
	return h.checkChoice("mm.thp_defrag", "kernel/mm/transparent_hugepage/defrag", []string{"madvise", "defer", "defer+madvise", "never"}, "madvise",
		"defrag=always makes a page fault wait for direct compaction")
}

func (h *host) checkSwap() Result {
	path := h.proc("swaps")
	r := Result{ID: "mm.swap", Reads: path, Want: "no swap (or mlockall)", Why: "a swapped-out page of the ring costs a disk read on the hot path"}
	v, err := readValue(path)
	if err != nil {
		r.Found, r.Severity = absent(err), Skip
		return r
	}
	lines := strings.Split(v, "\n")
	var devs []string
	for _, l := range lines[1:] {
		if f := strings.Fields(l); len(f) >= 3 {
			devs = append(devs, f[0]+"("+f[2]+"KiB)")
		}
	}
	if len(devs) == 0 {
		r.Found = "none"
		return r
	}
	r.Found = strings.Join(devs, " ")
	r.Severity = Warn
	r.Fix = "swapoff -a and remove swap from /etc/fstab (or make sure the process calls mlockall)"
	return r
}

func (h *host) sysctlMin(id, name string, want int, why string) Result {
	path := h.proc("sys/" + strings.ReplaceAll(name, ".", "/"))
	r := Result{ID: id, Reads: path, Want: fmt.Sprintf(">= %d", want), Why: why}
	v, err := readValue(path)
	if errors.Is(err, fs.ErrNotExist) && strings.HasPrefix(name, "net.") {
		r.Found, r.Severity = "absent (global sysctl: not visible in this network namespace)", Skip
		return r
	}
	if err != nil {
		r.Found, r.Severity = absent(err), Skip
		return r
	}
	r.Found = v
	n, err := strconv.Atoi(v)
	if err == nil && n >= want {
		return r
	}
	r.Severity = Warn
	h.sysctlFix(&r, path, name, strconv.Itoa(want))
	return r
}

// sysctlFix sets r's fix and change for a sysctl, unless the file is
// read-only here: since 6.x net.core.{r,w}mem_{max,default} are visible in
// a child network namespace but read-only (mode 0444), mirroring the
// host's value, so only the initial namespace can change them.
func (h *host) sysctlFix(r *Result, path, name, want string) {
	r.Fix = fmt.Sprintf("sysctl -w %s=%s", name, want)
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o222 == 0 {
		r.Fix += " on the host (read-only in this network namespace)"
		return
	}
	r.Changes = []Change{{Kind: KindFile, Target: path, Value: want}}
}

// sysctlEq checks a sysctl that should hold exactly want.
func (h *host) sysctlEq(id, name, want, why string) Result {
	path := h.proc("sys/" + strings.ReplaceAll(name, ".", "/"))
	r := Result{ID: id, Reads: path, Want: want, Why: why}
	v, err := readValue(path)
	if err != nil {
		r.Found, r.Severity = absent(err), Skip
		return r
	}
	r.Found = v
	if v != want {
		r.Severity = Warn
		h.sysctlFix(&r, path, name, want)
	}
	return r
}

func (h *host) checkSockBuf() Result {
	r := Result{ID: "net.sockbuf", Reads: "probe: UDP socket, SO_RCVBUF/SO_SNDBUF read back",
		Want: fmt.Sprintf("rcv>=%d snd>=%d", h.cfg.SockBuf, h.cfg.SockBuf),
		Why:  "the buffer the kernel really grants is what absorbs a burst while the loop is busy"}
	rcv, snd, err := h.probe.SocketBuffer(h.cfg.SockBuf)
	if err != nil {
		r.Found, r.Severity = err.Error(), Skip
		return r
	}
	r.Found = fmt.Sprintf("rcv=%d snd=%d", rcv, snd)
	if rcv < h.cfg.SockBuf || snd < h.cfg.SockBuf {
		r.Severity = Warn
		r.Fix = fmt.Sprintf("sysctl -w net.core.rmem_max=%d net.core.wmem_max=%d (or run with CAP_NET_ADMIN: SO_RCVBUFFORCE)", h.cfg.SockBuf, h.cfg.SockBuf)
	}
	return r
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func (h *host) nicSkip(r Result) (Result, bool) {
	if h.iface == "" {
		r.Found, r.Severity = "no interface (no default route; pass -iface)", Skip
		return r, true
	}
	if h.featErr != nil {
		r.Found, r.Severity = h.iface+": "+h.featErr.Error(), Skip
		return r, true
	}
	return r, false
}

func (h *host) checkFeature(id, feature string, want bool, why string) Result {
	r := Result{ID: id, Reads: "ethtool -k " + h.iface + " " + feature, Want: onOff(want), Why: why}
	if r, skip := h.nicSkip(r); skip {
		return r
	}
	on, ok := h.features[feature]
	if !ok {
		r.Found, r.Severity = h.iface+": no feature "+feature, Skip
		return r
	}
	r.Found = h.iface + ": " + onOff(on)
	if on != want {
		r.Severity = Warn
		r.Fix = fmt.Sprintf("ethtool -K %s %s %s", h.iface, feature, onOff(want))
		r.Changes = []Change{{Kind: KindFeature, Target: h.iface, Name: feature, Value: onOff(want)}}
	}
	return r
}

func (h *host) checkUDPGROFwd() Result {
	r := h.checkFeature("nic.udp_gro_fwd", "rx-udp-gro-forwarding", true,
		"on veth, GRO with rx-udp-gro-forwarding receives UDP through NAPI, so SO_BUSY_POLL has a queue to poll")
	if r.Severity != Warn {
		return r
	}
	if drv, err := h.probe.Driver(h.iface); err == nil && drv != "veth" {
		// On a real NIC the flag only affects forwarded traffic.
		r.Severity, r.Fix, r.Changes = Info, "", nil
		r.Want = "on for veth; any for " + drv
	}
	return r
}

func (h *host) checkNapi() Result {
	dir := h.sys("class/net/" + h.iface)
	r := Result{ID: "nic.napi", Reads: dir + "/{threaded,napi_defer_hard_irqs,gro_flush_timeout}",
		Want: "with SO_PREFER_BUSY_POLL: napi_defer_hard_irqs>=2 gro_flush_timeout>=200000",
		Why:  "deferred hard IRQs let the busy-polling loop, not softirq, drain the queue", Severity: Info}
	if h.iface == "" {
		r.Found, r.Severity = "no interface (pass -iface)", Skip
		return r
	}
	var f []string
	for _, n := range []string{"threaded", "napi_defer_hard_irqs", "gro_flush_timeout"} {
		v, err := readValue(filepath.Join(dir, n))
		if err != nil {
			v = absent(err)
		}
		f = append(f, n+"="+v)
	}
	r.Found = h.iface + ": " + strings.Join(f, " ")
	return r
}

func (h *host) checkNapiID() Result {
	r := Result{ID: "nic.napi_id", Reads: "probe: SO_INCOMING_NAPI_ID of a datagram received on " + h.cfg.NapiListen,
		Want: "> 0 (received through NAPI)", Why: "busy polling is a no-op on a socket whose packets carry no NAPI id (loopback, backlog veth)"}
	if h.cfg.NapiListen == "" {
		r.Found, r.Severity = "not probed (pass -napi-listen ADDR:PORT and send it a datagram)", Skip
		return r
	}
	id, err := h.probe.NapiID(h.cfg.NapiListen, h.cfg.NapiWait)
	if err != nil {
		r.Found, r.Severity = err.Error(), Skip
		return r
	}
	r.Found = strconv.FormatUint(uint64(id), 10)
	if id == 0 {
		r.Severity = Warn
		r.Fix = "veth: ethtool -K DEV gro on rx-udp-gro-forwarding on (or attach XDP); loopback has no NAPI"
	}
	return r
}

func (h *host) checkCoalesce() Result {
	r := Result{ID: "nic.coalesce", Reads: "ethtool -c " + h.iface, Want: "adaptive-rx=0 rx-usecs=0",
		Why: "interrupt coalescing holds received packets back for rx-usecs before anyone sees them"}
	if h.iface == "" {
		r.Found, r.Severity = "no interface (pass -iface)", Skip
		return r
	}
	c, err := h.probe.Coalesce(h.iface)
	if err != nil {
		r.Found, r.Severity = h.iface+": "+err.Error(), Skip
		return r
	}
	var f, fix []string
	for _, n := range []string{"adaptive-rx", "rx-usecs", "rx-frames"} {
		v, ok := c[n]
		if !ok {
			continue
		}
		f = append(f, fmt.Sprintf("%s=%d", n, v))
		if n != "rx-frames" && v != 0 {
			r.Changes = append(r.Changes, Change{Kind: KindCoalesce, Target: h.iface, Name: n, Value: "0"})
			val := "0"
			if n == "adaptive-rx" {
				val = "off"
			}
			fix = append(fix, n+" "+val)
		}
	}
	r.Found = h.iface + ": " + strings.Join(f, " ")
	if len(fix) > 0 {
		r.Severity = Warn
		r.Fix = "ethtool -C " + h.iface + " " + strings.Join(fix, " ")
	}
	return r
}

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
