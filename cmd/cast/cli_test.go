package main

// The CLI test suite: every case runs `cast` as a real child process (the
// test binary re-executed, dispatched in TestMain), on loopback, and
// checks its exit status, its last line and that it ends within a budget
// generous enough for a loaded 2-vCPU machine (a hang fails the test, it
// never blocks the run).

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walcast/walcast/counters/counterstest"
	"github.com/walcast/walcast/internal/childproc"
)

const childEnv = "WALCAST_CAST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stderr))
	}
	// The children inherit WALCAST_COUNTERS: a directory of this run's own.
	os.Exit(counterstest.Main(m))
}

// hangBudget is how long any child may take before the test calls it
// hung: far above what each case needs, so that load never fails it.
const hangBudget = 90 * time.Second

// child is one running `cast` process.
type child struct{ *childproc.Child }

// startCast starts `cast args...` in dir (empty: a temporary directory).
func startCast(t *testing.T, dir string, args ...string) *child {
	t.Helper()
	return startWrapped(t, dir, nil, args...)
}

// startWrapped starts `wrap... cast args...` (e.g. wrap = ip netns exec NS).
func startWrapped(t *testing.T, dir string, wrap []string, args ...string) *child {
	t.Helper()
	return &child{childproc.StartWrapped(t, childEnv+"=1", dir, wrap, args...)}
}

func (c *child) wait(budget time.Duration) int { c.T.Helper(); return c.Wait(budget) }
func (c *child) waitOutput(re string, budget time.Duration) string {
	c.T.Helper()
	return c.WaitOutput(re, budget)
}
func (c *child) signal(s os.Signal) { c.T.Helper(); c.Signal(s) }

// runCast runs `cast args...` to its end.
func runCast(t *testing.T, args ...string) *child {
	t.Helper()
	c := startCast(t, "", args...)
	c.wait(hangBudget)
	return c
}

// expect checks the exit status and that the last line of stderr (or of
// stdout) matches re.
func (c *child) expect(code int, stream, re string) {
	c.T.Helper()
	out := c.Stderr.String()
	if stream == "stdout" {
		out = c.Stdout.String()
	}
	if c.Code() != code || !regexp.MustCompile(re).MatchString(childproc.LastLine(out)) {
		c.T.Fatalf("cast %s: exit %d (want %d), last %s line %q (want /%s/)\n%s",
			strings.Join(c.Args, " "), c.Code(), code, stream, childproc.LastLine(out), re, c.Dump())
	}
}

// usageCases: each argument list is refused (or answered) before the
// command does anything, with this status and last line on stderr.
var usageCases = []struct {
	args []string
	code int
	last string // regexp on the last line of stderr
}{
	{nil, 2, `^cast: no command given$`},
	{[]string{"nope"}, 2, `^cast: unknown command "nope"$`},
	{[]string{"-h"}, 0, `^A non-zero status comes with one line`},
	{[]string{"send"}, 2, `^cast send: -to HOST:PORT is required$`},
	{[]string{"send", "-to", "127.0.0.1:70000"}, 2, `^cast send: -to: .*invalid port`},
	{[]string{"send", "-to", "127.0.0.1:0"}, 2, `^cast send: -to "127.0.0.1:0": want HOST:PORT with a port 1..65535$`},
	{[]string{"send", "-to", "127.0.0.1:9", "-n", "0"}, 2, `^cast send: -n 0: want 1\.\.`},
	{[]string{"send", "-to", "127.0.0.1:9", "-path", "tcp"}, 2, `^cast send: -path "tcp": want udp or mmsg$`},
	{[]string{"recv", "-drop", "150"}, 2, `^cast recv: -drop 150: want 0..100$`},
	{[]string{"recv", "-drop", "-5"}, 2, `^cast recv: -drop -5: want 0..100$`},
	{[]string{"recv", "-drop", "NaN"}, 2, `^cast recv: -drop NaN: want 0..100$`},
	{[]string{"recv", "-reorder", "1000"}, 2, `^cast recv: -reorder 1000: want a power of two`},
	{[]string{"recv", "-bogus"}, 2, `^cast recv: flag provided but not defined: -bogus$`},
	{[]string{"recv", "extra"}, 2, `^cast recv: unexpected argument "extra"`},
	{[]string{"receiver", "-port", "70000"}, 2, `^cast receiver: -port 70000: want 0..65535$`},
	{[]string{"receiver", "-port", "-1"}, 2, `^cast receiver: -port -1: want 0..65535$`},
	{[]string{"echo", "-listen", "127.0.0.1:99999"}, 2, `^cast echo: -listen: `},
	{[]string{"bandwidth"}, 2, `^cast bandwidth: -mode "": want sender or receiver$`},
	{[]string{"demo", "-drop", "101"}, 2, `^cast demo: -drop 101: want 0..100$`},
	{[]string{"demo", "-pin", "0"}, 2, `^cast demo: -pin "0": want CPU,CPU`},
	{[]string{"demo", "-idle", "x"}, 2, `^cast demo: -idle "x": want auto, spin, park, mixed or shared$`},
	{[]string{"bench", "cost", "-rows", "x"}, 2, `^cast bench: -rows: no row "x" \(have floor-gso-gro, `},
	{[]string{"wal"}, 2, `^cast wal: want a subcommand`},
	{[]string{"wal", "stat"}, 2, `^cast wal stat: want 1 argument`},
	{[]string{"wal", "frob"}, 2, `^cast wal: unknown subcommand "frob"$`},
	{[]string{"replay", "tail", "-from", "0"}, 2, `^cast replay: -from 0: seqs start at 1$`},
	{[]string{"replay", "serve"}, 2, `^cast replay: -wal DIR is required$`},
	{[]string{"tune", "undo"}, 2, `^cast tune undo: want 1 argument`},
	{[]string{"bench"}, 2, `^cast bench: want a workload$`},
	{[]string{"bench", "rtt", "-n", "0"}, 2, `^cast bench: -n 0: want 1\.\.`},
	{[]string{"bench", "throughput", "-sizes", "144,x"}, 2, `^cast bench: -sizes: `},
	{[]string{"certs", "-days", "0"}, 2, `^cast certs: -days 0: want 1\.\.`},
	{[]string{"version", "x"}, 2, `^cast version: unexpected argument "x"`},
	{[]string{"sender", "-size", "1428"}, 2, `^cast sender: -size 1428: want 0..1427$`},
	{[]string{"bandwidth", "-mode", "sender", "-size", "-1"}, 2, `^cast bandwidth: -size -1: want 0..1427$`},
}

// TestCLIUsage: bad flags, values out of range and missing arguments exit
// 2 with the reason last. The table runs in this process (run is what
// main calls; nothing starts before the flags are checked); a few cases
// run as real processes too, where main's os.Exit carries the status.
func TestCLIUsage(t *testing.T) {
	for _, tc := range usageCases {
		t.Run(strings.Join(append([]string{"cast"}, tc.args...), " "), func(t *testing.T) {
			code, stderr := runInProcess(tc.args...)
			if last := childproc.LastLine(stderr); code != tc.code || !regexp.MustCompile(tc.last).MatchString(last) {
				t.Fatalf("exit %d (want %d), last stderr line %q (want /%s/)\n%s", code, tc.code, last, tc.last, stderr)
			}
		})
	}
	for _, i := range []int{0, 2, 8} { // no command, -h, -drop 150
		tc := usageCases[i]
		t.Run("process/"+strings.Join(append([]string{"cast"}, tc.args...), " "), func(t *testing.T) {
			runCast(t, tc.args...).expect(tc.code, "stderr", tc.last)
		})
	}
}

// runInProcess runs `cast args...` as main would, in this process, and
// returns the exit status and what went to stderr. Only for arguments
// refused before the command starts anything.
func runInProcess(args ...string) (int, string) {
	var stderr bytes.Buffer
	old := flagOutput
	flagOutput = &stderr
	defer func() { flagOutput = old }()
	code := run(args, &stderr)
	return code, stderr.String()
}

// Every command and subcommand refuses an unknown flag with status 2 and
// names it last: none parses its flags around parseFlags. In this process
// (see TestCLIUsage).
func TestCLIEveryCommandRefusesUnknownFlag(t *testing.T) {
	var prefixes [][]string
	for name := range commands {
		switch name {
		case "wal":
			for _, s := range []string{"stat", "dump", "verify", "repair"} {
				prefixes = append(prefixes, []string{name, s})
			}
		case "replay":
			prefixes = append(prefixes, []string{name, "serve"}, []string{name, "tail"})
		case "tune":
			for _, s := range []string{"check", "apply", "undo"} {
				prefixes = append(prefixes, []string{name, s})
			}
		case "bench":
			for w := range benchWorkloads {
				if _, ok := suiteWorkloads[w]; ok {
					continue // passed through to cast-bench
				}
				prefixes = append(prefixes, []string{name, w})
			}
		default:
			prefixes = append(prefixes, []string{name})
		}
	}
	for _, p := range prefixes {
		args := append(append([]string{}, p...), "-no-such-flag")
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, stderr := runInProcess(args...)
			if last := childproc.LastLine(stderr); code != 2 || !regexp.MustCompile(`^cast .*flag provided but not defined: -no-such-flag$`).MatchString(last) {
				t.Fatalf("exit %d, last stderr line %q\n%s", code, last, stderr)
			}
		})
	}
}

// Ctrl-C while waiting for a sender: status 130, the reason last.
func TestCLIInterruptRecv(t *testing.T) {
	c := startCast(t, "", "recv", "-listen", "127.0.0.1:0", "-path", "udp", "-idle", "park")
	c.waitOutput(`listening on (\S+)`, hangBudget)
	c.signal(syscall.SIGINT)
	c.wait(hangBudget)
	c.expect(130, "stderr", `^cast recv: interrupted`)
}

// The classic commands default to the stop-and-wait tools' port 9002, so
// their documented `sender -addr 127.0.0.1:9002` finds a bare `cast
// receiver` (read from -h: a test must not bind a fixed port).
func TestCLIClassicDefaultPort(t *testing.T) {
	for _, tc := range []struct{ cmd, want string }{
		{"receiver", `(?m)^  -port int\n.*\(default 9002\)$`},
		{"sender", `(?m)^  -addr string\n.*\(default "127\.0\.0\.1:9002"\)$`},
		{"bandwidth", `(?m)^  -addr string\n.*\(default "127\.0\.0\.1:9002"\)$`},
	} {
		code, out := runInProcess(tc.cmd, "-h")
		if code != 0 || !regexp.MustCompile(tc.want).MatchString(out) {
			t.Errorf("cast %s -h: exit %d, want /%s/ in:\n%s", tc.cmd, code, tc.want, out)
		}
	}
}
