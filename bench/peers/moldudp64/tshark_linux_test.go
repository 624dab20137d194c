package moldudp64

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// pcap writes datagrams as a LINKTYPE_RAW (IPv4) capture from
// 127.0.0.1:sport to 127.0.0.1:dport.
func pcap(t *testing.T, path string, sport, dport uint16, dgrams [][]byte) {
	var b bytes.Buffer
	le := binary.LittleEndian
	hdr := make([]byte, 24)
	le.PutUint32(hdr, 0xa1b2c3d4)
	le.PutUint16(hdr[4:], 2)
	le.PutUint16(hdr[6:], 4)
	le.PutUint32(hdr[16:], 65535)
	le.PutUint32(hdr[20:], 101) // LINKTYPE_RAW
	b.Write(hdr)
	for i, d := range dgrams {
		ip := make([]byte, 28, 28+len(d))
		ip[0], ip[8], ip[9] = 0x45, 64, 17
		binary.BigEndian.PutUint16(ip[2:], uint16(28+len(d)))
		copy(ip[12:], []byte{127, 0, 0, 1})
		copy(ip[16:], []byte{127, 0, 0, 1})
		var sum uint32
		for k := 0; k < 20; k += 2 {
			sum += uint32(binary.BigEndian.Uint16(ip[k:]))
		}
		for sum > 0xffff {
			sum = sum&0xffff + sum>>16
		}
		binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
		binary.BigEndian.PutUint16(ip[20:], sport)
		binary.BigEndian.PutUint16(ip[22:], dport)
		binary.BigEndian.PutUint16(ip[24:], uint16(8+len(d))) // UDP checksum 0: none (legal for IPv4)
		pkt := append(ip, d...)
		rec := make([]byte, 16)
		le.PutUint32(rec, uint32(1700000000+i))
		le.PutUint32(rec[8:], uint32(len(pkt)))
		le.PutUint32(rec[12:], uint32(len(pkt)))
		b.Write(rec)
		b.Write(pkt)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestTsharkDecodes checks our frames against Wireshark's MoldUDP64
// dissector: tshark must see the session, sequence numbers, counts and
// message lengths we wrote (a second, independent implementation).
func TestTsharkDecodes(t *testing.T) {
	ts, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark not installed (scripts/setup.sh installs it)")
	}
	const port = 30123
	frames := [][]byte{
		AppendPacket(nil, sess, 1, bytes.Repeat([]byte{0xaa}, 128)),
		AppendPacket(nil, sess, 2, []byte("ab"), []byte("xyz")),
		AppendHeartbeat(nil, sess, 4),
		AppendEndOfSession(nil, sess, 4),
		AppendRequest(nil, Request{Session: sess, Seq: 2, Count: 2}),
	}
	path := filepath.Join(t.TempDir(), "mold.pcap")
	pcap(t, path, 40000, port, frames)
	out, err := exec.Command(ts, "-r", path, "-d", "udp.port==30123,moldudp64", "-T", "fields",
		"-E", "separator=;", "-e", "moldudp64.session", "-e", "moldudp64.sequence", "-e", "moldudp64.count",
		"-e", "moldudp64.msglen", "-e", "_ws.expert.severity", "-e", "_ws.malformed").Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	t.Logf("tshark:\n%s", out)
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	want := []string{
		"WALCAST1;1;1;128",
		"WALCAST1;2;2;2,3",
		"WALCAST1;4;0;",
		"WALCAST1;4;65535;",
		"WALCAST1;2;2;",
	}
	if len(got) != len(want) {
		t.Fatalf("tshark printed %d packets:\n%s", len(got), out)
	}
	for i := range want {
		g := strings.TrimSpace(got[i])
		// The session may be shown with its padding. A header-only packet
		// is also the shape of a request, which the dissector notes with
		// a Comment-level expert item (severity 0x00100000); anything
		// stronger (note, warning, error) or a malformed mark fails.
		g = strings.Replace(g, "WALCAST1  ", "WALCAST1", 1)
		f := strings.Split(g, ";")
		for len(f) < 6 {
			f = append(f, "")
		}
		if f[4] != "" && f[4] != "1048576" {
			t.Errorf("packet %d: expert severity %s: %q", i, f[4], got[i])
		}
		if f[5] != "" {
			t.Errorf("packet %d: malformed: %q", i, got[i])
		}
		if g = strings.Join(f[:4], ";"); g != want[i] {
			t.Errorf("packet %d: tshark %q, want %q", i, got[i], want[i])
		}
	}
}
