package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestSendRecvJSON runs `cast send` against `cast recv -json` (two
// processes) and checks one JSON object per record, in order. The
// receiver is listening before the sender starts (it says so on stderr):
// no reserved port to lose, no sleep to outrun on a loaded machine.
func TestSendRecvJSON(t *testing.T) {
	for _, path := range []string{"udp", "mmsg"} {
		t.Run(path, func(t *testing.T) {
			const n = 3000
			r := startCast(t, "", "recv", "-listen", "127.0.0.1:0", "-json", "-n", fmt.Sprint(n), "-path", path, "-debounce", "20ms", "-reorder", "8192")
			addr := r.listenAddr()
			s := runCast(t, "send", "-to", addr, "-bind", "127.0.0.1:0", "-n", fmt.Sprint(n), "-rate", "50000", "-path", path, "-linger", "1s")
			s.expect(0, "stdout", `^naks \d+, retransmits`)
			r.wait(hangBudget)
			r.expect(0, "stderr", `^receiving on `)
			checkJSONTruth(t, r.Stdout.String())
			lines := strings.Split(strings.TrimSpace(r.Stdout.String()), "\n")
			// The sender ends the stream after its last record; a receiver
			// that hears the marker before it stops says so last.
			if last := lines[len(lines)-1]; strings.Contains(last, `"event":"ended"`) {
				if last != fmt.Sprintf(`{"event":"ended","seq":%d}`, n) {
					t.Fatalf("last line %q, want the stream ended at seq %d", last, n)
				}
				lines = lines[:len(lines)-1]
			}
			if len(lines) != n {
				t.Fatalf("%d JSON lines, want %d\nstderr:\n%s", len(lines), n, r.Stderr.String())
			}
			for i, l := range lines {
				var rec struct{ Seq, Type, Len int }
				if err := json.Unmarshal([]byte(l), &rec); err != nil || rec.Seq != i+1 || rec.Type != 1 || rec.Len != 128 {
					t.Fatalf("line %d: %q (%v)", i, l, err)
				}
			}
		})
	}
}

func TestDemoSmall(t *testing.T) {
	if code := run([]string{"demo", "-n", "10000", "-rate", "10000", "-drop", "1", "-pings", "300", "-q", "-timeout", "60s"}, &bytes.Buffer{}); code != 0 {
		t.Fatalf("demo exited %d", code)
	}
}

func TestWriteEvent(t *testing.T) {
	var b bytes.Buffer
	writeEvent(&b, eventFaultedForTest())
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil || m["event"] != "faulted" || m["gap_start"].(float64) != 11 {
		t.Fatalf("%q %v", b.String(), err)
	}
}
