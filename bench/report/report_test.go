package report

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walcast/walcast/bench/harness"
	"github.com/walcast/walcast/internal/benchkit"
)

func TestReplaceBlock(t *testing.T) {
	doc := "# t\n\nbefore\n" + BeginMarker + "\nold\nstuff\n" + EndMarker + "\nafter\n"
	got, err := ReplaceBlock([]byte(doc), "new | table\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "# t\n\nbefore\n" + BeginMarker + "\nnew | table\n" + EndMarker + "\nafter\n"
	if string(got) != want {
		t.Fatalf("got %q", got)
	}
	again, _ := ReplaceBlock(got, "new | table")
	if string(again) != want {
		t.Fatal("not idempotent")
	}
	for _, bad := range []string{"no markers", BeginMarker + " only", EndMarker + " then " + BeginMarker} {
		if _, err := ReplaceBlock([]byte(bad), "x"); !errors.Is(err, ErrNoMarkers) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// Publish replaces the plots an earlier run left and names the run.
func TestPublish(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "old_plot.png")
	if err := os.WriteFile(stale, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &Report{Date: "2026-12-01 10:00 UTC", Machine: "m", Command: "cast-bench -readme README.md rtt"}
	if err := r.Publish(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale plot kept: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, RunFile))
	if err != nil || !strings.HasPrefix(string(b), "stamp: "+r.Stamp()+"\n") {
		t.Fatalf("%s: %q %v", RunFile, b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "report.md")); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.Figures(), "Measured "+r.Stamp()+",") {
		t.Fatalf("README block does not carry the stamp:\n%s", r.Figures())
	}
}

// The committed README figures block and docs/bench come from one run:
// `make bench` (cast-bench -readme) writes them together. A README block
// or a plot refreshed by hand fails here.
func TestPublishedTogether(t *testing.T) {
	readme, err := os.ReadFile("../../docs/bench.md")
	if err != nil {
		t.Fatal(err)
	}
	run, err := os.ReadFile("../../docs/bench/" + RunFile)
	if err != nil {
		t.Fatalf("docs/bench/%s: %v (run make bench)", RunFile, err)
	}
	var stamp string
	var plots []string
	for _, l := range strings.Split(string(run), "\n") {
		if s, ok := strings.CutPrefix(l, "stamp: "); ok {
			stamp = s
		}
		if s, ok := strings.CutPrefix(l, "plots: "); ok {
			plots = strings.Fields(s)
		}
	}
	i, j := bytes.Index(readme, []byte(BeginMarker)), bytes.Index(readme, []byte(EndMarker))
	if stamp == "" || i < 0 || j < i || !bytes.Contains(readme[i:j], []byte("Measured "+stamp+",")) {
		t.Fatalf("README's figures block is not from the run docs/bench comes from (%q): run make bench", stamp)
	}
	have, _ := filepath.Glob("../../docs/bench/*.png")
	listed := map[string]bool{}
	for _, p := range plots {
		listed[p] = true
		if _, err := os.Stat("../../docs/bench/" + p); err != nil {
			t.Errorf("docs/bench/%s listed in %s: %v", p, RunFile, err)
		}
	}
	for _, h := range have {
		if !listed[filepath.Base(h)] {
			t.Errorf("%s is not from the run of %s", h, RunFile)
		}
	}
}

// The loss table carries the share delivered over UDP and the one-way
// p99, in report.md and in the README block; unmeasured is n/a.
func TestLossColumns(t *testing.T) {
	udp, tcp := 37.5, 0.0
	r := &Report{Date: "d", Machine: "m", Command: "c", Results: []harness.Result{
		{Row: benchkit.Row{Workload: "loss-degradation", Name: "casting", Latency: benchkit.Summary{N: 10, P99: 1_250_000}}, Size: 144, Drop: 0.1, DeliveredPct: 100, OverUDPPct: &udp},
		{Row: benchkit.Row{Workload: "loss-degradation", Name: "tcp-nodelay", Latency: benchkit.Summary{N: 10, P99: 40_000}}, Size: 144, OverUDPPct: &tcp},
		{Row: benchkit.Row{Workload: "loss-degradation", Name: "tcp-nodelay", Note: "skipped: no loss"}, Size: 144, Drop: 0.1, Skipped: "no loss"},
		{Row: benchkit.Row{Workload: "loss-degradation", Name: "old"}, Size: 144},
	}}
	md := string(r.Markdown())
	for _, want := range []string{"| over UDP % | one-way p99 µs | note |", "| 37.5 | 1250.0 |", "| 0.0 | 40.0 |", "| n/a | - |"} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	fig := r.Figures()
	for _, want := range []string{"| casting | 37.5 / 1.25 |  |", "| tcp-nodelay | n/a | 0.0 / 0.04 |", "- n/a: tcp-nodelay: no loss"} {
		if !strings.Contains(fig, want) {
			t.Errorf("README block lacks %q:\n%s", want, fig)
		}
	}
}

// The loss rows' one-way p99 is drawn beside delivered-in-order.
func TestLossPlots(t *testing.T) {
	r := &Report{Date: "d", Command: "c"}
	for i, d := range []float64{0, 0.1, 0.5} {
		for _, n := range []string{"casting", "raw-udp"} {
			r.Results = append(r.Results, harness.Result{Row: benchkit.Row{Workload: "loss-degradation", Name: n,
				Latency: benchkit.Summary{N: 5, P50: 1000, P99: int64(1000 * (i + 1))}}, Drop: d, DeliveredPct: 100})
		}
	}
	names, err := Plots(r, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(names, " ") != "loss_degradation.png loss_oneway_p99.png" {
		t.Fatalf("plots %v", names)
	}
}
