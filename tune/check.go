package tune

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
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
