package xdp

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath"
)

// TestSharedUMEM: an owner and a sharer on one queue of B (XDP_SHARED_UMEM)
// each receive their own port, send concurrently from their own goroutines
// more datagrams than they have TX frames (completions go back to the
// socket that sent them), allocate nothing doing it, and the sharer keeps
// working after the owner is closed.
func TestSharedUMEM(t *testing.T) {
	pr := newPair(t)
	const p1, p2 = xdpPort, xdpPort + 2
	kern := kernelUDP(t, pr.A, kernelPort)
	peer := netip.AddrPortFrom(pr.A.Addr, kernelPort)
	owner := open(t, pr.B, peer, func(c *Config) { c.Sharers, c.TxFrames, c.RxFrames = 2, 64, 256 })
	var sharer *Path
	if err := pr.B.Do(func() (err error) { sharer, err = owner.Share(netip.AddrPortFrom(netip.Addr{}, p2), peer); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sharer.Close() })
	if sharer.LocalAddr() != netip.AddrPortFrom(pr.B.Addr, p2) {
		t.Fatalf("sharer local %v", sharer.LocalAddr())
	}
	if err := pr.B.Do(func() error { _, err := owner.Share(netip.AddrPortFrom(pr.B.Addr, p1), peer); return err }); err == nil {
		t.Fatal("a second socket for the owner's port accepted")
	}

	// Kernel → each port: every datagram reaches the socket of its port.
	for i := range 100 {
		for _, port := range []int{p1, p2} {
			b := payload(i, 64)
			binary.BigEndian.PutUint16(b[8:], uint16(port))
			if _, err := kern.WriteToUDPAddrPort(b, netip.AddrPortFrom(pr.B.Addr, uint16(port))); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, x := range []struct {
		p    *Path
		port int
	}{{owner, p1}, {sharer, p2}} {
		got, _ := recvN(t, x.p, 100)
		if len(got) != 100 {
			t.Fatalf("port %d: %d of 100 received", x.port, len(got))
		}
		for i, b := range got {
			if binary.BigEndian.Uint64(b) != uint64(i) || int(binary.BigEndian.Uint16(b[8:])) != x.port {
				t.Fatalf("port %d datagram %d: %x", x.port, i, b[:10])
			}
		}
	}

	// Both → kernel, concurrently, 500 each through 64 TX frames apiece.
	const n = 500
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	for _, p := range []*Path{owner, sharer} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v := batch.New(16, 2048)
			for sent := 0; sent < n; {
				v.Reset()
				for i := sent; i < n && v.Len() < 16; i++ {
					v.Append(payload(i, 100), netip.AddrPort{})
				}
				k, err := p.Send(v)
				if err != nil {
					errc <- err
					return
				}
				sent += k
				if k == 0 {
					time.Sleep(10 * time.Microsecond)
				}
			}
		}()
	}
	counts := map[netip.AddrPort]int{}
	buf := make([]byte, 2048)
	kern.SetReadBuffer(8 << 20)
	for range 2 * n {
		kern.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, from, err := kern.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("after %v: %v; owner %+v sharer %+v", counts, err, owner.Stats(), sharer.Stats())
		}
		counts[from]++
	}
	wg.Wait()
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
	if counts[owner.LocalAddr()] != n || counts[sharer.LocalAddr()] != n {
		t.Fatalf("arrivals by source %v, want %d from each", counts, n)
	}

	// The hot path stays allocation-free with the shared rings.
	sv, rv := batch.New(8, 2048), batch.New(8, 2048)
	for i := range 8 {
		sv.Append(payload(i, 64), netip.AddrPort{})
	}
	if a := testing.AllocsPerRun(100, func() { sharer.Send(sv); sharer.Recv(rv); owner.Recv(rv) }); a != 0 {
		t.Fatalf("%v allocations per shared Send+Recv", a)
	}

	// Owner closed first: the sharer still sends and receives.
	if err := owner.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Send(sv); err != datapath.ErrClosed {
		t.Fatalf("closed owner Send: %v", err)
	}
	for deadline := time.Now().Add(time.Second); ; {
		kern.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, _, err := kern.ReadFromUDPAddrPort(buf); err != nil {
			break // drain what the allocation test sent
		}
		if time.Now().After(deadline) {
			break
		}
	}
	sendAll(t, sharer, [][]byte{payload(7, 64)}, netip.AddrPort{})
	kern.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, from, err := kern.ReadFromUDPAddrPort(buf); err != nil || from != sharer.LocalAddr() {
		t.Fatalf("sharer after the owner closed: %v from %v", err, from)
	}
	if _, err := kern.WriteToUDPAddrPort(payload(8, 64), sharer.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	if got, _ := recvN(t, sharer, 1); len(got) != 1 {
		t.Fatal("sharer received nothing after the owner closed")
	}
	if err := sharer.Close(); err != nil {
		t.Fatal(err)
	}
	if out, _ := pr.B.Exec("ip", "link", "show", pr.B.Link); len(out) > 0 && strings.Contains(string(out), " xdp") {
		t.Fatalf("XDP program still attached after the last socket closed:\n%s", out)
	}
}

// TestShareRefused: no sharing without Config.Sharers, and no more sharers
// than reserved.
func TestShareRefused(t *testing.T) {
	pr := newPair(t)
	peer := netip.AddrPortFrom(pr.A.Addr, kernelPort)
	plain := open(t, pr.B, peer, nil)
	if err := pr.B.Do(func() error { _, err := plain.Share(netip.AddrPortFrom(pr.B.Addr, xdpPort+1), peer); return err }); err == nil {
		t.Fatal("Share on a path opened without Sharers succeeded")
	}
	plain.Close()
	owner := open(t, pr.B, peer, func(c *Config) { c.Sharers = 1 })
	var s1 *Path
	if err := pr.B.Do(func() (err error) { s1, err = owner.Share(netip.AddrPortFrom(pr.B.Addr, xdpPort+1), peer); return }); err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	if err := pr.B.Do(func() error { _, err := owner.Share(netip.AddrPortFrom(pr.B.Addr, xdpPort+2), peer); return err }); err == nil {
		t.Fatal("a second sharer accepted with Sharers 1")
	}
	if err := pr.B.Do(func() error { _, err := s1.Share(netip.AddrPortFrom(pr.B.Addr, xdpPort+3), peer); return err }); err == nil {
		t.Fatal("a sharer shared")
	}
}
