package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// The side-by-side suite lives in the separate bench/ module (so users of
// the transport do not pull KCP, QUIC and gonum/plot); this module must not
// import it. These workloads run its binary, cast-bench, found next to the
// cast executable or on PATH.

const suiteBinary = "cast-bench"

// suiteWorkloads are the bench workloads that pass their flags to cast-bench.
var suiteWorkloads = map[string]bool{}

func init() {
	defer func() {
		for _, w := range []string{"all", "suite", "peers", "oneway", "loss-degradation", "classic"} {
			suiteWorkloads[w] = true
		}
	}()
	registerBench("all", "the whole side-by-side suite: every workload, every peer, report and plots (runs cast-bench)", suiteRunner())
	registerBench("suite", "cast-bench with its own flags and workload list: `cast bench suite -h`", suiteRunner())
	registerBench("peers", "rtt, oneway and throughput of every peer protocol next to raw UDP (runs cast-bench)", suiteRunner("rtt", "oneway", "throughput"))
	registerBench("oneway", "send-to-deliver latency, clock shared in-process, every peer (runs cast-bench)", suiteRunner("oneway"))
	registerBench("loss-degradation", "0–50 % sustained loss both ways (BPF injector on a veth pair, every peer alike): delivered in order, over UDP %, one-way p99, rate, retransmits (runs cast-bench)", suiteRunner("loss-degradation"))
	registerBench("classic", "the classic sender/receiver/bandwidth experiments, stop-and-wait next to casting (runs cast-bench)", suiteRunner("classic"))
}

// suiteRunner returns a workload that execs cast-bench with the user's
// flags followed by workloads (none: the user's list, or all).
func suiteRunner(workloads ...string) func(args []string) error {
	return func(args []string) error {
		bin, err := findSuite()
		if err != nil {
			return err
		}
		cmd := exec.Command(bin, append(args, workloads...)...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		err = cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return &exitError{code: ee.ExitCode(), msg: fmt.Sprintf("%s exited %d", suiteBinary, ee.ExitCode())}
		}
		return err
	}
}

// findSuite looks next to the running cast binary first, so bin/cast uses
// bin/cast-bench from the same build, then on PATH.
func findSuite() (string, error) {
	var tried []string
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), suiteBinary)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
		tried = append(tried, p)
	}
	if p, err := exec.LookPath(suiteBinary); err == nil {
		return p, nil
	}
	return "", failf("%s not found (looked at %v and on PATH); build it with `make build` "+
		"(or `cd bench && go build -o ../bin/%s ./cmd/cast-bench`)", suiteBinary, tried, suiteBinary)
}
