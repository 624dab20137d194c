package benchkit

import (
	"strings"
	"testing"
)

func TestProbes(t *testing.T) {
	ps := Probes(t.TempDir())
	if len(ps) != len(probeList) {
		t.Fatalf("%d probes, want %d", len(ps), len(probeList))
	}
	for _, p := range ps {
		t.Logf("%-22s ok=%-5v %s", p.Name, p.OK, p.Detail)
		if p.Detail == "" {
			t.Errorf("%s: empty detail", p.Name)
		}
		if strings.Contains(p.Detail, "probe failed") {
			t.Errorf("%s: %s", p.Name, p.Detail)
		}
	}
	if tab := ProbeTable(ps); strings.Count(tab, "\n") != len(ps)+2 {
		t.Fatalf("table:\n%s", tab)
	}
}
