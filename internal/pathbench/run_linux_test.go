package pathbench

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walcast/walcast/internal/netns"
)

// TestRunSmoke runs every workload once over one path of each kind with
// tiny counts: every row is measured (or refused with a reason), each
// AF_XDP row says how it attached, the loss rows got the configured loss
// in both directions and were repaired, and no namespace of the run is
// left behind. It asserts behaviour, never speed: the budgets are stalls
// (nothing delivered for 10 s), not phase lengths, so a loop that is off
// CPU for seconds on a loaded machine makes it slow, not red.
func TestRunSmoke(t *testing.T) {
	netns.Require(t)
	c := DefaultConfig()
	var err error
	if c.Specs, err = ParseSpecs("udp,mmsg-b64-gso,xdp-native,xdp-generic-busy"); err != nil {
		t.Fatal(err)
	}
	c.Runs, c.N, c.Warmup, c.Blocks = 1, 300, 50, 2
	c.Sizes = []int{144}
	c.TputTime, c.LossTime, c.LossRate, c.Loss = 200*time.Millisecond, 300*time.Millisecond, 10000, 0.05
	c.Stall, c.Tolerate = 10*time.Second, true
	c.Tag = "xdp-smoke"
	var log bytes.Buffer
	c.Log = &log
	r, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	r.Text(&out, false)
	t.Logf("progress:\n%s\nreport:\n%s", log.String(), out.String())
	if len(r.Rows) != 3*len(c.Specs) || len(r.Summary) != len(r.Rows) {
		t.Fatalf("%d rows, %d summary rows for %d specs × 3 workloads", len(r.Rows), len(r.Summary), len(c.Specs))
	}
	specs := map[string]Spec{}
	for _, s := range c.Specs {
		specs[s.Name] = s
	}
	for _, x := range r.Rows {
		if x.Failed != "" {
			t.Errorf("%s %s failed: %s", x.Workload, x.Spec, x.Failed)
		}
		if x.Refused != "" {
			if x.Path != "xdp" {
				t.Errorf("%s %s refused: %s", x.Workload, x.Spec, x.Refused)
			}
			if !strings.Contains(strings.Join(r.Notes, "\n"), x.Spec+": refused by the kernel: ") {
				t.Errorf("%s %s refused, but the notes do not say why: %q", x.Workload, x.Spec, r.Notes)
			}
			continue
		}
		if x.Path == "xdp" {
			attach := specs[x.Spec].Attach.String() + " attach, "
			if !strings.Contains(x.Note, attach) {
				t.Errorf("%s %s: the note does not report the mode (want %q): %s", x.Workload, x.Spec, attach, x.Note)
			}
		}
		switch x.Workload {
		case "rtt":
			if x.Latency.N != c.N || x.Latency.P50 <= 0 {
				t.Errorf("rtt %s: %d samples, p50 %d", x.Spec, x.Latency.N, x.Latency.P50)
			}
			if x.A.Syscalls <= 0 && !strings.Contains(strings.Join(r.Notes, " "), "n/a") {
				t.Errorf("rtt %s: %v syscalls per round trip", x.Spec, x.A.Syscalls)
			}
		case "throughput":
			if x.RecPerS <= 0 || x.Delivered == 0 {
				t.Errorf("throughput %s: %v rec/s", x.Spec, x.RecPerS)
			}
		case "loss":
			if x.DeliveredPct != 100 {
				t.Errorf("loss %s: delivered %.2f %%: %s", x.Spec, x.DeliveredPct, x.Note)
			}
			if x.LossAB == 0 || x.MatchedAB == 0 || x.Retx == 0 {
				t.Errorf("loss %s: no loss injected A→B (%v of %d) or nothing retransmitted (%d)", x.Spec, x.LossAB, x.MatchedAB, x.Retx)
			}
		}
	}
	for _, ck := range r.Checks {
		if strings.Contains(ck.Text, "configured") && !ck.Met {
			t.Errorf("%s: %s", ck.Text, ck.Detail)
		}
	}
	// This process's namespaces only (netns ids start with the pid in base
	// 36): another `go test` may be running the same test right now.
	mine := "walcast-" + c.Tag + "-" + strconv.FormatUint(uint64(os.Getpid()), 36)
	left, _ := os.ReadDir("/run/netns")
	for _, e := range left {
		if strings.HasPrefix(e.Name(), mine) {
			t.Errorf("namespace %s left behind", e.Name())
		}
	}
}

// TestWindowWithinHotRing: the receiver never grants the WAL-less sender
// a window it could not repair from its hot ring (the loss rows stalled
// when it did: docs/xdp.md, "Loss").
func TestWindowWithinHotRing(t *testing.T) {
	rc, sc := receiverConfig(DefaultConfig()), senderConfig()
	if rc.ReorderSlots == 0 || rc.ReorderSlots > sc.RingSlots {
		t.Fatalf("receiver window %d slots, sender hot ring %d", rc.ReorderSlots, sc.RingSlots)
	}
}
