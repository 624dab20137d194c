package pathbench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/bpf"
	"github.com/walcast/walcast/internal/benchkit"
	"github.com/walcast/walcast/internal/netns"
)

// ErrNeedRoot is returned by Run when not root.
var ErrNeedRoot = errors.New("pathbench: needs root (it creates network namespaces, loads BPF programs and opens AF_XDP sockets)")

// Run measures every workload of c for every spec, c.Runs times
// interleaved, between namespaces it creates (tagged c.Tag) and removes
// before returning, also when ctx is cancelled (it stops after the current
// row then, and returns what it has with ctx.Err()).
func Run(ctx context.Context, c Config) (*Report, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, ErrNeedRoot
	}
	affinity.EnsureGOMAXPROCS(2)
	r := newReport()
	sys, err := bpf.NewSyscallCounter(64)
	if err != nil {
		r.Notes = append(r.Notes, "system calls per operation are n/a: "+err.Error())
		sys = nil
	} else {
		defer sys.Close()
	}
	var pr *netns.Pair
	var ll *lanLoss
	defer func() {
		var cerr []error
		if pr != nil {
			cerr = append(cerr, pr.Close())
		}
		if ll != nil {
			cerr = append(cerr, ll.close())
		}
		if e := errors.Join(cerr...); e != nil {
			r.Notes = append(r.Notes, "CLEANUP FAILED, namespaces may be left behind: "+e.Error())
		}
	}()
	want := map[string]bool{}
	for _, w := range c.Workloads {
		want[w] = true
	}
	if want["rtt"] || want["throughput"] {
		nc := netns.DefaultConfig()
		nc.Tag = c.Tag
		if pr, err = netns.Create(nc); err != nil {
			return nil, fmt.Errorf("pathbench: veth pair: %w", err)
		}
	}
	if want["loss"] {
		if ll, err = newLANLoss(c); err != nil {
			return nil, err
		}
		r.Notes = append(r.Notes, fmt.Sprintf("loss rows: tc injector (%v) on the egress of both switch ports, %.3g%% per direction", ll.mode, 100*c.Loss))
	}
	c.logf("paths: %d specs × %v, %d runs; load %s\n", len(c.Specs), c.Workloads, c.Runs, r.LoadStart)
	for run := 1; run <= c.Runs; run++ {
		for _, w := range Workloads {
			if !want[w] {
				continue
			}
			if w == "rtt" {
				if err := ctx.Err(); err != nil {
					r.finish(c)
					return r, err
				}
				for _, row := range rttRun(c, c.Specs, pr, sys) {
					row.Run = run
					c.logf("%s\n", row.progress())
					r.Rows = append(r.Rows, row)
				}
				continue
			}
			for _, s := range c.Specs {
				sizes := []int{c.Size}
				if w == "throughput" {
					sizes = c.Sizes
				}
				for _, size := range sizes {
					if err := ctx.Err(); err != nil {
						r.finish(c)
						return r, err
					}
					var row Row
					switch w {
					case "throughput":
						row = throughput(c, s, size, pr, sys)
					case "loss":
						row = loss(c, s, ll, sys)
					}
					row.Run = run
					c.logf("%s\n", row.progress())
					r.Rows = append(r.Rows, row)
				}
			}
		}
	}
	r.finish(c)
	return r, nil
}

func newReport() *Report {
	now := time.Now()
	return &Report{Date: now.UTC().Format("2006-01-02 15:04 UTC"), Machine: benchkit.Machine(), LoadStart: benchkit.LoadAvg(), began: now}
}
