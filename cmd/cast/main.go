// Command cast is walcast's one CLI: send, receive, echo, demo, bench,
// inspect WALs, replay, tune. Each subcommand lives in its own file and
// registers itself in init; `cast -h` lists them and `cast CMD -h`
// explains one.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/walcast/walcast/counters"
)

// command is one subcommand. run receives the arguments after the
// subcommand's name and returns an error to exit non-zero: an exitError
// (failf, usagef, outcomef, interruptedf in exit.go) carries the status,
// any other error exits 1. main prints the reason as the last line.
type command struct {
	name    string
	summary string
	run     func(args []string) error
}

var commands = map[string]command{}

func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("cast: duplicate command " + c.name)
	}
	commands[c.name] = c
}

// newFlagSet returns a flag set whose -h prints usage (one line saying what
// the command does and its synopsis) followed by the flag defaults. Parse
// it with parseFlags or parseArgs: a bad flag then exits 2 with the
// reason as the last line (the flag package's own error line is dropped).
func newFlagSet(name, synopsis, about string) *flag.FlagSet {
	fs := flag.NewFlagSet("cast "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		w := flagOutput
		fmt.Fprintf(w, "usage: cast %s %s\n\n%s\n\nflags:\n", name, synopsis, about)
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	return fs
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "cast — reliable, ordered UDP whose retransmit source is the WAL\n\nusage: cast COMMAND [flags]\n\ncommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(w, "\nrun 'cast COMMAND -h' for the flags of one command\n\n%s\n", exitCodesHelp)
}

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	// WALCAST_COUNTERS: where every loop of this process writes its
	// counters file (a directory), or "off" for none.
	switch d := os.Getenv("WALCAST_COUNTERS"); d {
	case "":
	case "off":
		counters.SetDefault(counters.Config{Off: true})
	default:
		counters.SetDefault(counters.Config{Dir: d})
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			fmt.Fprintln(stderr, "cast: no command given")
			return exitUsage
		}
		return exitOK
	}
	c, ok := commands[args[0]]
	if !ok {
		usage(stderr)
		fmt.Fprintf(stderr, "cast: unknown command %q\n", args[0])
		return exitUsage
	}
	code, msg := exitStatus(args[0], c.run(args[1:]))
	if msg != "" {
		fmt.Fprintln(stderr, msg)
	}
	return code
}
