package tune

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walcast/walcast/internal/netns"
)

// execValue runs a command in h's namespace and returns its trimmed output.
func execValue(t *testing.T, h netns.Host, name string, args ...string) string {
	t.Helper()
	out, err := h.Exec(name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// ethtoolK returns "on"/"off" for one feature as ethtool(8) prints it.
func ethtoolK(t *testing.T, h netns.Host, label string) string {
	t.Helper()
	for line := range strings.SplitSeq(execValue(t, h, "ethtool", "-k", h.Link), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), label+": "); ok {
			return strings.Fields(v)[0]
		}
	}
	t.Fatalf("ethtool -k %s: no %q", h.Link, label)
	return ""
}

// napiID sends datagrams from a to b until b's socket receives one and
// returns its SO_INCOMING_NAPI_ID (via the real prober).
func napiID(t *testing.T, p *netns.Pair, port int) uint32 {
	t.Helper()
	var snd *net.UDPConn
	if err := p.A.Do(func() (err error) {
		snd, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: p.B.Addr.AsSlice(), Port: port})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer snd.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				snd.Write([]byte("napi?")) // ECONNREFUSED until B listens
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	var id uint32
	err := p.B.Do(func() (err error) {
		id, err = NewProber().NapiID(net.JoinHostPort(p.B.Addr.String(), strconv.Itoa(port)), 5*time.Second)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestApplyUndoNetns applies a per-namespace sysctl (net.ipv4.udp_early_demux;
// on 6.18 net.core.*mem_* are per namespace but read-only there, and
// busy_read/busy_poll exist only in the initial namespace) and the
// veth ethtool features inside a throwaway namespace, checks with sysctl(8)
// and ethtool(8) that they changed, that the host's own values did not, and
// that undo brings everything back. It also checks the reason behind
// nic.gro: a veth receives through NAPI (non-zero NAPI id) only with GRO on.
func TestApplyUndoNetns(t *testing.T) {
	cfg := netns.DefaultConfig()
	cfg.GRO = false
	p := netns.New(t, cfg)
	h := p.B
	hostDemux, err := readValue("/proc/sys/net/ipv4/udp_early_demux")
	if err != nil {
		t.Fatal(err)
	}
	// Start from a bad value so apply has something to change.
	execValue(t, h, "sysctl", "-w", "net.ipv4.udp_early_demux=0")
	type state struct{ demux, rmem, gro, fwd string }
	read := func() state {
		return state{
			demux: execValue(t, h, "sysctl", "-n", "net.ipv4.udp_early_demux"),
			rmem:  execValue(t, h, "sysctl", "-n", "net.core.rmem_max"),
			gro:   ethtoolK(t, h, "generic-receive-offload"),
			fwd:   ethtoolK(t, h, "rx-udp-gro-forwarding"),
		}
	}
	before := read()
	if before.gro != "off" || before.fwd != "off" {
		t.Fatalf("veth starts with gro %s, rx-udp-gro-forwarding %s; want off", before.gro, before.fwd)
	}
	if id := napiID(t, p, 9101); id != 0 {
		t.Errorf("veth without GRO: NAPI id %d, want 0 (backlog path)", id)
	}

	want := 32 << 20 // above any default, so net.rmem_max is a warning
	ids := map[string]bool{"net.rmem_max": true, "net.udp_early_demux": true,
		"net.busy_read": true, "nic.gro": true, "nic.udp_gro_fwd": true, "nic.coalesce": true}
	var results []Result
	var undo bytes.Buffer
	var done []Change
	err = h.Do(func() error {
		c := DefaultConfig()
		c.Iface, c.SockBuf = h.Link, want
		rs, err := Run(c)
		if err != nil {
			return err
		}
		for _, r := range rs {
			if ids[r.ID] {
				results = append(results, r)
			}
		}
		done, err = Apply(results, NewProber(), &undo)
		return err
	})
	if err != nil {
		t.Fatalf("apply in %s: %v", h.NS, err)
	}
	got := byID(results)
	if r := got["net.busy_read"]; r.Severity != Skip {
		t.Errorf("net.busy_read is global: want skip inside a namespace, got %+v", r)
	}
	if r := got["nic.coalesce"]; r.Severity != Skip {
		t.Errorf("veth has no coalescing: want skip, got %+v", r)
	}
	// Since 6.x the socket-buffer sysctls are visible in a child namespace
	// but read-only: the check warns and leaves the fix to the host.
	if r := got["net.rmem_max"]; r.Severity != Warn || len(r.Changes) != 0 || !strings.Contains(r.Fix, "on the host") {
		t.Errorf("net.rmem_max inside a namespace: %+v", r)
	}
	if len(done) != 3 {
		t.Errorf("applied %d changes, want 3 (udp_early_demux, 2 features): %v", len(done), done)
	}
	after := read()
	if after != (state{demux: "1", rmem: before.rmem, gro: "on", fwd: "on"}) {
		t.Errorf("after apply: %+v", after)
	}
	if v, _ := readValue("/proc/sys/net/ipv4/udp_early_demux"); v != hostDemux {
		t.Fatalf("host net.ipv4.udp_early_demux changed from %s to %s", hostDemux, v)
	}
	if id := napiID(t, p, 9102); id == 0 {
		t.Errorf("veth with GRO on: NAPI id 0, want > 0")
	}

	undoFile := undo.String()
	for _, c := range done {
		if !strings.Contains(undoFile, fmt.Sprintf("\t%s\t%s\n", c.Prev, c.Value)) {
			t.Errorf("undo file lacks %s %s -> %s:\n%s", c, c.Prev, c.Value, undoFile)
		}
	}
	var restored []Change
	err = h.Do(func() (err error) {
		restored, err = Undo(strings.NewReader(undoFile), NewProber())
		return err
	})
	if err != nil || len(restored) != len(done) {
		t.Fatalf("undo: %d of %d restored: %v", len(restored), len(done), err)
	}
	if got := read(); got != before {
		t.Errorf("after undo %+v, want %+v", got, before)
	}
	if _, err := os.Stat("/run/netns/" + h.NS); err != nil {
		t.Fatalf("namespace vanished early: %v", err)
	}
}
