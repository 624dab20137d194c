package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Exit statuses, the same for every command; `cast -h` lists them. A
// command that exits non-zero prints one line saying why, last, on
// stderr (main does it from the exitError the command returns).
const (
	exitOK          = 0   // done as asked
	exitFailed      = 1   // failed: less delivered than asked, nothing received, I/O error
	exitUsage       = 2   // bad flags or arguments, nothing was done
	exitOutcome     = 3   // the stream hit a sticky protocol outcome (faulted, reconnect, sender restarted, peer gone)
	exitInterrupted = 130 // Ctrl-C or SIGTERM: what was done is printed first
)

const exitCodesHelp = `exit status (every command):
  0    done as asked
  1    failed: fewer records delivered than asked, nothing received, an I/O error
  2    usage: a bad flag, value out of range or missing argument; nothing was done
  3    the stream hit a sticky protocol outcome (faulted, reconnect, sender
       restarted, receiver gone) on this side or, where it can know, the other
  130  interrupted (Ctrl-C, SIGTERM); what was measured is printed first
A non-zero status comes with one line saying why, the last line on stderr.`

// exitError makes main exit with code, after printing msg as one line
// ("cast CMD: msg") last on stderr. Build one with failf, usagef, outcomef
// or interruptedf.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// failf: exit 1 with the reason.
func failf(format string, a ...any) error {
	return &exitError{code: exitFailed, msg: fmt.Sprintf(format, a...)}
}

// usagef: exit 2 with the reason (a flag, a value, an argument).
func usagef(format string, a ...any) error {
	return &exitError{code: exitUsage, msg: fmt.Sprintf(format, a...)}
}

// outcomef: exit 3, the stream's sticky outcome.
func outcomef(format string, a ...any) error {
	return &exitError{code: exitOutcome, msg: fmt.Sprintf(format, a...)}
}

// interruptedf: exit 130 after a signal, saying how far the command got.
func interruptedf(format string, a ...any) error {
	return &exitError{code: exitInterrupted, msg: "interrupted: " + fmt.Sprintf(format, a...)}
}

// exitStatus maps what a command returned to the status and the one
// line main prints (empty for success and -h).
func exitStatus(cmd string, err error) (int, string) {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return exitOK, ""
	}
	code, msg := exitFailed, err.Error()
	var ee *exitError
	if errors.As(err, &ee) {
		code, msg = ee.code, ee.msg
		if msg == "" {
			switch code {
			case exitInterrupted:
				msg = "interrupted"
			case exitUsage:
				msg = "usage error (see -h)"
			default:
				msg = fmt.Sprintf("exit status %d", code)
			}
		}
	}
	msg = strings.Join(strings.Fields(strings.ReplaceAll(msg, "\n", "; ")), " ")
	if !strings.HasPrefix(msg, "cast ") {
		msg = "cast " + cmd + ": " + msg
	}
	return code, msg
}

// parseFlags parses a command's flags and refuses positional arguments.
// Every command parses through it (or parseArgs) so that a bad flag exits
// 2 with the reason as the last line.
func parseFlags(fs *flag.FlagSet, args []string) error { return parseArgs(fs, args, 0) }

// parseArgs parses flags followed by exactly n positional arguments.
func parseArgs(fs *flag.FlagSet, args []string, n int) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usagef("%s: %v", fs.Name(), err)
	}
	if fs.NArg() != n {
		if n == 0 {
			return usagef("%s: unexpected argument %q (flags go before arguments; see -h)", fs.Name(), fs.Arg(0))
		}
		return usagef("%s: want %d argument(s) after the flags, got %d (see -h)", fs.Name(), n, fs.NArg())
	}
	return nil
}

// checkRange is the range check of one flag's value (NaN is out of every
// range): a usage error naming the flag and the range.
func checkRange[T cmp.Ordered](flagName string, v, lo, hi T) error {
	if !(v >= lo && v <= hi) {
		return usagef("-%s %v: want %v..%v", flagName, v, lo, hi)
	}
	return nil
}

// checkPct checks a percentage flag (0..100).
func checkPct(flagName string, v float64) error { return checkRange(flagName, v, 0, 100) }

// checkPort checks a port flag (0..65535; 0 lets the kernel pick).
func checkPort(flagName string, v int) error { return checkRange(flagName, v, 0, 65535) }

// addrFlag parses flag -name's HOST:PORT (HOST may be empty or a name;
// an empty value is the zero address). needPort refuses port 0, for
// addresses datagrams are sent to.
func addrFlag(flagName, s string, needPort bool) (netip.AddrPort, error) {
	ap, err := parseAddr(s)
	if err != nil {
		return ap, usagef("-%s: %v", flagName, err)
	}
	if needPort && (!ap.IsValid() || ap.Port() == 0) {
		return ap, usagef("-%s %q: want HOST:PORT with a port 1..65535", flagName, s)
	}
	return ap, nil
}

// signalContext ends on the first SIGINT or SIGTERM, so a command can
// print what it did and exit 130; a second signal exits 130 at once.
func signalContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	stop := make(chan struct{})
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-ch:
			cancel()
		case <-stop:
			return
		}
		// A second signal exits at once; one within 100 ms of the first
		// is the same signal sent twice (timeout(1) signals the child and
		// then its process group).
		first := time.Now()
		for {
			select {
			case <-ch:
				if time.Since(first) < 100*time.Millisecond {
					continue
				}
				fmt.Fprintln(os.Stderr, "cast: interrupted twice, exiting now")
				os.Exit(exitInterrupted)
			case <-stop:
				return
			}
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() { signal.Stop(ch); close(stop) })
		cancel()
	}
}

// flagOutput is where flag usage goes: the flag package's own error
// line is dropped (main prints the reason last instead).
var flagOutput io.Writer = os.Stderr
