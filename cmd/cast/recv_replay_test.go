//go:build !windows

package main

// `cast recv -replay`: TCP catch-up from `cast send -wal -replay` (the
// Producer's replay server on its WAL) when UDP alone cannot deliver the
// stream, across real processes.

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walcast/walcast/wal"
	"github.com/walcast/walcast/wire"
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

// TestCLIRecvReplayAfterSenderRestart: `cast send -wal DIR -replay ADDR`
// is killed (SIGKILL) mid-stream and started again on the same WAL,
// address and replay address, while `cast recv -replay` lacks records the
// log holds: it was stopped (SIGSTOP) long enough for the sender to drop
// it from flow control and run ahead, and the kernel dropped what its
// socket could not hold. (A receiver that lacks nothing durable needs no
// TCP: the restarted sender's Skip marker moves it past the seqs the
// crash left unused, over UDP.) It resumes while the sender is down —
// nobody answers its NAKs — and when the restarted sender's stream
// arrives, its Skip marker and records lie more than a reorder window
// ahead of what is missing: UDP cannot repair that, and the receiver
// catches up over TCP from the restarted sender's replay server (the
// records it lacks, the Skip marker, new records), then goes on over UDP
// until the sender ends the stream. Every record of the log is printed
// once, in order; a record printed that the log lacks lies in the lost
// range of the skip line that follows it; both exit 0. The receiver runs
// without -n: how many records the crash leaves in the log is not known
// in advance, and the sender's end of the stream ends the run.
func TestCLIRecvReplayAfterSenderRestart(t *testing.T) {
	const n2 = 20000 // records of the restarted run
	dir := t.TempDir()
	bind, port, ra := deadPort(t), deadPort(t), deadTCP(t)
	send := func(args ...string) *child {
		return startCast(t, "", append([]string{"send", "-to", port, "-bind", bind, "-wal", dir, "-replay", ra, "-plaintext"}, args...)...)
	}
	s1 := send("-n", "100000000", "-rate", "20000")
	s1.waitOutput(`serving catch-up of stream 1 on (\S+)`, hangBudget)
	// -path udp: no GRO, so the socket buffer holds one datagram per
	// entry and overflows within the stop. -silence 30s: the outage must
	// not fault the receiver before the restarted sender is heard.
	r := startCast(t, "", "recv", "-listen", port, "-peer", bind, "-replay", ra, "-plaintext", "-json", "-path", "udp",
		"-retries", "200", "-silence", "30s")
	r.waitOutput(`"seq":(3000),`, hangBudget)
	r.signal(syscall.SIGSTOP)
	// The sender drops the silent receiver after 1 s and runs ahead.
	time.Sleep(5 * time.Second)
	s1.Cmd.Process.Signal(syscall.SIGKILL)
	s1.wait(hangBudget)
	r.signal(syscall.SIGCONT)
	time.Sleep(time.Second) // the outage: no sender, no replay server
	s2 := send("-n", fmt.Sprint(n2), "-rate", "10000", "-linger", "60s", "-quiet", "60s")
	r.wait(hangBudget)
	s2.wait(hangBudget)
	if r.Code() != 0 || s2.Code() != 0 {
		t.Fatalf("recv exited %d, the restarted send %d\n%s", r.Code(), s2.Code(), r.Stderr.String()+s2.Dump())
	}
	if !strings.Contains(s2.Stderr.String(), "was not closed cleanly") {
		t.Fatalf("the restarted sender did not continue past a Skip marker:\n%s", s2.Dump())
	}
	out := r.Stdout.String()
	seen := checkJSONTruth(t, out)
	if seen["reconnect"]+seen["faulted"] == 0 || seen["skip"] == 0 || seen["ended"] != 1 {
		t.Fatalf("want an outcome UDP could not repair, a skip and the end: %v\n%s", seen, r.Stderr.String())
	}

	// Walk the output: records in order, each skip right after what it
	// covers, and the catch-up that followed the outcome brought the
	// Skip marker and records past it.
	type skip struct{ seq, from, lostFrom, lostTo uint64 }
	var skips []skip
	var printed []uint64
	var last, outcomeAt uint64
	caughtUpPast := false
	for i, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %d %q: %v", i, l, err)
		}
		num := func(k string) uint64 { v, _ := m[k].(float64); return uint64(v) }
		switch m["event"] {
		case nil:
			if seq := num("seq"); seq != last+1 {
				t.Fatalf("line %d: record %d after %d", i, seq, last)
			}
			last = num("seq")
			printed = append(printed, last)
		case "reconnect", "faulted":
			outcomeAt = last
		case "skip":
			sk := skip{num("seq"), num("from"), num("lost_from"), num("lost_to")}
			switch {
			case sk.from > last+1:
				t.Fatalf("line %d: skip from %d after record %d", i, sk.from, last)
			case last >= sk.from && (sk.lostFrom != sk.from || sk.lostTo != last):
				t.Fatalf("line %d: skip %+v after record %d: want lost %d…%d", i, sk, last, sk.from, last)
			case last < sk.from && sk.lostTo != 0:
				t.Fatalf("line %d: skip %+v after record %d: nothing delivered was lost", i, sk, last)
			}
			skips = append(skips, sk)
			last = sk.seq
		case "caught_up":
			if outcomeAt > 0 && num("from") == outcomeAt+1 && len(skips) > 0 && num("to") >= skips[len(skips)-1].seq {
				caughtUpPast = true
			}
		}
	}
	if !caughtUpPast {
		t.Fatalf("no caught_up from the tip at the outcome (%d) past the Skip marker %+v:\n%.3000s", outcomeAt, skips, out)
	}

	// Every record of the log was printed, once; a printed record the log
	// lacks lies in a skip's lost range.
	rd, err := wal.OpenReader(dir, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	inLog := map[uint64]bool{}
	var logged []uint64
	for {
		fr, err := rd.Next()
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if h, _ := wire.ParseHeader(fr); h.Type != wire.TypeSkip {
			seq := wire.Seq(fr[wire.HeaderSize:])
			inLog[seq] = true
			logged = append(logged, seq)
		}
	}
	k := 0
	for _, seq := range printed {
		if k < len(logged) && logged[k] == seq {
			k++
			continue
		}
		lost := false
		for _, sk := range skips {
			lost = lost || (seq >= sk.lostFrom && seq <= sk.lostTo)
		}
		if inLog[seq] || !lost {
			t.Fatalf("record %d printed out of the log's order or not in it, and no skip names it", seq)
		}
	}
	if k != len(logged) {
		t.Fatalf("%d of the log's %d records printed; the first missing is %d", k, len(logged), logged[k])
	}
	t.Logf("log %d records; printed %d; skips %+v; events %v", len(logged), len(printed), skips, seen)
}
