package main

import (
	"net/netip"
	"regexp"
	"testing"
	"time"
)

// TestCLISendToReceiverWithoutStatus: `cast send` towards `cast recv
// -nostatus` (the reference receiver's bytes: it never sends Status) does
// not hold its first window for InitialWait (1 s) before seq 2049; towards
// a walcast receiver it negotiates flow control as before. The bound is
// half of InitialWait, generous for a loaded machine (the virtual-clock
// TestInitialWindowLearnsNoStatus checks the 10 ms target exactly, and
// `cast bench latency -nostatus` measures it over real processes); the
// largest gap and where it was are logged.
func TestCLISendToReceiverWithoutStatus(t *testing.T) {
	const n = "4000"
	for _, noStatus := range []bool{true, false} {
		name := "walcast receiver"
		if noStatus {
			name = "recv -nostatus"
		}
		t.Run(name, func(t *testing.T) {
			addr := deadPort(t) // a free port for the receiver
			tap, err := newStartTap()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(tap.close)
			tap.relay(netip.MustParseAddrPort(addr))
			args := []string{"recv", "-listen", addr, "-peer", tap.recvSide(), "-n", n}
			if noStatus {
				args = append(args, "-nostatus")
			}
			r := startCast(t, "", args...)
			r.waitOutput(`receiving on (\S+) `, hangBudget)
			// Paced, so that the tap (a plain Go relay) loses nothing
			// itself: 2048 records take about 100 ms.
			s := runCast(t, "send", "-to", tap.senderSide(), "-bind", "127.0.0.1:0", "-n", n, "-rate", "20000", "-linger", "2s")
			if s.Code() != 0 {
				t.Fatalf("send exited %d\n%s", s.Code(), s.Dump())
			}
			r.wait(hangBudget)
			r.expect(0, "stdout", `^outcome: live$`)
			g, err := tap.gapBefore(2049)
			if err != nil {
				t.Fatal(err)
			}
			t.Log(g)
			if noStatus {
				if g.statuses != 0 || g.probes != 0 {
					t.Fatalf("recv -nostatus: %d Status, %d probes on the wire", g.statuses, g.probes)
				}
				if g.gap >= 500*time.Millisecond {
					t.Fatalf("the sender held its first window %v before seq %d for a Status that never comes", g.gap, g.before)
				}
				return
			}
			if g.statuses == 0 || g.probes == 0 || !regexp.MustCompile(`flow control held the sender back \d+ times`).MatchString(s.Stdout.String()) {
				t.Fatalf("walcast receiver not under flow control: %d Status, %d probes\n%s", g.statuses, g.probes, s.Stdout.String())
			}
		})
	}
}
