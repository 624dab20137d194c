package report

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sort"

	"github.com/walcast/walcast/bench/harness"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Plots draws every PNG the run has data for into dir and returns their
// file names (relative to dir).
func Plots(r *Report, dir string) (names []string, err error) {
	// gonum/plot panics on some degenerate data (a log axis meeting 0):
	// a plot that cannot be drawn is reported, never fatal.
	defer func() {
		if p := recover(); p != nil {
			err = errors.Join(err, fmt.Errorf("plot: %v", p))
		}
	}()
	return plots(r, dir)
}

func plots(r *Report, dir string) ([]string, error) {
	var names []string
	var errs []error
	add := func(name string, err error) {
		if name == "" && err == nil {
			return
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			return
		}
		if name != "" {
			names = append(names, name)
		}
	}
	// Every plot names the run it comes from, as the README block does.
	stamp := fmt.Sprintf("\nrun %s: %s", r.Date, r.Command)
	for _, wl := range []string{"rtt", "oneway", "paths-rtt", "paths-loss"} {
		add(percentilePlot(r.Workload(wl), wl, dir, stamp))
	}
	add(barPlot(r.Workload("rtt"), dir, stamp))
	names = append(names, scatterPlots(r.Workload("classic-rtt"), dir, stamp, &errs)...)
	add(throughputPlot(r.Workload("throughput"), dir, stamp))
	add(lossPlot(r.Workload("loss-degradation"), dir, stamp))
	add(lossP99Plot(r.Workload("loss-degradation"), dir, stamp))
	return names, errors.Join(errs...)
}

func measured(rs []harness.Result) []harness.Result {
	var out []harness.Result
	for _, x := range rs {
		if x.Skipped == "" && x.Latency.N > 0 {
			out = append(out, x)
		}
	}
	return out
}

// percentilePlot: latency (µs, log) against 100/(100−q) on a log axis, so
// the tail spreads out (q = 100 is left out: the log scale cannot hold it).
func percentilePlot(rs []harness.Result, wl, dir, stamp string) (string, error) {
	rs = measured(rs)
	if len(rs) == 0 {
		return "", nil
	}
	p := plot.New()
	p.Title.Text = wl + " latency by percentile" + stamp
	p.X.Label.Text = "percentile (x = 100/(100−q): 2 = p50, 100 = p99, 1000 = p99.9)"
	p.Y.Label.Text = "µs"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	var vs []any
	for _, x := range rs {
		var xys plotter.XYs
		for _, pt := range x.Curve {
			if pt.Q <= 0 || pt.Q >= 100 || pt.NS <= 0 {
				continue
			}
			xys = append(xys, plotter.XY{X: 100 / (100 - pt.Q), Y: float64(pt.NS) / 1e3})
		}
		if len(xys) > 0 {
			vs = append(vs, x.Name, xys)
		}
	}
	if err := plotutil.AddLinePoints(p, vs...); err != nil {
		return "", err
	}
	p.Legend.Top, p.Legend.Left = true, true
	name := wl + "_percentiles.png"
	return name, p.Save(8*vg.Inch, 5*vg.Inch, filepath.Join(dir, name))
}

// barPlot: p50 and p99 RTT side by side per protocol.
func barPlot(rs []harness.Result, dir, stamp string) (string, error) {
	rs = measured(rs)
	if len(rs) == 0 {
		return "", nil
	}
	p50, p99 := make(plotter.Values, len(rs)), make(plotter.Values, len(rs))
	var names []string
	for i, x := range rs {
		p50[i], p99[i] = float64(x.Latency.P50)/1e3, float64(x.Latency.P99)/1e3
		names = append(names, x.Name)
	}
	p := plot.New()
	p.Title.Text = "RTT p50 and p99 (128 B, pinned, loopback)" + stamp
	p.Y.Label.Text = "µs"
	w := vg.Points(14)
	b50, err := plotter.NewBarChart(p50, w)
	if err != nil {
		return "", err
	}
	b99, err := plotter.NewBarChart(p99, w)
	if err != nil {
		return "", err
	}
	b50.Color, b99.Color = plotutil.Color(0), plotutil.Color(1)
	b50.Offset, b99.Offset = -w/2, w/2
	p.Add(plotter.NewGrid(), b50, b99)
	p.Legend.Add("p50", b50)
	p.Legend.Add("p99", b99)
	p.Legend.Top = true
	p.NominalX(names...)
	name := "rtt_p50_p99.png"
	return name, p.Save(vg.Length(max(8, len(rs)))*vg.Inch, 5*vg.Inch, filepath.Join(dir, name))
}

// scatterPlots: per drop rate, each message's RTT against its number, as
// the classic tools plotted (timeouts show as 200 ms bands).
func scatterPlots(rs []harness.Result, dir, stamp string, errs *[]error) []string {
	byDrop := map[float64][]harness.Result{}
	for _, x := range rs {
		if x.Skipped == "" && len(x.Series) > 0 {
			byDrop[x.Drop] = append(byDrop[x.Drop], x)
		}
	}
	var drops []float64
	for d := range byDrop {
		drops = append(drops, d)
	}
	sort.Float64s(drops)
	var names []string
	for _, d := range drops {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("RTT per message, %g %% receiver-side drop", d*100) + stamp
		p.X.Label.Text = "message number"
		p.Y.Label.Text = "RTT µs"
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
		p.Add(plotter.NewGrid())
		for i, x := range byDrop[d] {
			xys := make(plotter.XYs, 0, len(x.Series))
			for k, v := range x.Series {
				xys = append(xys, plotter.XY{X: float64(k), Y: math.Max(float64(v)/1e3, 0.1)})
			}
			sc, err := plotter.NewScatter(xys)
			if err != nil {
				*errs = append(*errs, err)
				continue
			}
			sc.GlyphStyle.Color = plotutil.Color(i)
			sc.GlyphStyle.Radius = vg.Points(1.5)
			sc.GlyphStyle.Shape = plotutil.Shape(i)
			p.Add(sc)
			p.Legend.Add(x.Name, sc)
		}
		p.Legend.Top = true
		name := fmt.Sprintf("classic_rtt_drop%02.0f.png", d*100)
		if err := p.Save(8*vg.Inch, 4*vg.Inch, filepath.Join(dir, name)); err != nil {
			*errs = append(*errs, err)
			continue
		}
		names = append(names, name)
	}
	return names
}

// throughputPlot: records/s per datapath and peer, one bar group per size.
func throughputPlot(rs []harness.Result, dir, stamp string) (string, error) {
	sizes := map[int]bool{}
	var order []string
	seen := map[string]bool{}
	for _, x := range rs {
		if x.Skipped != "" || x.RecPerS == 0 {
			continue
		}
		sizes[x.Size] = true
		if !seen[x.Name] {
			seen[x.Name] = true
			order = append(order, x.Name)
		}
	}
	if len(order) == 0 {
		return "", nil
	}
	var ss []int
	for s := range sizes {
		ss = append(ss, s)
	}
	sort.Ints(ss)
	p := plot.New()
	p.Title.Text = "throughput per datapath (loopback, pinned)" + stamp
	p.Y.Label.Text = "M records/s"
	p.X.Tick.Label.Rotation = math.Pi / 8
	p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = draw.XRight, draw.YCenter
	w := vg.Points(12)
	p.Add(plotter.NewGrid())
	for i, s := range ss {
		vals := make(plotter.Values, len(order))
		for k, n := range order {
			for _, x := range rs {
				if x.Name == n && x.Size == s && x.Skipped == "" {
					vals[k] = x.RecPerS / 1e6
				}
			}
		}
		bc, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return "", err
		}
		bc.Color = plotutil.Color(i)
		bc.Offset = vg.Length(float64(i)-float64(len(ss)-1)/2) * w
		p.Add(bc)
		p.Legend.Add(fmt.Sprintf("%d B", s), bc)
	}
	p.Legend.Top = true
	p.NominalX(order...)
	name := "throughput.png"
	return name, p.Save(vg.Length(max(8, len(order)))*vg.Inch, 5*vg.Inch, filepath.Join(dir, name))
}

// lossPlot: delivered-in-order % against sustained loss, per protocol.
func lossPlot(rs []harness.Result, dir, stamp string) (string, error) {
	return lossCurves(rs, dir, "loss_degradation.png", "loss degradation: delivered in order"+stamp, "delivered in order %", false,
		func(x harness.Result) (float64, bool) { return x.DeliveredPct, true })
}

// lossP99Plot: one-way send → in-order delivery p99 (ms, log) against
// sustained loss, per protocol; rows without a latency are left out.
func lossP99Plot(rs []harness.Result, dir, stamp string) (string, error) {
	return lossCurves(rs, dir, "loss_oneway_p99.png", "loss degradation: one-way p99, send to in-order delivery"+stamp, "one-way p99 ms (log)", true,
		func(x harness.Result) (float64, bool) {
			return float64(x.Latency.P99) / 1e6, x.Latency.N > 0 && x.Latency.P99 > 0
		})
}

// lossCurves draws y(row) against the loss each way, one line per
// protocol, skipping the rows y refuses and the skipped ones.
func lossCurves(rs []harness.Result, dir, name, title, ylabel string, logY bool, y func(harness.Result) (float64, bool)) (string, error) {
	by := map[string]plotter.XYs{}
	var order []string
	for _, x := range rs {
		v, ok := y(x)
		if x.Skipped != "" || !ok {
			continue
		}
		if _, ok := by[x.Name]; !ok {
			order = append(order, x.Name)
		}
		by[x.Name] = append(by[x.Name], plotter.XY{X: x.Drop * 100, Y: v})
	}
	if len(order) == 0 {
		return "", nil
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "loss each way %"
	p.Y.Label.Text = ylabel
	if logY {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	}
	p.Add(plotter.NewGrid())
	var vs []any
	for _, n := range order {
		vs = append(vs, n, by[n])
	}
	if err := plotutil.AddLinePoints(p, vs...); err != nil {
		return "", err
	}
	p.Legend.Top = logY
	p.Legend.Left = true
	return name, p.Save(8*vg.Inch, 5*vg.Inch, filepath.Join(dir, name))
}
