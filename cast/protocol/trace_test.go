package protocol

import (
	"bufio"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/wire"
)

// The wire traces in testdata/ were recorded from the Sender and Receiver
// as they were before Status (type 0x10) existed (commit 72d0b43). They
// are the reference's bytes: a peer that never speaks Status must keep
// seeing exactly them, datagram for datagram, at the same virtual times.
var updateTrace = flag.Bool("update-trace", false, "rewrite testdata/trace_*.txt (only ever from a commit before a wire change)")

// traceLink records every datagram offered to one direction of a link and
// drops some of them by content (seq, or NAK range, and how often that
// content was offered before), so that extra frames of another type do
// not shift which datagrams are lost.
type traceLink struct {
	p     *mem.Pair
	dir   string
	lines *[]string
	seen  map[string]int
	pct   uint64
}

func (tl *traceLink) script(_ int, b []byte) mem.Action {
	act := mem.Pass
	key := ""
	if h, p, _, err := wire.DecodeFrame(b); err == nil {
		switch {
		case h.Type == wire.TypeNak || h.Type == wire.TypeHeartbeat:
			key = fmt.Sprintf("%d/%x", h.Type, p[:16])
		case h.Type >= 0x10 && h.Type <= 0x1f:
			key = "" // walcast extensions: never dropped, so they shift nothing
		default:
			key = fmt.Sprintf("d/%d", wire.Seq(p))
		}
	}
	if key != "" {
		n := tl.seen[key]
		tl.seen[key] = n + 1
		if mix(key, n)%100 < tl.pct {
			act = mem.Drop
		}
	}
	mark := "+"
	if act == mem.Drop {
		mark = "-"
	}
	*tl.lines = append(*tl.lines, fmt.Sprintf("%s %d %s %s", tl.dir, tl.p.Clock.Now(), mark, hex.EncodeToString(b)))
	return act
}

// mix is FNV-1a over key and n: a fixed, content-keyed coin.
func mix(key string, n int) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h = (h ^ uint64(key[i])) * 1099511628211
	}
	h = (h ^ uint64(n)) * 1099511628211
	return h ^ h>>29
}

// traceRun plays a fixed script (bursts, loss both ways, idle periods
// with heartbeats, a lost tail) and returns the datagrams offered on each
// direction.
func traceRun(t *testing.T, o harnessOpt) (aToB, bToA []string) {
	h := newHarness(t, o)
	ab := &traceLink{p: h.p, dir: "A>B", lines: &aToB, seen: map[string]int{}, pct: 7}
	ba := &traceLink{p: h.p, dir: "B>A", lines: &bToA, seen: map[string]int{}, pct: 30}
	h.impairData(mem.Impairment{Script: ab.script})
	h.impairNaks(mem.Impairment{Script: ba.script})
	for burst := 0; burst < 12; burst++ {
		h.send(25)
		h.run(3*ms, ms)
	}
	h.run(350*ms, ms) // idle: heartbeats, re-NAKs on the clock
	for burst := 0; burst < 4; burst++ {
		h.send(10)
		h.run(ms, 100*1000)
	}
	h.run(400*ms, ms)
	if h.orderError != nil {
		t.Fatal(h.orderError)
	}
	return aToB, bToA
}

func traceFile(name string) string { return filepath.Join("testdata", "trace_"+name+".txt") }

func writeTrace(t *testing.T, name string, lines []string) {
	if err := os.MkdirAll("testdata", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(traceFile(name), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readTrace(t *testing.T, name string) []string {
	f, err := os.Open(traceFile(name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// compareTrace fails at the first datagram that differs from the golden
// trace.
func compareTrace(t *testing.T, name string, got []string) {
	t.Helper()
	want := readTrace(t, name)
	for i := 0; i < len(want) && i < len(got); i++ {
		if got[i] != want[i] {
			t.Fatalf("%s: datagram %d differs from the reference trace:\n got  %s\n want %s", name, i, got[i], want[i])
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d datagrams, reference trace has %d", name, len(got), len(want))
	}
}

// TestReferenceTraceRecorded records the traces (with -update-trace, from
// a commit before any wire change) and otherwise checks that the scenario
// still produces them between reference peers: a receiver that sends no
// Status, so the walcast sender never negotiates.
func TestReferenceTraceRecorded(t *testing.T) {
	o := defaultOpt()
	o.r.NoStatus = true
	ab, ba := traceRun(t, o)
	if len(ab) < 300 || len(ba) < 10 {
		t.Fatalf("trace too short: %d A>B, %d B>A", len(ab), len(ba))
	}
	if *updateTrace {
		writeTrace(t, "sender", ab)
		writeTrace(t, "receiver", ba)
		return
	}
	compareTrace(t, "sender", ab)
	compareTrace(t, "receiver", ba)
}

// TestReferenceTraceStatusIgnored: a walcast receiver that speaks Status
// to a sender that does not (NoFlowControl, as the reference ignores
// type 0x10): the sender's bytes are the reference's, and so are the
// receiver's once its Status frames are taken out — it never hears a
// probe, so it keeps the fixed timers.
func TestReferenceTraceStatusIgnored(t *testing.T) {
	o := defaultOpt()
	o.s.NoFlowControl = true
	ab, ba := traceRun(t, o)
	var naks []string
	statuses := 0
	for _, l := range ba {
		if f := strings.Fields(l); len(f) == 4 && strings.HasPrefix(f[3], "01001000") {
			statuses++
			continue
		}
		naks = append(naks, l)
	}
	if statuses < 10 {
		t.Fatalf("receiver sent %d Status frames", statuses)
	}
	compareTrace(t, "sender", ab)
	compareTrace(t, "receiver", naks)
}

// TestNegotiatedTraceDiffers guards the two tests above: between walcast
// peers the same script does produce other bytes (probes, Status).
func TestNegotiatedTraceDiffers(t *testing.T) {
	ab, _ := traceRun(t, defaultOpt())
	want := readTrace(t, "sender")
	same := len(ab) == len(want)
	for i := 0; same && i < len(ab); i++ {
		same = ab[i] == want[i]
	}
	if same {
		t.Fatal("negotiated peers produced the reference trace: the trace tests would not notice a change")
	}
}
