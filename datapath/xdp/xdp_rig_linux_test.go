package xdp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/internal/netns"
	"golang.org/x/sys/unix"
)

func newPair(t *testing.T) *netns.Pair {
	t.Helper()
	return netns.New(t, netns.DefaultConfig())
}

// open opens an XDP path on h (port xdpPort) sending to peer by default.
func open(t *testing.T, h netns.Host, peer netip.AddrPort, mod func(*Config)) *Path {
	t.Helper()
	c := DefaultConfig()
	c.Interface, c.Local, c.Peer = h.Link, netip.AddrPortFrom(h.Addr, xdpPort), peer
	c.RxFrames, c.TxFrames = 256, 256
	if mod != nil {
		mod(&c)
	}
	var p *Path
	if err := h.Do(func() error {
		var err error
		p, err = Open(c)
		return err
	}); err != nil {
		if errors.Is(err, unix.EPERM) {
			t.Skipf("AF_XDP not permitted: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return p
}

func kernelUDP(t *testing.T, h netns.Host, port int) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	if err := h.Do(func() error {
		var err error
		c, err = net.ListenUDP("udp4", &net.UDPAddr{IP: h.Addr.AsSlice(), Port: port})
		if err == nil {
			err = c.SetReadBuffer(8 << 20)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// payload i: 8-byte big-endian sequence number, then a pattern, size bytes.
func payload(i, size int) []byte {
	b := make([]byte, size)
	for j := range b {
		b[j] = byte(i + j*31)
	}
	if size >= 8 {
		binary.BigEndian.PutUint64(b, uint64(i))
	}
	return b
}

var sizes = []int{0, 1, 7, 8, 9, 18, 64, 100, 511, 1000, 1471, 1472}

// sendAll sends every message of msgs through p, retrying partial sends.
func sendAll(t *testing.T, p *Path, msgs [][]byte, to netip.AddrPort) {
	t.Helper()
	v := batch.New(64, 2048)
	deadline := time.Now().Add(10 * time.Second)
	for len(msgs) > 0 {
		v.Reset()
		for _, m := range msgs {
			if !v.Append(m, to) {
				break
			}
		}
		n, err := p.Send(v)
		if err != nil {
			t.Fatalf("send: %v", err)
		}
		msgs = msgs[n:]
		if time.Now().After(deadline) {
			t.Fatalf("send stuck with %d left; stats %+v", len(msgs), p.Stats())
		}
	}
}

// recvN polls p until n datagrams arrived or a quiet second passed.
func recvN(t *testing.T, p *Path, n int) ([][]byte, []netip.AddrPort) {
	t.Helper()
	v := batch.New(64, 2048)
	var got [][]byte
	var from []netip.AddrPort
	last := time.Now()
	for len(got) < n && time.Since(last) < time.Second {
		k, err := p.Recv(v)
		if err != nil {
			t.Fatal(err)
		}
		if k == 0 {
			time.Sleep(50 * time.Microsecond)
			continue
		}
		last = time.Now()
		for i := range k {
			b, a := v.Msg(i)
			got = append(got, bytes.Clone(b))
			from = append(from, a)
		}
	}
	return got, from
}

func snmpUDP(t *testing.T, h netns.Host, field string) int {
	t.Helper()
	out, err := h.Exec("cat", "/proc/net/snmp")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(l, "Udp: ") {
			continue
		}
		f := strings.Fields(l)[1:]
		if names == nil {
			names = f
			continue
		}
		for i, n := range names {
			if n == field {
				v, _ := strconv.Atoi(f[i])
				return v
			}
		}
	}
	t.Fatalf("no Udp %s in /proc/net/snmp", field)
	return 0
}

// TestXDPToKernel: frames built by hand reach a kernel UDP socket intact, so
// the MACs, lengths and both checksums are right (the receiving kernel
// verifies the UDP checksum: veth does not mark it as checked).
