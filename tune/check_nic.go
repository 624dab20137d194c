package tune

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

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
