package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestSendRecvJSON runs `cast send` against the receiver of `cast recv
// -json` in one process and checks one JSON object per record, in order.
func TestSendRecvJSON(t *testing.T) {
	for _, path := range []string{"udp", "mmsg"} {
		t.Run(path, func(t *testing.T) {
			const n = 3000
			nf := netFlags{path: path, pin: -1, idle: "spin", batch: 64}
			rf := recvFlags{reorder: 8192, debounce: 20 * time.Millisecond, maxFrame: 1472}
			listen := netip.MustParseAddrPort("127.0.0.1:0")
			// Reserve a port for the receiver: open, note, close.
			p, err := nf.open(listen, netip.AddrPort{})
			if err != nil {
				t.Fatal(err)
			}
			addr := p.LocalAddr()
			p.Close()
			var buf bytes.Buffer
			w := bufio.NewWriter(&buf)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			type result struct {
				res recvResult
				err error
			}
			done := make(chan result, 1)
			go func() {
				r, err := receive(ctx, &nf, &rf, addr, netip.AddrPort{}, n, true, w, nil)
				done <- result{r, err}
			}()
			time.Sleep(50 * time.Millisecond)
			if code := run([]string{"send", "-to", addr.String(), "-bind", "127.0.0.1:0", "-n", fmt.Sprint(n), "-rate", "50000", "-path", path, "-linger", "1s"}, &bytes.Buffer{}); code != 0 {
				t.Fatalf("send exited %d", code)
			}
			r := <-done
			if r.err != nil {
				t.Fatal(r.err)
			}
			w.Flush()
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			if len(lines) != n || r.res.delivered != n || !r.res.inOrder {
				t.Fatalf("%d lines, %d delivered, in order %v", len(lines), r.res.delivered, r.res.inOrder)
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
