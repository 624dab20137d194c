//go:build !windows

package main

// `cast recv -replay`: TCP catch-up from `cast send -wal -replay` (the
// Producer's replay server on its WAL) when UDP alone cannot deliver the
// stream, across real processes.

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// replayPair starts `cast send -wal -replay` of n records at rate to a
// receiver port nobody listens on yet and returns the sender, its NAK
// address, the receiver's port and the replay server's address.
func replayPair(t *testing.T, n, rate int) (s *child, bind, port, replayAddr string) {
	t.Helper()
	bind, port = deadPort(t), deadPort(t)
	s = startCast(t, "", "send", "-to", port, "-bind", bind, "-n", fmt.Sprint(n), "-rate", fmt.Sprint(rate),
		"-wal", t.TempDir(), "-replay", "127.0.0.1:0", "-plaintext", "-linger", "60s", "-quiet", "60s")
	replayAddr = s.waitOutput(`serving catch-up of stream 1 on (\S+)`, hangBudget)
	return s, bind, port, replayAddr
}

// wantAll checks that recv delivered seqs 1..n once, in order, with a
// live outcome and some records over TCP, and that both exited 0.
func wantAll(t *testing.T, r, s *child, n int) {
	t.Helper()
	r.wait(hangBudget)
	s.wait(hangBudget)
	out := r.Stdout.String()
	if !strings.Contains(out, fmt.Sprintf("received %d records (seq 1..%d, in order: true)", n, n)) {
		t.Fatalf("recv did not deliver 1..%d in order:\n%s", n, r.Dump()+s.Dump())
	}
	m := regexp.MustCompile(`caught up over TCP: (\d+) records`).FindStringSubmatch(out)
	if m == nil || m[1] == "0" {
		t.Fatalf("nothing came over TCP:\n%s", r.Dump())
	}
	r.expect(0, "stdout", `^outcome: live$`)
	s.expect(0, "stdout", `^wal .*: durable through seq \d+$`)
	if !strings.Contains(s.Stdout.String(), fmt.Sprintf("delivered through seq %d;", n)) {
		t.Fatalf("the sender did not hear the receiver deliver everything:\n%s", s.Dump())
	}
}

// TestCLIRecvReplayLateStart: a receiver started when the stream is far
// more than a reorder window ahead would stop at once (reconnect); with
// -replay it catches up from seq 1 over TCP and goes on over UDP.
func TestCLIRecvReplayLateStart(t *testing.T) {
	const n = 20000
	s, bind, port, ra := replayPair(t, n, 5000)
	s.waitOutput(`sending (\d+) records`, hangBudget)
	time.Sleep(2 * time.Second) // thousands of records out, nobody listening
	r := startCast(t, "", "recv", "-listen", port, "-peer", bind, "-n", fmt.Sprint(n), "-replay", ra, "-plaintext", "-retries", "200", "-silence", "10s")
	wantAll(t, r, s, n)
}

// TestCLIRecvReplayAfterOutage: a receiver stopped (SIGSTOP) for longer
// (5 s) than the sender waits for it falls more than its window behind while
// the sender runs on; once it runs again, UDP cannot repair that gap and
// -replay catches up over TCP, then delivery goes on over UDP. The -json
// events say so (caught_up, from the receiver's tip + 1).
func TestCLIRecvReplayAfterOutage(t *testing.T) {
	const n = 200000
	s, bind, port, ra := replayPair(t, n, 20000)
	// -path udp: no GRO, so the socket buffer holds one datagram per
	// buffer entry and overflows within the stop.
	r := startCast(t, "", "recv", "-listen", port, "-peer", bind, "-n", fmt.Sprint(n), "-replay", ra, "-plaintext", "-json", "-path", "udp", "-retries", "200", "-silence", "10s")
	r.waitOutput(`"seq":(1000),`, hangBudget)
	r.signal(syscall.SIGSTOP)
	// The sender drops the silent receiver after 1 s and runs ahead; the
	// socket's buffer overflows: tens of thousands of records are lost.
	time.Sleep(5 * time.Second)
	r.signal(syscall.SIGCONT)
	r.wait(hangBudget)
	s.wait(hangBudget)
	out := r.Stdout.String()
	// The last caught_up is the one after the outage (a first one may be
	// the catch-up before going live: the sender started first).
	ms := regexp.MustCompile(`\{"event":"caught_up","from":(\d+),"to":(\d+),"records":(\d+)\}`).FindAllStringSubmatch(out, -1)
	if len(ms) == 0 {
		t.Fatalf("no caught_up event:\n%.2000s\n%s", out, r.Stderr.String()+s.Dump())
	}
	m := ms[len(ms)-1]
	from, _ := strconv.Atoi(m[1])
	to, _ := strconv.Atoi(m[2])
	recs, _ := strconv.Atoi(m[3])
	if from < 1000 || to < from || recs != to-from+1 {
		t.Fatalf("caught_up from %d to %d with %d records: want from > 1000 and to−from+1 records", from, to, recs)
	}
	if seen := checkJSONTruth(t, out); seen["reconnect"]+seen["faulted"] == 0 {
		t.Fatalf("no outcome before the catch-up: %v", seen)
	}
	// Every record once, in order, around the catch-up.
	next := 1
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(l, `{"seq":`) {
			if want := fmt.Sprintf(`{"seq":%d,`, next); !strings.HasPrefix(l, want) {
				t.Fatalf("record line %q, want seq %d", l, next)
			}
			next++
		}
	}
	if next != n+1 {
		t.Fatalf("%d records delivered, want %d", next-1, n)
	}
	if r.Code() != 0 || s.Code() != 0 {
		t.Fatalf("recv exited %d, send %d\n%s", r.Code(), s.Code(), r.Stderr.String()+s.Dump())
	}
}
