package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/walcast/walcast/wire"
)

// TestWiresharkDissector records real runs through taps (no capture, so
// no root): `cast send -wal` → `cast recv -drop`, the same with
// -key-file (every datagram ends in the authentication trailer), a TCP
// replay (request, records, CaughtUp, a NotAvailable), and crafted
// datagrams for what the CLI does not send (Skip, bitmap NAK, a golden
// Status, Heartbeat and authentication trailer, a group NAK, a bad CRC,
// a truncated frame). It writes them as a pcap file, decodes it with
// tools/wireshark/casting.lua and checks that every frame type decodes,
// that nothing is malformed or a Lua error, expert infos exactly on the
// broken frames, and golden field values.
func TestWiresharkDissector(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark not installed")
	}
	script, err := filepath.Abs("../../tools/wireshark/casting.lua")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rec := &recorder{}

	const n, nk = 2000, 300
	const rid = 0x1234abcd
	walDir := filepath.Join(dir, "wal")
	r := startCast(t, dir, "recv", "-listen", "127.0.0.1:0", "-n", fmt.Sprint(n), "-drop", "3", "-id", fmt.Sprint(rid))
	tap := rec.udpTap(t, r.listenAddr())
	runCast(t, "send", "-to", tap, "-bind", "127.0.0.1:0", "-n", fmt.Sprint(n), "-rate", "10000", "-wal", walDir, "-linger", "2s").
		expect(0, "stdout", `durable through seq 2000$`)
	r.wait(hangBudget)

	key := writeKeyFile(t, 0o600, "3 00112233445566778899aabbccddeeff")
	rk := startCast(t, dir, "recv", "-listen", "127.0.0.1:0", "-n", fmt.Sprint(nk), "-drop", "3", "-key-file", key)
	ktap := rec.udpTap(t, rk.listenAddr())
	runCast(t, "send", "-to", ktap, "-bind", "127.0.0.1:0", "-n", fmt.Sprint(nk), "-rate", "10000", "-linger", "2s", "-key-file", key).
		expect(0, "stdout", `^naks \d+, retransmits`)
	rk.wait(hangBudget)
	rk.expect(0, "stdout", `^outcome: live$`)

	srv := startCast(t, dir, "replay", "serve", "-wal", walDir, "-listen", "127.0.0.1:0", "-plaintext")
	ttap := rec.tcpTap(t, srv.waitOutput(`on (127\.0\.0\.1:\d+) \(`, hangBudget))
	runCast(t, "replay", "tail", "-endpoints", ttap, "-from", "1990", "-caught-up", "-plaintext").expect(0, "stderr", `^11 records, tip 2000$`)
	runCast(t, "replay", "tail", "-endpoints", ttap, "-stream", "2", "-plaintext", "-wait", "1s").expect(1, "stderr", `not available`)
	srv.signal(syscall.SIGINT)
	srv.wait(hangBudget)

	// Crafted datagrams, one frame each (the trailer's after its frame).
	frame := func(put func([]byte) int) []byte { b := make([]byte, 256); return b[:put(b)] }
	golden := []byte{ // docs/protocol.md § Authentication trailer
		0x01, 0x00, 0x01, 0x00, 0x08, 0x00, 0x00, 0x00, 0xad, 0xcf, 0x14, 0xc5, 0, 0, 0, 0,
		1, 0, 0, 0, 0, 0, 0, 0,
		1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1,
		0xbe, 0x73, 0x16, 0xd4, 0xbd, 0xcd, 0x41, 0x27, 0x3a, 0x77, 0x59, 0xff, 0x0a, 0x54, 0xec, 0x62,
	}
	crafted := [][]byte{
		frame(func(b []byte) int {
			return wire.PutSkipFrame(b, wire.Skip{Seq: 70001, From: 6, Reason: wire.SkipRestart})
		}),
		frame(func(b []byte) int {
			return wire.PutStatusFrame(b, wire.Status{Delivered: 1000, Highest: 1003, ReceiverID: 0x0123456789abcdef,
				EchoTS: 5_000_000, EchoHold: 12_000, Window: 2048, ReNak: 200_000, Serial: 7, Flags: wire.StatusSynced})
		}),
		frame(func(b []byte) int {
			return wire.PutProbeFrame(b, wire.Probe{Highest: 4242, TS: 123456789, SenderID: 0xfeedfacecafebeef, SRTT: 1500, RTTVar: 250})
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
		golden,
	}
	cport := netip.MustParseAddrPort("127.0.0.1:40001")
	for _, d := range crafted {
		rec.udp(netip.MustParseAddrPort("127.0.0.1:40000"), cport, d)
	}
	capFile := filepath.Join(dir, "cap.pcap")
	if err := rec.write(capFile); err != nil {
		t.Fatal(err)
	}

	port := func(a string) uint16 { return netip.MustParseAddrPort(a).Port() }
	args := []string{"-X", "lua_script:" + script, "-r", capFile,
		"-o", fmt.Sprintf("casting.udp_ports:%d,%d,%d", port(tap), port(ktap), cport.Port()), "-o", fmt.Sprintf("casting.tcp_port:%d", port(ttap))}
	fields := []string{"frame.number", "udp.port", "casting.type", "casting.seq", "casting.crc_ok", "casting.version", "casting.len", "casting.crc",
		"casting.nak.from", "casting.nak.count", "casting.nak.receiver_id", "casting.status.delivered", "casting.status.highest",
		"casting.status.window", "casting.status.receiver_id", "casting.status.echo_ts", "casting.status.echo_hold",
		"casting.status.renak_ns", "casting.status.serial", "casting.status.state", "casting.status.flags", "casting.status.synced",
		"casting.hb.highest", "casting.hb.ts", "casting.hb.sender_id", "casting.hb.srtt_ns", "casting.hb.rttvar_ns",
		"casting.end.final", "casting.rr.stream", "casting.rr.from", "casting.caughtup.stream", "casting.caughtup.live_seq",
		"casting.na.stream", "casting.skip.from", "casting.skip.reason", "casting.auth.epoch", "casting.auth.counter",
		"casting.auth.key_id", "casting.auth.version", "casting.auth.tag", "casting.auth.verified", "_ws.expert.message"}
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
	saw := map[string]bool{}
	maxSeq, keyed, keyedData := 0, 0, 0
	kport := fmt.Sprint(port(ktap))
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
		if slicesContain(strings.Split(get("udp.port"), ","), kport) {
			// The keyed run: every datagram carries a trailer of key 3.
			keyed++
			if get("casting.auth.key_id") != "3" || get("casting.auth.version") != "1" || get("casting.auth.verified") != "0" ||
				get("casting.auth.counter") == "" || get("casting.auth.counter") == "0" {
				t.Errorf("keyed datagram without its trailer: %q", line)
			}
			if first("casting.type") == "0x0001" {
				keyedData++
			}
		}
		if get("casting.caughtup.live_seq") != "" { // a TCP segment may carry records before it
			saw["CaughtUp"] = saw["CaughtUp"] || (first("casting.caughtup.stream") == "1" && first("casting.caughtup.live_seq") == "2000")
		}
		switch first("casting.type") {
		case "0x0001":
			if get("casting.auth.epoch") == "0x0000000000000001" {
				// The header of the golden frame too: version 1, 8-byte
				// payload, its CRC-32C as the bytes give it.
				saw["golden trailer"] = get("casting.seq") == "1" && get("casting.crc_ok") == "1" &&
					get("casting.version") == "1" && get("casting.len") == "8" && get("casting.crc") == "0xc514cfad" &&
					get("casting.auth.epoch") == "0x0000000000000001" && get("casting.auth.counter") == "1" &&
					get("casting.auth.key_id") == "1" && get("casting.auth.tag") == "be7316d4bdcd41273a7759ff0a54ec62"
			}
		case "0x0010":
			if first("casting.status.receiver_id") == fmt.Sprintf("0x%016x", rid) {
				saw["Status from the receiver"] = true
			}
			if first("casting.status.receiver_id") == "0x0123456789abcdef" {
				saw["golden Status"] = first("casting.status.delivered") == "1000" && first("casting.status.highest") == "1003" &&
					first("casting.status.echo_ts") == "5000000" && first("casting.status.echo_hold") == "12000" &&
					first("casting.status.window") == "2048" && first("casting.status.renak_ns") == "200000" &&
					first("casting.status.serial") == "7" && first("casting.status.state") == "0" &&
					first("casting.status.flags") == "0x01" && first("casting.status.synced") == "1" && first("casting.len") == "64"
				if !saw["golden Status"] {
					t.Errorf("golden Status decoded as %q", line)
				}
			}
		case "0x0011":
			if first("casting.nak.count") == "0" || first("casting.nak.from") == "0" {
				t.Errorf("NAK of nothing: %q", line)
			}
			if first("casting.nak.receiver_id") == "0x0123456789abcdef" {
				saw["group NAK 2+3"] = first("casting.nak.from") == "2" && first("casting.nak.count") == "3"
			}
		case "0x0012":
			if first("casting.hb.sender_id") == "0xfeedfacecafebeef" {
				saw["golden Heartbeat"] = first("casting.hb.highest") == "4242" && first("casting.hb.ts") == "123456789" &&
					first("casting.hb.srtt_ns") == "1500" && first("casting.hb.rttvar_ns") == "250"
			} else if h := atoiOr(first("casting.hb.highest")); h > 0 && h <= n && first("casting.hb.sender_id") != "0x0000000000000000" {
				saw["Heartbeat from the sender"] = true
			}
		case "0x0013":
			saw["ReplicationRequest stream 1 from 1990"] = saw["ReplicationRequest stream 1 from 1990"] ||
				(first("casting.rr.stream") == "1" && first("casting.rr.from") == "1990")
		case "0x0015":
			saw["NotAvailable stream 2"] = saw["NotAvailable stream 2"] || first("casting.na.stream") == "2"
		case "0x0016":
			saw["session end final 2000"] = saw["session end final 2000"] || first("casting.end.final") == "2000"
		case "0x0017":
			saw["golden Skip"] = first("casting.skip.from") == "6" && first("casting.seq") == "70001" && first("casting.skip.reason") == "1"
		}
		for _, s := range strings.Split(get("casting.seq"), ",") {
			if k := atoiOr(s); k > maxSeq && k <= n {
				maxSeq = k
			}
		}
	}
	t.Logf("frames by type: %v; %d keyed datagrams (%d of data)", types, keyed, keyedData)
	for _, ty := range []string{"0x0001", "0x0006", "0x0010", "0x0011", "0x0012", "0x0013", "0x0014", "0x0015", "0x0016", "0x0017"} {
		if types[ty] == 0 {
			t.Errorf("no frame of type %s decoded", ty)
		}
	}
	if maxSeq != n {
		t.Errorf("highest data seq decoded %d, want %d", maxSeq, n)
	}
	if keyedData < nk {
		t.Errorf("%d keyed data datagrams decoded, want at least %d", keyedData, nk)
	}
	for _, name := range []string{"Status from the receiver", "Heartbeat from the sender", "ReplicationRequest stream 1 from 1990",
		"CaughtUp", "NotAvailable stream 2", "session end final 2000", "golden Skip", "golden Status", "golden Heartbeat",
		"group NAK 2+3", "golden trailer"} {
		if !saw[name] {
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

func slicesContain(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func atoiOr(s string) int {
	var k int
	if _, err := fmt.Sscan(s, &k); err != nil {
		return 0
	}
	return k
}
