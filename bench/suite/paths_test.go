package suite

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestPaths runs the paths workload in its quick shape: every default path
// has a row in each of paths-rtt, paths-throughput and paths-loss (measured,
// or refused with the reason), and the loss rows carry the injected loss.
func TestPaths(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, BPF and AF_XDP (CI runs as root)")
	}
	for _, tool := range []string{"ip", "ethtool"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s(8) (scripts/setup.sh installs it)", tool)
		}
	}
	r := quick(t, "paths")
	for _, u := range r.Unavailable {
		t.Fatalf("paths not available: %s", u.Why)
	}
	for _, w := range []string{"paths-rtt", "paths-throughput", "paths-loss"} {
		rows := byName(r, w)
		for _, name := range []string{"udp", "mmsg-b64-gso", "xdp-native"} {
			x, ok := rows[name]
			if !ok {
				t.Fatalf("%s: no %s row", w, name)
			}
			sane(t, x)
			if x.Skipped != "" && name != "xdp-native" {
				t.Errorf("%s %s skipped: %s", w, name, x.Skipped)
			}
			if w == "paths-loss" && x.Skipped == "" && !strings.Contains(x.Note, "injected A→B") {
				t.Errorf("%s %s: no injected loss in the note: %s", w, name, x.Note)
			}
		}
	}
}
