package xdp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
)

// refChecksum is RFC 1071 the slow way: 16-bit big-endian words.
func refChecksum(b []byte, init uint32) uint16 {
	s := init
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

func TestSumMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 300 {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		if n%7 == 0 {
			for i := range b {
				b[i] = 0xff // worst case for carries
			}
		}
		if got, want := fold(sum(b, 0)), refChecksum(b, 0); got != want {
			t.Fatalf("len %d: %#04x, want %#04x", n, got, want)
		}
	}
}

var (
	srcAP  = netip.MustParseAddrPort("10.199.0.1:40000")
	dstAP  = netip.MustParseAddrPort("10.199.0.2:7000")
	dstMAC = [6]byte{2, 0, 0, 0, 0, 2}
)

func build(payload []byte) []byte {
	h := header{srcMAC: [6]byte{2, 0, 0, 0, 0, 1}, src: srcAP}
	f := make([]byte, 2048)
	copy(f[offPayload:], payload)
	n := h.put(f, &dstMAC, dstAP, len(payload))
	return f[:n]
}

// TestPutChecksums verifies both checksums the way a receiving kernel does:
// the one's-complement sum over the covered bytes (checksum included) is
// 0xffff.
func TestPutChecksums(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 7, 8, 9, 63, 64, 65, 1471, 1472, 2006} {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(i*7 + n)
		}
		f := build(p)
		if got := fold(sum(f[offIP:offUDP], 0)); got != 0xffff {
			t.Errorf("len %d: IPv4 header sums to %#04x", n, got)
		}
		udpLen := binary.BigEndian.Uint16(f[offUDPLen:])
		pseudo := sum(f[offIPSrc:offUDP], 17+uint64(udpLen))
		if got := fold(sum(f[offUDP:], pseudo)); got != 0xffff {
			t.Errorf("len %d: UDP sums to %#04x", n, got)
		}
		if binary.BigEndian.Uint16(f[offUDPCsum:]) == 0 {
			t.Errorf("len %d: UDP checksum 0 (means none)", n)
		}
		pk, ok := parse(f, dstAP.Port())
		if !ok || pk.src != srcAP || !bytes.Equal(f[pk.off:pk.off+pk.n], p) || pk.srcMAC != [6]byte{2, 0, 0, 0, 0, 1} {
			t.Fatalf("len %d: parse %+v %v", n, pk, ok)
		}
	}
}

func TestParseRejects(t *testing.T) {
	good := build([]byte("walcast"))
	mod := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	fixIP := func(b []byte) []byte {
		b[offIPCsum], b[offIPCsum+1] = 0, 0
		binary.BigEndian.PutUint16(b[offIPCsum:], ^fold(sum(b[offIP:offUDP], 0)))
		return b
	}
	for _, tc := range []struct {
		name  string
		frame []byte
		ok    bool
	}{
		{"good", good, true},
		{"ethernet padding", append(bytes.Clone(good), make([]byte, 20)...), true},
		{"short", good[:offPayload-1], false},
		{"empty", nil, false},
		{"ipv6", mod(func(b []byte) []byte { b[offEthType+1] = 0xdd; b[offEthType] = 0x86; return b }), false},
		{"ip options", mod(func(b []byte) []byte { b[offIP] = 0x46; return fixIP(b) }), false},
		{"tcp", mod(func(b []byte) []byte { b[offIPProto] = 6; return fixIP(b) }), false},
		{"bad ip checksum", mod(func(b []byte) []byte { b[offIPCsum] ^= 1; return b }), false},
		{"fragment", mod(func(b []byte) []byte { b[offIPFrag] |= 0x20; return fixIP(b) }), false},
		{"other port", mod(func(b []byte) []byte { b[offUDPDst+1]++; return b }), false},
		{"ip len past frame", mod(func(b []byte) []byte {
			binary.BigEndian.PutUint16(b[offIPLen:], uint16(len(b)))
			return fixIP(b)
		}), false},
		{"udp len mismatch", mod(func(b []byte) []byte { b[offUDPLen+1]--; return b }), false},
		{"udp len below 8", mod(func(b []byte) []byte { binary.BigEndian.PutUint16(b[offUDPLen:], 7); return b }), false},
	} {
		if _, ok := parse(tc.frame, dstAP.Port()); ok != tc.ok {
			t.Errorf("%s: ok=%v, want %v", tc.name, ok, tc.ok)
		}
	}
}

// FuzzParse: no panic, and an accepted payload lies inside the frame.
func FuzzParse(f *testing.F) {
	f.Add(build([]byte("walcast")), uint16(7000))
	f.Add(build(nil), uint16(7000))
	f.Fuzz(func(t *testing.T, frame []byte, port uint16) {
		pk, ok := parse(frame, port)
		if ok && (pk.off < offPayload || pk.n < 0 || pk.off+pk.n > len(frame)) {
			t.Fatalf("payload [%d:+%d] outside a %d-byte frame", pk.off, pk.n, len(frame))
		}
	})
}

func TestConfigValidate(t *testing.T) {
	good := DefaultConfig()
	good.Interface, good.Local = "eth0", netip.MustParseAddrPort("0.0.0.0:7000")
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		ok   bool
	}{
		{"good", func(*Config) {}, true},
		{"no interface", func(c *Config) { c.Interface = "" }, false},
		{"no port", func(c *Config) { c.Local = netip.AddrPort{} }, false},
		{"ipv6 local", func(c *Config) { c.Local = netip.MustParseAddrPort("[::1]:7000") }, false},
		{"ipv6 peer", func(c *Config) { c.Peer = netip.MustParseAddrPort("[::1]:7000") }, false},
		{"frames not pow2", func(c *Config) { c.RxFrames = 100 }, false},
		{"frame size", func(c *Config) { c.FrameSize = 1024 }, false},
		{"short mac", func(c *Config) { c.PeerMAC = []byte{1, 2} }, false},
		{"negative queue", func(c *Config) { c.Queue = -1 }, false},
		{"multicast peer", func(c *Config) { c.Peer = netip.MustParseAddrPort("239.1.2.3:7000") }, false},
		{"multicast local", func(c *Config) { c.Local = netip.MustParseAddrPort("239.1.2.3:7000") }, false},
	} {
		c := good
		tc.mod(&c)
		err := c.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
		if strings.HasPrefix(tc.name, "multicast") && !errors.Is(err, ErrMulticast) {
			t.Errorf("%s: %v does not wrap ErrMulticast", tc.name, err)
		}
	}
}

func TestNeighbors(t *testing.T) {
	var n neighbors
	for i := range 20 {
		n.learn(netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}), [6]byte{byte(i)})
	}
	if n.lookup(netip.AddrFrom4([4]byte{10, 0, 0, 3})) != nil {
		t.Fatal("oldest entry not replaced")
	}
	if m := n.lookup(netip.AddrFrom4([4]byte{10, 0, 0, 19})); m == nil || m[0] != 19 {
		t.Fatalf("lookup 19: %v", m)
	}
	n.learn(netip.AddrFrom4([4]byte{10, 0, 0, 19}), [6]byte{99})
	if m := n.lookup(netip.AddrFrom4([4]byte{10, 0, 0, 19})); m[0] != 99 {
		t.Fatal("update lost")
	}
}
