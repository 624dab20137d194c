package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/walcast/walcast/wire"
)

// freePort returns a loopback port of network ("udp" or "tcp") that was
// free a moment ago.
func freePort(t *testing.T, network string) int {
	t.Helper()
	if network == "udp" {
		c, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.LocalAddr().(*net.UDPAddr).Port
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// lockedBuffer is a bytes.Buffer a child writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// TestWiresharkDissector captures a real `cast send -wal` → `cast recv
// -drop` run on loopback, a TCP replay (request, records, CaughtUp, a
// NotAvailable) and crafted datagrams for the frames the CLI does not
// send (Skip, bitmap NAK, a golden Status, a group NAK, a bad CRC, a
// truncated frame), then decodes the capture with tools/wireshark/
// casting.lua and checks that every frame type decodes, that nothing is
// malformed or a Lua error, and golden field values.
func TestWiresharkDissector(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark not installed")
	}
	if os.Geteuid() != 0 {
		t.Skip("capturing on loopback needs root (CAP_NET_RAW)")
	}
	script, err := filepath.Abs("../../tools/wireshark/casting.lua")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rport, sport, cport, tport := freePort(t, "udp"), freePort(t, "udp"), freePort(t, "udp"), freePort(t, "tcp")
	capFile := filepath.Join(dir, "cap.pcapng")
	filter := fmt.Sprintf("udp port %d or udp port %d or udp port %d or tcp port %d", rport, sport, cport, tport)
	capt := exec.Command(tshark, "-i", "lo", "-f", filter, "-w", capFile)
	capErr := &lockedBuffer{}
	capt.Stderr = capErr
	if err := capt.Start(); err != nil {
		t.Fatal(err)
	}
	defer capt.Process.Kill()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(capErr.String(), "Capturing on"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("tshark did not start capturing:\n%s", capErr.String())
		}
	}
	time.Sleep(500 * time.Millisecond) // the capture is live a little after it says so

	const n = 2000
	const rid = 0x1234abcd
	walDir := filepath.Join(dir, "wal")
	r := startCast(t, dir, "recv", "-listen", fmt.Sprintf("127.0.0.1:%d", rport), "-n", fmt.Sprint(n), "-drop", "3", "-id", fmt.Sprint(rid))
	r.listenAddr()
	runCast(t, "send", "-to", fmt.Sprintf("127.0.0.1:%d", rport), "-bind", fmt.Sprintf("127.0.0.1:%d", sport),
		"-n", fmt.Sprint(n), "-rate", "10000", "-wal", walDir, "-linger", "2s").expect(0, "stdout", `durable through seq 2000$`)
	r.wait(hangBudget)

	srv := startCast(t, dir, "replay", "serve", "-wal", walDir, "-listen", fmt.Sprintf("127.0.0.1:%d", tport), "-plaintext")
	ep := srv.waitOutput(`on (127\.0\.0\.1:\d+) \(`, hangBudget)
	runCast(t, "replay", "tail", "-endpoints", ep, "-from", "1990", "-caught-up", "-plaintext").expect(0, "stderr", `^11 records, tip 2000$`)
	runCast(t, "replay", "tail", "-endpoints", ep, "-stream", "2", "-plaintext", "-wait", "1s").expect(1, "stderr", `not available`)
	srv.signal(syscall.SIGINT)
	srv.wait(hangBudget)

	// Crafted datagrams, one frame each, to the port the CLI left alone.
	sink, err := net.ListenPacket("udp4", fmt.Sprintf("127.0.0.1:%d", cport)) // no port unreachable
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	conn, err := net.Dial("udp4", sink.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	frame := func(put func([]byte) int) []byte { b := make([]byte, 256); return b[:put(b)] }
	crafted := [][]byte{
		frame(func(b []byte) int {
			return wire.PutSkipFrame(b, wire.Skip{Seq: 70001, From: 6, Reason: wire.SkipRestart})
		}),
		frame(func(b []byte) int {
			return wire.PutStatusFrame(b, wire.Status{Delivered: 1000, Highest: 1003, ReceiverID: 0x0123456789abcdef,
				EchoTS: 5_000_000, EchoHold: 12_000, Window: 2048, ReNak: 200_000, Serial: 7, Flags: wire.StatusSynced})
		}),
		frame(func(b []byte) int {
			n := wire.PutNakFrame(b, wire.Nak{From: 2, Count: 3})
			binary.LittleEndian.PutUint64(b[wire.HeaderSize+16:], 0x0123456789abcdef) // a group NAK
			_ = wire.Seal(b[:n], wire.TypeNak)
			return n
		}),
		frame(func(b []byte) int {
			clear(b[:wire.ControlFrameSize])
			_ = wire.Seal(b[:wire.ControlFrameSize], wire.TypeBitmapNak)
			return wire.ControlFrameSize
		}),
		frame(func(b []byte) int { // a data record whose CRC is wrong
			clear(b[:80])
			binary.LittleEndian.PutUint64(b[wire.HeaderSize:], 77)
			_ = wire.Seal(b[:80], 100)
			b[8] ^= 0xff
			return 80
		}),
		{1, 0, 100, 0}, // shorter than a header
	}
	for _, d := range crafted {
		if _, err := conn.Write(d); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second)
	_ = capt.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- capt.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("tshark did not stop")
	}

	args := []string{"-X", "lua_script:" + script, "-r", capFile,
		"-o", fmt.Sprintf("casting.udp_ports:%d,%d", rport, cport), "-o", fmt.Sprintf("casting.tcp_port:%d", tport)}
	fields := []string{"frame.number", "casting.type", "casting.seq", "casting.crc_ok", "casting.nak.from", "casting.nak.count",
		"casting.nak.receiver_id", "casting.status.delivered", "casting.status.window", "casting.status.receiver_id",
		"casting.status.serial", "casting.hb.highest", "casting.end.final", "casting.rr.stream", "casting.rr.from",
		"casting.caughtup.live_seq", "casting.na.stream", "casting.skip.from", "casting.skip.reason", "_ws.expert.message"}
	fa := append([]string{}, args...)
	fa = append(fa, "-T", "fields", "-E", "separator=|", "-E", "occurrence=a", "-E", "aggregator=,")
	for _, f := range fields {
		fa = append(fa, "-e", f)
	}
	out, err := exec.Command(tshark, fa...).CombinedOutput()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, out)
	}
	verbose, err := exec.Command(tshark, append(args, "-V")...).CombinedOutput()
	if err != nil {
		t.Fatalf("tshark -V: %v", err)
	}
	for _, bad := range []string{"Malformed Packet", "Lua Error", "Dissector bug"} {
		if i := bytes.Index(verbose, []byte(bad)); i >= 0 {
			t.Fatalf("%q in the decode: %s", bad, verbose[max(0, i-400):min(len(verbose), i+200)])
		}
	}

	col := map[string]int{}
	for i, f := range fields {
		col[f] = i
	}
	types := map[string]int{}
	var experts []string
	var sawStatus, sawRR, sawCaught, sawNA, sawEnd, sawSkip, sawGroupNak bool
	maxSeq := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.HasPrefix(line, "Running as user") {
			continue
		}
		v := strings.Split(line, "|")
		if len(v) != len(fields) {
			t.Fatalf("line %q", line)
		}
		get := func(f string) string { return v[col[f]] }
		first := func(f string) string { return strings.Split(get(f), ",")[0] }
		for _, m := range strings.Split(get("_ws.expert.message"), ",") {
			if m != "" && !strings.HasPrefix(m, "Connection ") && !strings.HasPrefix(m, "This frame") { // TCP's own notes
				experts = append(experts, m)
			}
		}
		for _, ty := range strings.Split(get("casting.type"), ",") {
			if ty != "" {
				types[ty]++
			}
		}
		if get("casting.caughtup.live_seq") != "" { // a TCP segment may carry records before it
			sawCaught = true
		}
		switch first("casting.type") {
		case "0x0010":
			if first("casting.status.receiver_id") == fmt.Sprintf("0x%016x", rid) {
				sawStatus = true
			}
			if first("casting.status.receiver_id") == "0x0123456789abcdef" {
				if first("casting.status.delivered") != "1000" || first("casting.status.window") != "2048" || first("casting.status.serial") != "7" {
					t.Errorf("golden Status decodes as %q", line)
				}
			}
		case "0x0011":
			if first("casting.nak.count") == "0" || first("casting.nak.from") == "0" {
				t.Errorf("NAK of nothing: %q", line)
			}
			if first("casting.nak.receiver_id") == "0x0123456789abcdef" {
				sawGroupNak = first("casting.nak.from") == "2" && first("casting.nak.count") == "3"
			}
		case "0x0013":
			sawRR = sawRR || (first("casting.rr.stream") == "1" && first("casting.rr.from") == "1990")
		case "0x0015":
			sawNA = sawNA || first("casting.na.stream") == "2"
		case "0x0016":
			sawEnd = sawEnd || first("casting.end.final") == "2000"
		case "0x0017":
			sawSkip = first("casting.skip.from") == "6" && first("casting.seq") == "70001" && first("casting.skip.reason") == "1"
		}
		for _, s := range strings.Split(get("casting.seq"), ",") {
			var k int
			if _, err := fmt.Sscan(s, &k); err == nil && k > maxSeq && k <= n {
				maxSeq = k
			}
		}
	}
	t.Logf("frames by type: %v", types)
	for _, ty := range []string{"0x0001", "0x0006", "0x0010", "0x0011", "0x0012", "0x0013", "0x0014", "0x0015", "0x0016", "0x0017"} {
		if types[ty] == 0 {
			t.Errorf("no frame of type %s decoded", ty)
		}
	}
	if maxSeq != n {
		t.Errorf("highest data seq decoded %d, want %d", maxSeq, n)
	}
	for name, ok := range map[string]bool{"Status from the receiver": sawStatus, "ReplicationRequest stream 1 from 1990": sawRR,
		"CaughtUp": sawCaught, "NotAvailable stream 2": sawNA, "session end final 2000": sawEnd,
		"golden Skip": sawSkip, "group NAK 2+3": sawGroupNak} {
		if !ok {
			t.Errorf("missing: %s", name)
		}
	}
	// Exactly the two broken datagrams carry expert errors; the reserved
	// bitmap NAK a note.
	joined := strings.Join(experts, "\n")
	if strings.Count(joined, "CRC-32C mismatch") != 1 || strings.Count(joined, "shorter than its 16-byte header") != 1 ||
		strings.Count(joined, "Reserved record type") != 1 || len(experts) != 3 {
		t.Errorf("expert infos:\n%s", joined)
	}
}
