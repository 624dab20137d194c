package main

// Real-process cases of the streaming commands: exit status, last line,
// nothing hangs. Rates stay modest so a loaded 2-vCPU machine keeps up.

import (
	"image/png"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// listenAddr waits for the child's "listening on HOST:PORT" and returns
// 127.0.0.1:PORT.
func (c *child) listenAddr() string {
	c.T.Helper()
	a := c.waitOutput(`listening on (\S+?),? `, hangBudget)
	ap, err := netip.ParseAddrPort(a)
	if err != nil {
		c.T.Fatalf("listening on %q: %v", a, err)
	}
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), ap.Port()).String()
}

// deadPort returns a loopback address nobody listens on (a port the
// kernel handed out and that was closed again).
func deadPort(t *testing.T) string {
	t.Helper()
	nf := netFlags{path: "udp", pin: -1, idle: "spin", batch: 64}
	p, err := nf.open(netip.MustParseAddrPort("127.0.0.1:0"), netip.AddrPort{})
	if err != nil {
		t.Fatal(err)
	}
	a := p.LocalAddr().String()
	p.Close()
	return a
}

func TestCLISendRecv(t *testing.T) {
	r := startCast(t, "", "recv", "-listen", "127.0.0.1:0", "-n", "5000")
	addr := r.listenAddr()
	s := runCast(t, "send", "-to", addr, "-bind", "127.0.0.1:0", "-n", "5000", "-rate", "20000", "-linger", "1s")
	s.expect(0, "stdout", `^naks \d+, retransmits`)
	r.wait(hangBudget)
	r.expect(0, "stdout", `^outcome: live$`)
	if !strings.Contains(r.Stdout.String(), "received 5000 records (seq 1..5000, in order: true)") {
		t.Fatalf("recv:\n%s", r.Stdout.String())
	}
}

// Nobody listening: the ICMP port unreachable the kernel reports says so.
func TestCLISendNobodyListening(t *testing.T) {
	for _, path := range []string{"udp", "mmsg"} {
		t.Run(path, func(t *testing.T) {
			runCast(t, "send", "-to", deadPort(t), "-n", "2000", "-path", path).
				expect(1, "stderr", `^cast send: nobody is listening at 127\.0\.0\.1:\d+: \d+ datagrams came back refused`)
		})
	}
}

// The receiver is gone mid-stream (killed): the sender exits 3.
func TestCLISendReceiverGone(t *testing.T) {
	r := startCast(t, "", "recv", "-listen", "127.0.0.1:0", "-json")
	addr := r.listenAddr()
	s := startCast(t, "", "send", "-to", addr, "-n", "20000", "-rate", "4000")
	r.waitOutput(`"seq":(2000),`, hangBudget) // half a second of a listening receiver
	r.Cmd.Process.Kill()
	r.wait(hangBudget)
	s.wait(hangBudget)
	s.expect(3, "stderr", `^cast send: the receiver at 127\.0\.0\.1:\d+ went away while records were being sent`)
}

// A receiver asked for more than the sender sends exits 1 once the
// sender went silent.
func TestCLIRecvSenderSilent(t *testing.T) {
	r := startCast(t, "", "recv", "-listen", "127.0.0.1:0", "-n", "3000")
	addr := r.listenAddr()
	runCast(t, "send", "-to", addr, "-n", "1000", "-rate", "20000", "-linger", "1s").expect(0, "stdout", `^naks`)
	r.wait(hangBudget)
	r.expect(1, "stderr", `^cast recv: the sender went silent after 1000 of 3000 records$`)
}

// A receiver that loses almost everything faults: exit 3 and the outcome;
// its sender learns it from the receiver's Status and exits 3 too.
func TestCLIRecvFaulted(t *testing.T) {
	r := startCast(t, "", "recv", "-listen", "127.0.0.1:0", "-drop", "95", "-json")
	addr := r.listenAddr()
	s := startCast(t, "", "send", "-to", addr, "-n", "2000", "-rate", "2000", "-linger", "30s")
	r.wait(hangBudget)
	r.expect(3, "stderr", `^cast recv: stopped after \d+ records: receiver (faulted|must reconnect)`)
	if seen := checkJSONTruth(t, r.Stdout.String()); seen["faulted"]+seen["reconnect"] != 1 {
		t.Fatalf("want one faulted or reconnect event, saw %v:\n%s", seen, r.Stdout.String())
	}
	s.wait(hangBudget)
	s.expect(3, "stderr", `^cast send: the receiver at 127\.0\.0\.1:\d+ (reported (faulted|reconnect)|left|went away)`)
}

// 5 % loss at the receiver (the issue saw 3 of 10 000 delivered and exit
// 0): flow control keeps the sender within the receiver's window, every
// message arrives, both exit 0.
func TestCLIBandwidth(t *testing.T) {
	r := startCast(t, "", "bandwidth", "-mode", "receiver", "-addr", "127.0.0.1:0", "-n", "10000", "-drop", "5")
	addr := r.listenAddr()
	s := runCast(t, "bandwidth", "-mode", "sender", "-addr", addr, "-n", "10000", "-rate", "20000")
	s.expect(0, "stdout", `^naks \d+, retransmits \d+, over mmsg`)
	r.wait(hangBudget)
	r.expect(0, "stdout", `^gaps NAKed \d+, dropped by -drop [1-9]\d*, over mmsg`)
	if !regexp.MustCompile(`received 10000 messages of 1427 bytes in [0-9.]+ s\nthroughput: [0-9.]+ MB/s`).MatchString(r.Stdout.String()) {
		t.Fatalf("receiver:\n%s", r.Stdout.String())
	}
}

// A bandwidth receiver asked for more than the sender sends prints what
// it got and exits 1 once the sender went silent.
func TestCLIBandwidthFewerThanAsked(t *testing.T) {
	r := startCast(t, "", "bandwidth", "-mode", "receiver", "-addr", "127.0.0.1:0", "-n", "3000")
	addr := r.listenAddr()
	runCast(t, "bandwidth", "-mode", "sender", "-addr", addr, "-n", "1000", "-rate", "20000").expect(0, "stdout", `^naks \d+, retransmits`)
	r.wait(hangBudget)
	r.expect(1, "stderr", `^cast bandwidth: the sender went silent after 1000 of 3000 records$`)
	if !strings.Contains(r.Stdout.String(), "received 1000 messages of 1427 bytes") {
		t.Fatalf("receiver:\n%s", r.Stdout.String())
	}
}

func TestCLIBandwidthNobodyListening(t *testing.T) {
	runCast(t, "bandwidth", "-mode", "sender", "-addr", deadPort(t), "-n", "5000").
		expect(1, "stderr", `^cast bandwidth: nobody is listening at`)
}

// Ctrl-C before any data: no NaN, exit 130.
func TestCLIBandwidthInterruptedBeforeData(t *testing.T) {
	r := startCast(t, "", "bandwidth", "-mode", "receiver", "-addr", "127.0.0.1:0", "-idle", "park")
	r.listenAddr()
	r.signal(syscall.SIGINT)
	r.wait(hangBudget)
	r.expect(130, "stderr", `^cast bandwidth: interrupted: received 0 of 100000 records$`)
	if out := r.Stdout.String(); strings.Contains(out, "NaN") || !strings.Contains(out, "throughput: none") {
		t.Fatalf("stdout:\n%s", out)
	}
}

// The classic pair: a receiver serving two senders one after another,
// per-message lines, CSV and plot; RTT timed from each first send.
func TestCLIClassicPair(t *testing.T) {
	dir := t.TempDir()
	r := startCast(t, dir, "receiver", "-port", "0", "-senders", "2", "-drop", "10")
	addr := r.listenAddr()
	csvPath, pngPath := filepath.Join(dir, "rtt.csv"), filepath.Join(dir, "rtt.png")
	s1 := runCast(t, "sender", "-addr", addr, "-n", "60", "-size", "1", "-csv", csvPath, "-plot", pngPath)
	s1.expect(0, "stdout", `^throughput = \d+ msg/s`)
	if got := strings.Count(s1.Stdout.String(), "24 bytes to "+addr+": seq="); got != 60 {
		t.Fatalf("%d per-message lines, want 60:\n%s", got, s1.Stdout.String())
	}
	if !strings.Contains(s1.Stdout.String(), "60 messages sent, 60 echoed, ") {
		t.Fatalf("summary:\n%s", s1.Stdout.String())
	}
	s2 := runCast(t, "sender", "-addr", addr, "-n", "30", "-q")
	s2.expect(0, "stdout", `^throughput = `)
	r.wait(hangBudget)
	r.expect(0, "stdout", `^all 2 senders: received 90, dropped \d+, total \d+$`)
	if !strings.Contains(r.Stdout.String(), "received: 60\n") || !strings.Contains(r.Stdout.String(), "received: 30\n") {
		t.Fatalf("receiver:\n%s", r.Stdout.String())
	}

	// CSV: one row per message, in order, the next message leaving after
	// the previous echo (the RTTs never overlap). Each RTT spans from the
	// message's first send to its echo, so a repaired message's includes
	// the wait for the loss to be found (tail-loss probe, NAK, repair):
	// repaired messages take longer than the others. (Timed from the
	// retransmission instead, they would not; the sum of RTTs against the
	// run's length is no test since tail-loss probes: under load the
	// sender's own time between messages is as long as the RTTs.)
	b, err := os.ReadFile(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(rows) != 61 || rows[0] != "seq,bytes,sent_s,rtt_us,retransmitted" {
		t.Fatalf("csv: %d rows, header %q", len(rows), rows[0])
	}
	var end float64
	var plain, repaired []float64
	for i, row := range rows[1:] {
		f := strings.Split(row, ",")
		if len(f) != 5 || f[0] != strconv.Itoa(i+1) || f[1] != "24" || (f[4] != "true" && f[4] != "false") {
			t.Fatalf("csv row %d: %q", i+1, row)
		}
		sent, _ := strconv.ParseFloat(f[2], 64)
		rtt, _ := strconv.ParseFloat(f[3], 64)
		if sent+2e-6 < end { // the CSV rounds to 1 µs
			t.Fatalf("csv row %d: sent at %.6f s, before the previous echo at %.6f s", i+1, sent, end)
		}
		end = sent + rtt/1e6
		if f[4] == "true" {
			repaired = append(repaired, rtt)
		} else {
			plain = append(plain, rtt)
		}
	}
	median := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	// 10 % drop of 60 pings repairs ~6; with fewer than 3 the medians say little.
	if len(repaired) >= 3 && len(plain) >= 3 && median(repaired) <= median(plain) {
		t.Fatalf("repaired messages' median RTT %.1f µs ≤ the others' %.1f µs: not timed from each first send\n%s", median(repaired), median(plain), b)
	}
	f, err := os.Open(pngPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil || img.Bounds().Dx() != plotW {
		t.Fatalf("plot: %v %v", err, img)
	}
}

// Ctrl-C in a long classic run: lines were streamed before the end, the
// summary counts what was really sent, exit 130.
func TestCLIClassicSenderInterrupted(t *testing.T) {
	r := startCast(t, "", "receiver", "-port", "0")
	addr := r.listenAddr()
	s := startCast(t, "", "sender", "-addr", addr, "-n", "1000000")
	s.waitOutput(`(seq=20 rtt)`, hangBudget)
	s.signal(syscall.SIGINT)
	s.wait(hangBudget)
	s.expect(130, "stderr", `^cast sender: interrupted: \d+ of 1000000 messages echoed$`)
	m := regexp.MustCompile(`(\d+) messages sent, (\d+) echoed`).FindStringSubmatch(s.Stdout.String())
	if m == nil {
		t.Fatalf("no summary:\n%s", s.Stdout.String())
	}
	sent, _ := strconv.Atoi(m[1])
	echoed, _ := strconv.Atoi(m[2])
	if sent < 20 || sent > echoed+1 {
		t.Fatalf("summary says %d sent, %d echoed", sent, echoed)
	}
	r.signal(syscall.SIGINT)
	r.wait(hangBudget)
	r.expect(130, "stderr", `^cast receiver: interrupted: served 1 senders`)
}

func TestCLIClassicSenderNobodyListening(t *testing.T) {
	runCast(t, "sender", "-addr", deadPort(t), "-n", "10").
		expect(1, "stderr", "^cast sender: nobody is listening at 127\\.0\\.0\\.1:\\d+ \\(ICMP port unreachable\\): is `cast receiver` running\\?$")
}

// The stop-and-wait sizes 0..1427 are taken (TestCLIUsage has the range
// errors) with casting's header counted in.
func TestCLIClassicSizes(t *testing.T) {
	if classicPayload(0) != 8 || classicPayload(1427) != 1411 {
		t.Fatal("classicPayload")
	}
}

// The README's replay flow: `cast send -wal` writes stream 1, `cast
// replay serve` serves it, `cast replay tail` (stream 1 by default)
// catches up; a stream that is not there is named with the server's
// answer; an endpoint that is down is named with the connection error;
// both give up after -wait; Ctrl-C exits 130.
func TestCLIReplayTail(t *testing.T) {
	dir := t.TempDir()
	walDir := filepath.Join(dir, "wal")
	r := startCast(t, dir, "recv", "-listen", "127.0.0.1:0", "-n", "500")
	addr := r.listenAddr()
	runCast(t, "send", "-to", addr, "-n", "500", "-rate", "20000", "-wal", walDir, "-linger", "1s").expect(0, "stdout", `^wal .*: durable through seq 500$`)
	r.wait(hangBudget)

	srv := startCast(t, dir, "replay", "serve", "-wal", walDir, "-listen", "127.0.0.1:0", "-plaintext")
	ep := srv.waitOutput(`on (127\.0\.0\.1:\d+) \(`, hangBudget)

	tail := runCast(t, "replay", "tail", "-endpoints", ep, "-from", "1", "-caught-up", "-plaintext")
	tail.expect(0, "stderr", `^500 records, tip 500$`)
	if lines := strings.Count(tail.Stdout.String(), "\n"); lines != 500 || !strings.HasPrefix(tail.Stdout.String(), "1 1 128\n") {
		t.Fatalf("tail printed %d lines:\n%.200s", lines, tail.Stdout.String())
	}

	runCast(t, "replay", "tail", "-endpoints", ep, "-stream", "2", "-plaintext", "-wait", "1s").
		expect(1, "stderr", `^cast replay: gave up after 1s without an endpoint serving the stream .*: 127\.0\.0\.1:\d+ holds nothing of stream 2 \(not available\)$`)
	runCast(t, "replay", "tail", "-endpoints", deadTCP(t), "-plaintext", "-wait", "1s").
		expect(1, "stderr", `^cast replay: gave up after 1s .*connection refused$`)

	// Following the live tail until Ctrl-C.
	f := startCast(t, dir, "replay", "tail", "-endpoints", ep, "-from", "400", "-plaintext")
	f.waitOutput(`(500 1 128)`, hangBudget)
	f.signal(syscall.SIGINT)
	f.wait(hangBudget)
	f.expect(130, "stderr", `^cast replay: interrupted: 101 records, tip 500$`)
	srv.signal(syscall.SIGINT)
	srv.wait(hangBudget)
	srv.expect(130, "stderr", `^cast replay: interrupted: served \d+ connections, \d+ records$`)
}

// deadTCP returns a loopback TCP address nobody listens on.
func deadTCP(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().String()
	ln.Close()
	return a
}

// shape reduces a line of demo output to its format: numbers, on/off
// switches, the loops' idle strategies and pins, the reason of the
// layout (it follows the CPU count) and the temporary WAL path are
// placeholders.
func shape(line string) string {
	line = regexp.MustCompile(`/tmp/walcast-demo-\S*`).ReplaceAllString(line, "PATH")
	line = regexp.MustCompile(`(CPUs: ).*$`).ReplaceAllString(line, "${1}WHY")
	line = regexp.MustCompile(`pins (none|-?\d+,-?\d+)`).ReplaceAllString(line, "pins P")
	line = regexp.MustCompile(`-?\d[\d.,]*`).ReplaceAllString(line, "N")
	return regexp.MustCompile(`\b(on|off|spin|park)\b`).ReplaceAllString(line, "X")
}

// docs/bench.md § The demo shows what `make demo` prints: its block must
// have the format `cast demo` really prints (line for line, numbers
// aside), and a demo whose stderr is a pipe writes plain progress lines,
// no carriage returns.
func TestCLIDemoMatchesDocs(t *testing.T) {
	b, err := os.ReadFile("../../docs/bench.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)\n## The demo: `make demo`\n.*?\n```\n(.*?)```").FindSubmatch(b)
	if m == nil {
		t.Fatal("docs/bench.md: no output block in § The demo")
	}
	var want []string
	for _, l := range strings.Split(strings.TrimSpace(string(m[1])), "\n") {
		want = append(want, shape(l))
	}
	// No loss: this checks the format, and a lossless run cannot stall on a repair.
	d := runCast(t, "demo", "-n", "20000", "-rate", "20000", "-drop", "0", "-pings", "300", "-timeout", "80s")
	d.expect(0, "stdout", `^RTT `)
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(d.Stdout.String()), "\n") {
		if !strings.HasPrefix(l, "cold reads") { // printed only when NAKs were served from disk
			got = append(got, shape(l))
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("docs/bench.md's demo block and `cast demo` output differ in format:\ndocs/bench.md:\n%s\n\ncast demo:\n%s", strings.Join(want, "\n"), strings.Join(got, "\n"))
	}
	if strings.Contains(d.Stderr.String(), "\r") || !strings.Contains(d.Stderr.String(), "] 100% 20000/20000") {
		t.Fatalf("progress off a terminal: %q", d.Stderr.String())
	}
}

// A demo whose receiver loses almost everything faults: exit 3, the
// outcome as the last line, the summary printed before it.
func TestCLIDemoFaulted(t *testing.T) {
	d := runCast(t, "demo", "-n", "3000", "-rate", "10000", "-drop", "95", "-q", "-pings", "0", "-timeout", "60s")
	d.expect(3, "stderr", `^cast demo: receiver stopped: receiver (faulted \((retry budget|silence)\)|must reconnect): last delivered \d+, .* \(\d+ of 3000 records delivered\)$`)
	if !strings.Contains(d.Stdout.String(), "loss injected") {
		t.Fatalf("no summary before the reason:\n%s", d.Stdout.String())
	}
}

// A long benchmark prints each row as it finishes and, on Ctrl-C, what
// it measured (rows and the spread over them) before exiting 130. The
// casting row's 5,100 pings run well past the 2048-record window (the
// parked ping-pong once stalled there: cast.TestLoopPingPongBeyondWindow).
func TestCLIBenchRTTInterrupted(t *testing.T) {
	b := startCast(t, "", "bench", "rtt", "-n", "5000", "-warmup", "100", "-runs", "50", "-mode", "park", "-pin", "none")
	b.waitOutput(`(?m)^  1 (casting-udp) `, hangBudget)
	b.signal(syscall.SIGINT)
	b.wait(hangBudget)
	b.expect(130, "stderr", `^cast bench: interrupted: \d+ of \d+ rows measured$`)
	out := b.Stdout.String()
	if !strings.HasPrefix(out, "rtt: 5000 round trips") || !strings.Contains(out, "over the runs, median (min–max)") || !strings.Contains(out, "  1 floor-loop ") {
		t.Fatalf("stdout:\n%s", out)
	}
	if strings.Contains(b.Stderr.String(), "\r") {
		t.Fatalf("carriage returns off a terminal:\n%q", b.Stderr.String())
	}
}

// cast echo is the RTT peer: a classic sender gets every echo; echo -n
// exits 0 once it echoed that many, and 130 on Ctrl-C before.
func TestCLIEcho(t *testing.T) {
	e := startCast(t, "", "echo", "-listen", "127.0.0.1:0", "-n", "40")
	addr := e.listenAddr()
	runCast(t, "sender", "-addr", addr, "-n", "40", "-q").expect(0, "stdout", `^throughput = `)
	e.wait(hangBudget)
	e.expect(0, "stdout", `^echoed 40 records \(0 could not be sent\)$`)

	e2 := startCast(t, "", "echo", "-listen", "127.0.0.1:0", "-n", "40", "-idle", "park")
	e2.listenAddr()
	e2.signal(syscall.SIGINT)
	e2.wait(hangBudget)
	e2.expect(130, "stderr", `^cast echo: interrupted: received 0 of 40 records$`)
}

// The classic receiver and sender in one process (the last session's
// known bug: they stalled after 2 messages), on both datapaths, spinning
// and parked.
func TestClassicPairInOneProcess(t *testing.T) {
	for _, idle := range []string{"spin", "park"} {
		for _, path := range []string{"udp", "mmsg"} {
			t.Run(idle+"/"+path, func(t *testing.T) {
				bound := make(chan netip.AddrPort, 1)
				receiverListening = func(a netip.AddrPort) { bound <- a }
				defer func() { receiverListening = nil }()
				done := make(chan int, 1)
				go func() {
					done <- run([]string{"receiver", "-port", "0", "-senders", "1", "-idle", idle, "-path", path}, io.Discard)
				}()
				var addr netip.AddrPort
				select {
				case addr = <-bound:
				case code := <-done:
					t.Fatalf("receiver exited %d before listening", code)
				}
				to := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), addr.Port()).String()
				if code := run([]string{"sender", "-addr", to, "-n", "50", "-q", "-idle", idle, "-path", path}, io.Discard); code != 0 {
					t.Fatalf("sender exited %d", code)
				}
				select {
				case code := <-done:
					if code != 0 {
						t.Fatalf("receiver exited %d", code)
					}
				case <-time.After(hangBudget):
					t.Fatal("receiver hung")
				}
			})
		}
	}
}
