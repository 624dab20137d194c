package main

// Every event `cast recv -json` prints, its fields checked: each kind
// against the cast.Event it comes from (TestWriteEventFields), and in the
// cross-process runs against what the same output delivered around it
// (checkJSONTruth).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/walcast/walcast/cast"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/wire"
)

// eventJSONCases: an event of each kind `cast recv -json` prints, and
// the whole object it must print.
var eventJSONCases = []struct {
	e    cast.Event
	want map[string]any // the whole object
}{
	{cast.Event{Kind: cast.EventFaulted, Handled: true, Tip: 10, Outcome: protocol.Outcome{Kind: protocol.Faulted, LastDelivered: 10, GapStart: 11, GapEnd: 12, Cause: protocol.RetryBudget}},
		map[string]any{"event": "faulted", "last_delivered": 10, "gap_start": 11, "gap_end": 12, "cause": "retry_budget"}},
	{cast.Event{Kind: cast.EventFaulted, Outcome: protocol.Outcome{Kind: protocol.Faulted, LastDelivered: 7, GapStart: 8, GapEnd: 8, Cause: protocol.Silence}},
		map[string]any{"event": "faulted", "last_delivered": 7, "gap_start": 8, "gap_end": 8, "cause": "silence"}},
	{cast.Event{Kind: cast.EventReconnect, Outcome: protocol.Outcome{Kind: protocol.Reconnect, LastDelivered: 20, Seq: 5000}},
		map[string]any{"event": "reconnect", "last_delivered": 20, "seq": 5000}},
	{cast.Event{Kind: cast.EventSenderRestarted, Handled: true, Outcome: protocol.Outcome{Kind: protocol.SenderRestarted, LastDelivered: 30, Highest: 3}},
		map[string]any{"event": "sender_restarted", "last_delivered": 30, "highest": 3}},
	// The loop's Outcome is Live (LastDelivered 0) while the sender is
	// silent: last_delivered is the Consumer's tip.
	{cast.Event{Kind: cast.EventPeerSilent, Tip: 49960, Outcome: protocol.Outcome{Kind: protocol.Live}},
		map[string]any{"event": "peer_silent", "last_delivered": 49960}},
	{cast.Event{Kind: cast.EventSkip, Skip: protocol.SkipNotice{Skip: wire.Skip{Seq: 90, From: 80, Reason: wire.SkipRestart}, LostFrom: 80, LostTo: 85}},
		map[string]any{"event": "skip", "seq": 90, "from": 80, "reason": "restart", "lost_from": 80, "lost_to": 85}},
	{cast.Event{Kind: cast.EventSkip, Skip: protocol.SkipNotice{Skip: wire.Skip{Seq: 9, From: 4, Reason: wire.SkipRepair}}},
		map[string]any{"event": "skip", "seq": 9, "from": 4, "reason": "repair", "lost_from": 0, "lost_to": 0}},
	{cast.Event{Kind: cast.EventLateStart, Seq: 1234},
		map[string]any{"event": "late_start", "seq": 1234}},
	{cast.Event{Kind: cast.EventEnded, Seq: 5000},
		map[string]any{"event": "ended", "seq": 5000}},
	{cast.Event{Kind: cast.EventCaughtUp, From: 1001, To: 3000, Records: 2000},
		map[string]any{"event": "caught_up", "from": 1001, "to": 3000, "records": 2000}},
	{cast.Event{Kind: cast.EventCaughtUp, Bootstrap: true, From: 1, To: 94, Records: 94},
		map[string]any{"event": "caught_up", "from": 1, "to": 94, "records": 94}},
	{cast.Event{Kind: cast.EventError, Err: errors.New(`cast: consumer: recv: "x"`)},
		map[string]any{"event": "error", "error": `cast: consumer: recv: "x"`}},
	{cast.Event{Kind: cast.EventKeyUnknown, Err: fmt.Errorf("%w: a datagram is tagged with key id %d, which this consumer does not hold", cast.ErrKeyFile, 7)},
		map[string]any{"event": "key_unknown", "error": cast.ErrKeyFile.Error() + ": a datagram is tagged with key id 7, which this consumer does not hold"}},
}

func TestWriteEventFields(t *testing.T) {
	cases := eventJSONCases
	tested := map[cast.EventKind]bool{}
	for _, tc := range cases {
		tested[tc.e.Kind] = true
	}
	// Every kind -json prints is in the table above: a new event line
	// cannot go untested.
	for k := cast.EventKind(1); !strings.HasPrefix(k.String(), "EventKind("); k++ {
		var b bytes.Buffer
		writeEvent(&b, cast.Event{Kind: k, Err: errors.New("x"), Outcome: protocol.Outcome{Kind: protocol.Faulted}})
		if b.Len() != 0 && !tested[k] {
			t.Errorf("%v prints %q but has no case in TestWriteEventFields", k, b.String())
		}
	}
	for _, tc := range cases {
		var b bytes.Buffer
		writeEvent(&b, tc.e)
		var got map[string]any
		if err := json.Unmarshal(b.Bytes(), &got); err != nil || strings.Count(b.String(), "\n") != 1 {
			t.Fatalf("%v: %q is not one JSON line: %v", tc.e.Kind, b.String(), err)
		}
		want := map[string]any{}
		for k, v := range tc.want {
			if n, ok := v.(int); ok {
				want[k] = float64(n)
			} else {
				want[k] = v
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%v: got %v, want %v", tc.e.Kind, got, want)
		}
		if got["event"] != tc.e.Kind.String() {
			t.Errorf("%v printed as %q: the JSON name is the kind's", tc.e.Kind, got["event"])
		}
	}
	// What -json does not name prints nothing.
	for _, k := range []cast.EventKind{cast.EventPeerHeard, cast.EventLive, cast.EventCatchingUp, cast.EventSenderFound} {
		var b bytes.Buffer
		writeEvent(&b, cast.Event{Kind: k})
		if b.Len() != 0 {
			t.Errorf("%v printed %q", k, b.String())
		}
	}
	var b bytes.Buffer
	writeEvent(&b, cast.Event{Kind: cast.EventCaughtUp, Bootstrap: true, From: 1, To: 0})
	if b.Len() != 0 {
		t.Errorf("an empty bootstrap catch-up printed %q", b.String())
	}
}

// checkJSONTruth walks `cast recv -json` output and checks each event's
// fields against the records the same output delivered: last_delivered
// is the last seq printed before the event, a fault's gap lies past it, a reconnect's seq is past it, late_start names the next
// record, ended the last, caught_up the records it brought. It returns
// the events seen by name.
//
// TestCLIRecvJSONPeerSilent checks peer_silent after a sender killed
// past seq 1000: its last_delivered is the tip, not the loop's 0.
func checkJSONTruth(t *testing.T, out string) map[string]int {
	t.Helper()
	seen := map[string]int{}
	var last uint64     // last record seq printed (or Skip marker applied)
	var wantNext uint64 // late_start: the next record's seq
	type jump struct{ at, seqs uint64 }
	var jumps []jump // per skip: its seq, and the seqs it moved past with no line
	for i, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %d %q: %v", i, l, err)
		}
		num := func(k string) uint64 {
			v, ok := m[k].(float64)
			if !ok {
				t.Fatalf("line %d %q: no number %q", i, l, k)
			}
			return uint64(v)
		}
		ev, isEvent := m["event"].(string)
		if !isEvent {
			seq := num("seq")
			if wantNext != 0 && seq != wantNext {
				t.Fatalf("line %d: late_start said %d, the next record is %d", i, wantNext, seq)
			}
			wantNext = 0
			last = seq
			continue
		}
		seen[ev]++
		bad := func(f string, a ...any) { t.Fatalf("line %d %q: %s", i, l, fmt.Sprintf(f, a...)) }
		switch ev {
		case "faulted":
			// The gap given up on lies past what was delivered; it need not
			// start right after it (each NAKed run keeps its own budget).
			if num("last_delivered") != last || num("gap_start") <= last || num("gap_end") < num("gap_start") {
				bad("want last_delivered %d and a gap past it", last)
			}
		case "reconnect":
			if num("last_delivered") != last || num("seq") <= last {
				bad("want last_delivered %d and a seq past it", last)
			}
		case "sender_restarted", "peer_silent":
			if num("last_delivered") != last {
				bad("want last_delivered %d", last)
			}
		case "late_start":
			wantNext = num("seq")
		case "ended":
			if num("seq") != last {
				bad("want the stream's end at the last record, %d", last)
			}
		case "caught_up":
			// Its records come before it, in order (the caller checks the
			// order): the last is its "to". A Skip marker it brought counts
			// as one record and stands for the seqs it moved past.
			from, to := num("from"), num("to")
			want := to - from + 1
			for _, j := range jumps {
				if j.at >= from && j.at <= to {
					want -= j.seqs
				}
			}
			if to != last || from > to || num("records") != want {
				bad("the records before it end at %d", last)
			}
		case "skip":
			// The marker stands for the seqs up to it.
			if seq := num("seq"); seq > last {
				jumps = append(jumps, jump{seq, seq - 1 - last})
				last = seq
			}
		}
	}
	return seen
}

// TestCLIRecvJSONPeerSilent: a receiver whose sender is killed mid-stream
// (no end marker) reports the silence with the seq it really delivered
// last, then exits 1.
func TestCLIRecvJSONPeerSilent(t *testing.T) {
	r := startCast(t, "", "recv", "-listen", "127.0.0.1:0", "-n", "100000", "-json")
	addr := r.listenAddr()
	s := startCast(t, "", "send", "-to", addr, "-n", "100000", "-rate", "4000")
	r.waitOutput(`"seq":(1000),`, hangBudget)
	s.Cmd.Process.Kill()
	s.wait(hangBudget)
	r.wait(hangBudget)
	r.expect(1, "stderr", `^cast recv: the sender went silent after \d+ of 100000 records$`)
	seen := checkJSONTruth(t, r.Stdout.String()) // last_delivered is the last seq printed
	if seen["peer_silent"] != 1 {
		t.Fatalf("want one peer_silent (events %v):\n%s", seen, r.Stderr.String())
	}
	if strings.Contains(r.Stdout.String(), `"last_delivered":0}`) {
		t.Fatal("peer_silent says nothing was delivered")
	}
}

// TestRecvJSONDocs: docs/cli.md § `cast recv -json` lists every event
// recv prints with exactly the fields it prints.
func TestRecvJSONDocs(t *testing.T) {
	b, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)\n## `cast recv -json`\n(.*?)\n## ").FindSubmatch(b)
	if m == nil {
		t.Fatal("docs/cli.md: no § `cast recv -json`")
	}
	documented := map[string]string{}
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| ([^|]*) \\|")
	for _, r := range row.FindAllSubmatch(m[1], -1) {
		var fields []string
		for _, f := range regexp.MustCompile("`([a-z_]+)`").FindAllSubmatch(r[2], -1) {
			fields = append(fields, string(f[1]))
		}
		sort.Strings(fields)
		documented[string(r[1])] = strings.Join(fields, " ")
	}
	printed := map[string]string{}
	for _, tc := range eventJSONCases {
		var fields []string
		for k := range tc.want {
			if k != "event" {
				fields = append(fields, k)
			}
		}
		sort.Strings(fields)
		printed[tc.want["event"].(string)] = strings.Join(fields, " ")
	}
	if !reflect.DeepEqual(documented, printed) {
		t.Errorf("docs/cli.md § `cast recv -json` lists\n%v\nrecv prints\n%v", documented, printed)
	}
}
