package main

import (
	"fmt"
	"os"
	"sort"
)

// benchWorkload is one `cast bench WORKLOAD`. Files that own a workload
// register it in init with registerBench.
type benchWorkload struct {
	summary string
	run     func(args []string) error
}

var benchWorkloads = map[string]benchWorkload{}

func registerBench(name, summary string, run func(args []string) error) {
	if _, dup := benchWorkloads[name]; dup {
		panic("cast: duplicate bench workload " + name)
	}
	benchWorkloads[name] = benchWorkload{summary: summary, run: run}
}

func init() {
	register(command{name: "bench", summary: "run a benchmark workload and compare it with its floor (`cast bench -h`)", run: runBench})
}

func benchUsage() {
	fmt.Fprintf(os.Stderr, "usage: cast bench WORKLOAD [flags]\n\nRuns one workload and reports percentiles and ratios against the floor measured\nin the same run. Pin with -pin where the workload offers it.\n\nworkloads:\n")
	names := make([]string, 0, len(benchWorkloads))
	for n := range benchWorkloads {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-14s %s\n", n, benchWorkloads[n].summary)
	}
	fmt.Fprintf(os.Stderr, "\nrun 'cast bench WORKLOAD -h' for its flags\n")
}

func runBench(args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		benchUsage()
		if len(args) == 0 {
			return usagef("want a workload")
		}
		return nil
	}
	w, ok := benchWorkloads[args[0]]
	if !ok {
		benchUsage()
		return usagef("unknown workload %q", args[0])
	}
	return w.run(args[1:])
}
