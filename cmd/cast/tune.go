package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/walcast/walcast/tune"
)

func init() {
	register(command{name: "tune", summary: "check (and fix) the host for isolated-core runs: `cast tune check|apply|undo`", run: runTune})
}

// tuneOut is where cast tune writes its report; tests swap it.
var tuneOut io.Writer = os.Stdout

const tuneUsage = `usage: cast tune check [flags]      report pass/info/skip/warn/fail per setting; exit 1 on any fail
       cast tune apply [flags]      apply the run-time fixes, print each with its previous value,
                                    write an undo file; reboot-only fixes are printed, not applied
       cast tune undo FILE          restore what an undo file recorded (also scripts/tune.sh's)

Run 'cast tune check -h' for the flags that say what the loops will use.`

func runTune(args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(os.Stderr, tuneUsage)
		if len(args) == 0 {
			return usagef("want a subcommand: check, apply or undo")
		}
		return nil
	}
	switch args[0] {
	case "check":
		return tuneCheck(args[1:])
	case "apply":
		return tuneApply(args[1:])
	case "undo":
		return tuneUndo(args[1:])
	}
	fmt.Fprintln(os.Stderr, tuneUsage)
	return usagef("unknown subcommand %q", args[0])
}

// tuneFlags maps the flags shared by check and apply onto a tune.Config.
// The function it returns parses args with fs, builds the Config and runs
// the checks with it.
func tuneFlags(fs *flag.FlagSet) func(args []string) (tune.Config, []tune.Result, error) {
	cfg := tune.DefaultConfig()
	cpus := fs.String("cpus", "", "CPUs the datapath loops are pinned to, kernel list format (\"2-3\"); default: the isolated CPUs")
	fs.StringVar(&cfg.Iface, "iface", "", "NIC the loops use (default: the default route's interface)")
	fs.StringVar(&cfg.WALDir, "wal-dir", "", "WAL directory: probe its filesystem and O_DIRECT")
	fs.BoolVar(&cfg.FIFO, "fifo", false, "the loops run SCHED_FIFO (then RT throttling must be off)")
	fs.IntVar(&cfg.PID, "pid", 0, "running walcast process whose timer slack is checked (and set by apply)")
	fs.IntVar(&cfg.SockBuf, "sockbuf", cfg.SockBuf, "socket buffer the datapath asks for, bytes")
	fs.IntVar(&cfg.BusyPoll, "busy-poll", cfg.BusyPoll, "busy-poll time wanted for net.core.busy_read/busy_poll, µs (0: not checked)")
	fs.IntVar(&cfg.MaxIdleLatency, "max-idle-latency", cfg.MaxIdleLatency, "idle states with a larger exit latency should be off on the loop CPUs, µs")
	fs.StringVar(&cfg.NapiListen, "napi-listen", "", "host:port to wait on for one datagram and report its NAPI id")
	fs.DurationVar(&cfg.NapiWait, "napi-wait", cfg.NapiWait, "how long -napi-listen waits")
	fs.StringVar(&cfg.Proc, "proc", cfg.Proc, "procfs root (for fixture trees)")
	fs.StringVar(&cfg.Sys, "sys", cfg.Sys, "sysfs root (for fixture trees)")
	return func(args []string) (tune.Config, []tune.Result, error) {
		if err := parseFlags(fs, args); err != nil {
			return cfg, nil, err
		}
		if *cpus != "" {
			c, err := tune.ParseCPUList(*cpus)
			if err != nil {
				return cfg, nil, usagef("-cpus: %v", err)
			}
			cfg.CPUs = c
		}
		if err := cfg.Validate(); err != nil {
			return cfg, nil, usagef("%v", err)
		}
		rs, err := tune.Run(cfg)
		return cfg, rs, err
	}
}

func tuneCheck(args []string) error {
	fs := newFlagSet("tune check", "[flags]", "Reports each host setting that matters for latency on isolated cores:\nwhat it read, the value found, the value wanted, why, and the command that fixes it.\nExits 1 when any check fails.")
	asJSON := fs.Bool("json", false, "print the results as a JSON array")
	verbose := fs.Bool("v", false, "also print what each check read, and why, for passing checks")
	run := tuneFlags(fs)
	_, rs, err := run(args)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(tuneOut)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rs); err != nil {
			return err
		}
	} else {
		printResults(tuneOut, rs, *verbose)
	}
	if tune.Worst(rs) == tune.Fail {
		fails := 0
		for _, r := range rs {
			if r.Severity == tune.Fail {
				fails++
			}
		}
		return failf("%d check(s) failed", fails)
	}
	return nil
}

// printResults writes the check table: one row per check, and under each
// warn/fail (or every row with verbose) why it matters and the fix.
func printResults(w io.Writer, rs []tune.Result, verbose bool) {
	idW, foundW := len("CHECK"), len("FOUND")
	for _, r := range rs {
		idW = max(idW, len(r.ID))
		foundW = max(foundW, min(len(r.Found), 44))
	}
	fmt.Fprintf(w, "%-6s %-*s %-*s %s\n", "STATUS", idW, "CHECK", foundW, "FOUND", "WANT")
	counts := map[tune.Severity]int{}
	pad := strings.Repeat(" ", 7)
	for _, r := range rs {
		counts[r.Severity]++
		fmt.Fprintf(w, "%-6s %-*s %-*s %s\n", r.Severity, idW, r.ID, foundW, r.Found, r.Want)
		if !r.Bad() && !verbose {
			continue
		}
		fmt.Fprintf(w, "%swhy: %s\n", pad, r.Why)
		if verbose {
			fmt.Fprintf(w, "%sreads: %s\n", pad, r.Reads)
		}
		if r.Fix != "" {
			how := "fix"
			switch {
			case r.Reboot:
				how = "fix (reboot)"
			case len(r.Changes) > 0:
				how = "fix (apply)"
			}
			fmt.Fprintf(w, "%s%s: %s\n", pad, how, r.Fix)
		}
	}
	fmt.Fprintf(w, "%d pass, %d info, %d skip, %d warn, %d fail\n",
		counts[tune.Pass], counts[tune.Info], counts[tune.Skip], counts[tune.Warn], counts[tune.Fail])
}

func tuneApply(args []string) error {
	fs := newFlagSet("tune apply", "[flags]", "Applies the run-time fixes of every warn/fail check (sysctls, governor, idle states,\nIRQ affinity, THP, clock source, ethtool features and coalescing), prints each change\nwith its previous value and records it in an undo file. Kernel command-line fixes need\na reboot: they are printed, never applied.")
	undoPath := fs.String("undo", "", "undo file to write (default: cast-tune-undo-TIME.tsv in the current directory)")
	only := fs.String("only", "", "comma-separated check ids to apply (default: all)")
	dry := fs.Bool("n", false, "print what would change; change nothing")
	run := tuneFlags(fs)
	cfg, rs, err := run(args)
	if err != nil {
		return err
	}
	var ids []string
	if *only != "" {
		ids = strings.Split(*only, ",")
		known := map[string]bool{}
		for _, r := range rs {
			known[r.ID] = true
		}
		for _, id := range ids {
			if !known[id] {
				return usagef("-only: unknown check %q", id)
			}
		}
	}
	var todo []tune.Result
	for _, r := range rs {
		if !r.Bad() || (ids != nil && !slices.Contains(ids, r.ID)) {
			continue
		}
		switch {
		case len(r.Changes) > 0:
			todo = append(todo, r)
		case r.Reboot:
			fmt.Fprintf(tuneOut, "reboot   %-18s %s\n", r.ID, r.Fix)
		case r.Fix != "":
			fmt.Fprintf(tuneOut, "manual   %-18s %s\n", r.ID, r.Fix)
		}
	}
	prober := cfg.Probe
	if prober == nil {
		prober = tune.NewProber()
	}
	if *dry {
		for _, r := range todo {
			for _, c := range r.Changes {
				now, err := tune.Current(c, prober)
				if err != nil {
					now = "(" + err.Error() + ")"
				}
				fmt.Fprintf(tuneOut, "would    %-18s %s: %s -> %s\n", r.ID, c, now, c.Value)
			}
		}
		return nil
	}
	if len(todo) == 0 {
		fmt.Fprintln(tuneOut, "nothing to apply at run time")
		return nil
	}
	if *undoPath == "" {
		*undoPath = "cast-tune-undo-" + time.Now().UTC().Format("20060102T150405Z") + ".tsv"
	}
	f, err := os.OpenFile(*undoPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if st, err := f.Stat(); err == nil && st.Size() == 0 {
		io.WriteString(f, tune.UndoHeader)
	}
	done, aerr := tune.Apply(todo, prober, f)
	if err := f.Close(); err != nil && aerr == nil {
		aerr = err
	}
	for _, c := range done {
		fmt.Fprintf(tuneOut, "changed  %s: %s -> %s\n", c, c.Prev, c.Value)
	}
	fmt.Fprintf(tuneOut, "%d changes; undo with: cast tune undo %s\n", len(done), *undoPath)
	if aerr != nil {
		return aerr
	}
	return nil
}

func tuneUndo(args []string) error {
	fs := newFlagSet("tune undo", "FILE", "Restores every value an undo file recorded (written by `cast tune apply` or\n`scripts/tune.sh apply`), last change first, and prints each.")
	if err := parseArgs(fs, args, 1); err != nil {
		return err
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer f.Close()
	done, err := tune.Undo(f, tune.NewProber())
	for _, c := range done {
		fmt.Fprintf(tuneOut, "restored %s: %s -> %s\n", c, c.Prev, c.Value)
	}
	return err
}
