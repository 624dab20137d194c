// Command cast-bench is walcast's side-by-side benchmark suite: it runs
// the workloads over every peer protocol and walcast's own runners on
// loopback, pinned to cores 0/1, and writes a table to stdout,
// results.json, report.md and PNG plots. `cast bench all` runs it.
//
//	cast-bench [flags] [WORKLOAD...]   (default: all)
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/walcast/walcast/bench/report"
	"github.com/walcast/walcast/bench/suite"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "cast-bench:", err)
		if errors.Is(err, errInterrupted) {
			os.Exit(130)
		}
		os.Exit(1)
	}
}

var errInterrupted = errors.New("interrupted")

// stopOnSignal closes the returned channel at the first SIGINT/SIGTERM
// (the suite ends after the running workload) and exits 130 at the
// second.
func stopOnSignal() <-chan struct{} {
	stop := make(chan struct{})
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ch
		fmt.Fprintln(os.Stderr, "cast-bench: interrupted: finishing the running workload, then writing the report of what was measured (Ctrl-C again to quit now)")
		close(stop)
		<-ch
		fmt.Fprintln(os.Stderr, "cast-bench: interrupted twice, exiting now")
		os.Exit(130)
	}()
	return stop
}

func run(args []string) error {
	o := suite.DefaultOptions()
	fs := flag.NewFlagSet("cast-bench", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: cast-bench [flags] [WORKLOAD...]\n\nRuns the side-by-side suite (default: all). Workloads: %s.\nWorkloads whose dependency is missing are reported as not available.\n\nflags:\n", strings.Join(suite.Workloads, ", "))
		fs.PrintDefaults()
	}
	out := fs.String("out", "bench/out", "directory for results.json, report.md and the PNG plots")
	readme := fs.String("readme", "", "markdown file (make bench: docs/bench.md) to refresh between <!-- bench:begin --> and <!-- bench:end --> (empty: leave it); the plots, report.md and run.txt of the same run go to -docs")
	docs := fs.String("docs", "", "with -readme: directory for this run's plots, report.md and run.txt (default: the repository's docs/bench, found from a README.md or a docs/bench.md)")
	quick := fs.Bool("quick", false, "tiny counts: checks that everything runs, measures nothing worth quoting")
	payload := fs.Int("payload", o.Harness.Payload, "message bytes of the latency workloads")
	n := fs.Int("n", o.Harness.N, "measured messages per latency row")
	warmup := fs.Int("warmup", o.Harness.Warmup, "warm-up messages per latency row")
	budget := fs.Duration("budget", o.Harness.Budget, "wall-time cap of one measured phase")
	repeat := fs.Int("repeat", o.Repeat, "rtt runs per protocol (interleaved; the median p50 run is reported)")
	cpuA := fs.Int("cpu-a", o.Harness.ClientCPU, "core of the sending/measuring thread (-1: unpinned)")
	cpuB := fs.Int("cpu-b", o.Harness.ServerCPU, "core of the receiving/echo thread (-1: unpinned)")
	quiet := fs.Bool("q", false, "no progress lines on stderr")
	fanN := fs.Int("fanout-records", suite.FanoutRecords, "records per fan-out run (each of 5 rows × -repeat runs; at the offered rate a run takes records/rate s or more)")
	fanRate := fs.Int("fanout-rate", suite.FanoutRate, "offered records/s of the fan-out runs")
	from := fs.String("from", "", "measure nothing: load a run's results.json and write its report, plots and (with -readme) README block again")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return nil
		}
		return err
	}
	if *fanN < 1 || *fanRate < 1 {
		return fmt.Errorf("-fanout-records and -fanout-rate must be at least 1 (got %d, %d)", *fanN, *fanRate)
	}
	suite.FanoutRecords, suite.FanoutRate = *fanN, *fanRate
	if *quick {
		o = suite.QuickOptions()
	} else {
		o.Harness.Payload, o.Harness.N, o.Harness.Warmup, o.Harness.Budget = *payload, *n, *warmup, *budget
		o.Repeat = *repeat
	}
	o.Harness.ClientCPU, o.Harness.ServerCPU = *cpuA, *cpuB
	if fs.NArg() > 0 {
		o.Workloads = fs.Args()
	}
	o.Command = "cast-bench " + strings.Join(args, " ")
	o.Dir = *out
	if !*quiet {
		o.Log = os.Stderr
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	o.Stop = stopOnSignal()
	start := time.Now()
	var r *report.Report
	var err error
	if *from != "" {
		r, err = report.Load(*from)
	} else {
		r, err = suite.Run(o)
	}
	if err != nil {
		return err
	}
	r.Text(os.Stdout)
	if err := r.Write(*out); err != nil {
		return err
	}
	if len(r.Interrupted) > 0 {
		// A partial run never refreshes the README block or docs/bench.
		fmt.Fprintf(os.Stdout, "wrote %s and %s (partial: %s not run)\n", filepath.Join(*out, "results.json"), filepath.Join(*out, "report.md"), strings.Join(r.Interrupted, ", "))
		return fmt.Errorf("%w: %s not run; the README and docs were left as they were", errInterrupted, strings.Join(r.Interrupted, ", "))
	}
	fmt.Fprintf(os.Stdout, "wrote %s, %s and %d plots in %.0f s\n", filepath.Join(*out, "results.json"), filepath.Join(*out, "report.md"), len(r.Plots), time.Since(start).Seconds())
	if *readme != "" {
		// The README block and the published figures are written together,
		// from this run, or not at all.
		if *docs == "" {
			// docs/bench of the repository: beside README.md, or the
			// folder docs/bench.md sits in.
			*docs = filepath.Join(filepath.Dir(*readme), "docs", "bench")
			if filepath.Base(*readme) != "README.md" {
				*docs = filepath.Join(filepath.Dir(*readme), "bench")
			}
		}
		if err := r.Publish(*docs); err != nil {
			return err
		}
		if err := r.UpdateReadme(*readme); err != nil {
			return err
		}
		fmt.Fprintf(os.Stdout, "refreshed the figures block of %s and %s (%d plots, report.md, %s)\n", *readme, *docs, len(r.Plots), report.RunFile)
	}
	return nil
}
