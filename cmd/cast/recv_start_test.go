package main

// The receiver's explicit start and how `cast recv` learns its peer,
// over real sockets and real processes.

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/cast"
	"github.com/walcast/walcast/wire"

	"github.com/walcast/walcast/datapath/udp"
)

// TestCLIRecvStartsAtSeq1UnderLoss: `cast recv -peer … -drop 30` against
// `cast send -n 2000 -rate 20000` delivers from seq 1, never from the
// first seq that happened to get through: the receiver expects seq 1
// from the outset and NAKs what it misses.
//
// The same runs check `cast send`'s verdict: a receiver that NAKed up to
// its last record and then exited having everything is not one that
// "went away while it was still asking for repairs". The sender takes the
// receiver's own word (its Status: every record delivered) and exits 0,
// by itself.
func TestCLIRecvStartsAtSeq1UnderLoss(t *testing.T) {
	runs := 20
	if raceEnabled {
		runs = 4
	}
	for run := 0; run < runs; run++ {
		bind, addr := deadPort(t), deadPort(t) // the sender's NAK address is named to the receiver
		// -retries and -silence give a starved sender 10 s (a loaded
		// 2-vCPU machine was seen to run a spinning sender loop 1 451
		// times in 2.5 s); the default budgets are the protocol's.
		r := startCast(t, "", "recv", "-listen", addr, "-peer", bind, "-drop", "30", "-n", "2000", "-retries", "200", "-silence", "10s")
		r.waitOutput(`receiving on (\S+)`, hangBudget)
		// The sender serves NAKs until the receiver reports every record
		// delivered (-linger is only the upper bound: a loaded machine may
		// not run the receiver for seconds), then ends on its own.
		s := startCast(t, "", "send", "-to", addr, "-bind", bind, "-n", "2000", "-rate", "20000", "-linger", "60s", "-quiet", "60s")
		r.wait(hangBudget)
		s.wait(hangBudget)
		if !strings.Contains(r.Stdout.String(), "received 2000 records (seq 1..2000, in order: true)") {
			t.Fatalf("run %d (recv %s, send %s):\n%s", run, addr, bind, r.Dump()+s.Dump())
		}
		r.expect(0, "stdout", `^outcome: live$`)
		s.expect(0, "stdout", `^naks \d+, retransmits`)
		if !regexp.MustCompile(`(?m)^receiver 127\.0\.0\.1:\d+ delivered through seq 2000;`).MatchString(s.Stdout.String()) {
			t.Fatalf("run %d: the sender did not hear the receiver's last word:\n%s", run, s.Dump())
		}
	}
}

// TestCLIRecvFromNow: a receiver started while the stream runs, with -from
// now, reports where delivery began (late_start) and delivers from there
// in order; the default start would have NAKed from seq 1.
func TestCLIRecvFromNow(t *testing.T) {
	bind := deadPort(t)
	port := deadPort(t)
	s := startCast(t, "", "send", "-to", port, "-bind", bind, "-n", "40000", "-rate", "10000", "-linger", "1s")
	s.waitOutput(`sending (\d+) records`, hangBudget)
	time.Sleep(time.Second) // the stream is well past seq 1 (10 000 records/s)
	r := startCast(t, "", "recv", "-listen", port, "-peer", bind, "-from", "now", "-n", "1000", "-json", "-retries", "200", "-silence", "10s")
	r.wait(hangBudget)
	out := r.Stdout.String()
	m := regexp.MustCompile(`^\{"event":"late_start","seq":(\d+)\}\n\{"seq":(\d+),`).FindStringSubmatch(out)
	if m == nil || m[1] != m[2] || m[1] == "1" {
		t.Fatalf("want a late_start event naming the first seq delivered (> 1):\n%.400s\nstderr:\n%s\nsender stderr:\n%s", out, r.Stderr.String(), s.Stderr.String())
	}
	checkJSONTruth(t, out)
	first, _ := strconv.Atoi(m[1])
	if want := fmt.Sprintf(`{"seq":%d,`, first+999); !strings.Contains(out, want) {
		t.Fatalf("records not delivered in order from %d:\n%.400s", first, out)
	}
	s.signal(syscall.SIGINT)
	s.wait(hangBudget)
}

// TestLearnPeer: without -peer (cast.AwaitSender, as `cast recv`'s
// Consumer, `cast echo` and the classic receiver learn their sender), junk, a bad CRC, a NAK and a zero seq
// never name the peer; the first valid heartbeat or data record does, and
// only datagrams from it are kept.
func TestLearnPeer(t *testing.T) {
	rp, err := udp.New(udp.Config{Local: netip.MustParseAddrPort("127.0.0.1:0")})
	if err != nil {
		t.Fatal(err)
	}
	defer rp.Close()
	rogue, err := udp.New(udp.Config{Local: netip.MustParseAddrPort("127.0.0.1:0"), Peer: rp.LocalAddr()})
	if err != nil {
		t.Fatal(err)
	}
	defer rogue.Close()
	sender, err := udp.New(udp.Config{Local: netip.MustParseAddrPort("127.0.0.1:0"), Peer: rp.LocalAddr()})
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()

	hb := make([]byte, wire.ControlFrameSize)
	wire.PutHeartbeatFrame(hb, wire.Heartbeat{Highest: 7})
	badCRC := append([]byte(nil), hb...)
	badCRC[20] ^= 1
	nak := make([]byte, wire.ControlFrameSize)
	wire.PutNakFrame(nak, wire.Nak{From: 1, Count: 1})
	seq0 := make([]byte, wire.HeaderSize+16)
	_ = wire.Seal(seq0, 1)
	for _, d := range [][]byte{[]byte("junk"), badCRC, nak, seq0} {
		sendOne(t, rogue, d)
	}
	sendOne(t, sender, hb)
	sendOne(t, rogue, hb) // after the peer: not fed to the receiver

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, from, ignored, err := cast.AwaitSender(ctx, rp, 2048, nil)
	if err != nil {
		t.Fatal(err)
	}
	kept := 0
	for i := 0; i < v.Len(); i++ {
		if _, a := v.Msg(i); a == from {
			kept++
		}
	}
	if from != sender.LocalAddr() || ignored != 4 {
		t.Fatalf("learnt %v (sender %v, rogue %v), ignored %d, want 4", from, sender.LocalAddr(), rogue.LocalAddr(), ignored)
	}
	if kept != 1 {
		t.Fatalf("%d datagrams kept from the peer, want 1", kept)
	}
}

// sendOne sends d from p to its connected peer.
func sendOne(t *testing.T, p *udp.Path, d []byte) {
	t.Helper()
	v := batch.New(1, len(d))
	v.Append(d, netip.AddrPort{})
	if n, err := p.Send(v); n != 1 || err != nil {
		t.Fatalf("send: %d %v", n, err)
	}
}
