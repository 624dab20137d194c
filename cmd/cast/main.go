// Command cast is walcast's one CLI: send, receive, echo, demo, bench,
// inspect WALs, replay, tune. Each subcommand lives in its own file and
// registers itself in init; `cast -h` lists them and `cast CMD -h`
// explains one.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
)

// command is one subcommand. run receives the arguments after the
// subcommand's name and returns an error to exit non-zero; exitError
// carries a specific exit status.
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

// exitError makes main exit with code without printing more than msg.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// newFlagSet returns a flag set whose -h prints usage (one line saying what
// the command does and its synopsis) followed by the flag defaults.
func newFlagSet(name, synopsis, about string) *flag.FlagSet {
	fs := flag.NewFlagSet("cast "+name, flag.ContinueOnError)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: cast %s %s\n\n%s\n\nflags:\n", name, synopsis, about)
		fs.PrintDefaults()
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
	fmt.Fprintf(w, "\nrun 'cast COMMAND -h' for the flags of one command\n")
}

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "cast: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	err := c.run(args[1:])
	if err == nil {
		return 0
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(stderr, ee.msg)
		}
		return ee.code
	}
	fmt.Fprintf(stderr, "cast %s: %v\n", args[0], err)
	return 1
}
