package tune

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
)

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
