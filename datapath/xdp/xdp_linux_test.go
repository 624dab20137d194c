package xdp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/bpf"
	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/internal/netns"
	"golang.org/x/sys/unix"
)

const xdpPort, kernelPort = 7000, 7001

func TestXDPToKernel(t *testing.T) {
	pr := newPair(t)
	rcv := kernelUDP(t, pr.B, kernelPort)
	p := open(t, pr.A, netip.AddrPortFrom(pr.B.Addr, kernelPort), nil)
	t.Logf("attached %v, zero-copy %v", p.Mode(), p.ZeroCopy())
	if p.ZeroCopy() {
		t.Error("veth reported zero-copy")
	}
	var msgs [][]byte
	for i, s := range sizes {
		msgs = append(msgs, payload(i, s))
	}
	sendAll(t, p, msgs, netip.AddrPort{})
	buf := make([]byte, 2048)
	for i, want := range msgs {
		rcv.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, from, err := rcv.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("datagram %d (%d bytes): %v; B's Udp InCsumErrors=%d; stats %+v",
				i, len(want), err, snmpUDP(t, pr.B, "InCsumErrors"), p.Stats())
		}
		if !bytes.Equal(buf[:n], want) {
			t.Fatalf("datagram %d: %d bytes differ from the %d sent", i, n, len(want))
		}
		if from != p.LocalAddr() {
			t.Fatalf("datagram %d from %v, want %v", i, from, p.LocalAddr())
		}
	}
	if e := snmpUDP(t, pr.B, "InCsumErrors"); e != 0 {
		t.Fatalf("InCsumErrors %d", e)
	}
	st := p.Stats()
	if st.TxPackets != uint64(len(msgs)) || st.KernelTxInvalidDescs != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestBadChecksumDropped is the control for TestXDPToKernel: the same frame
// with one checksum bit flipped is dropped by the receiving kernel.
func TestBadChecksumDropped(t *testing.T) {
	pr := newPair(t)
	rcv := kernelUDP(t, pr.B, kernelPort)
	p := open(t, pr.A, netip.AddrPortFrom(pr.B.Addr, kernelPort), nil)
	before := snmpUDP(t, pr.B, "InCsumErrors")
	sendRaw(t, p, []byte("corrupt"), func(f []byte) { f[offUDPCsum] ^= 0x10 })
	sendRaw(t, p, []byte("intact"), func([]byte) {})
	buf := make([]byte, 64)
	rcv.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, _, err := rcv.ReadFromUDP(buf)
	if err != nil || string(buf[:n]) != "intact" {
		t.Fatalf("got %q %v, want only the intact datagram", buf[:n], err)
	}
	if after := snmpUDP(t, pr.B, "InCsumErrors"); after != before+1 {
		t.Fatalf("InCsumErrors %d → %d, want +1", before, after)
	}
}

// sendRaw transmits one datagram to the peer after mutate changed its frame.
func sendRaw(t *testing.T, p *Path, b []byte, mutate func([]byte)) {
	t.Helper()
	p.reclaim()
	addr := p.txFree[len(p.txFree)-1]
	p.txFree = p.txFree[:len(p.txFree)-1]
	frame := p.umem[addr : addr+p.frameLen]
	copy(frame[offPayload:], b)
	l := p.hdr.put(frame, &p.peerMAC, p.cfg.Peer, len(b))
	mutate(frame[:l])
	p.tx.descs[p.tx.cachedProd&p.tx.mask] = unix.XDPDesc{Addr: addr, Len: uint32(l)}
	p.tx.cachedProd++
	p.tx.publish()
	p.kick()
}

// TestKernelToXDP: datagrams from a kernel socket arrive on the AF_XDP
// socket with their payload and source address.
func TestKernelToXDP(t *testing.T) {
	pr := newPair(t)
	p := open(t, pr.B, netip.AddrPort{}, nil)
	snd := kernelUDP(t, pr.A, kernelPort)
	dst := net.UDPAddrFromAddrPort(p.LocalAddr())
	var msgs [][]byte
	for i, s := range sizes {
		msgs = append(msgs, payload(i, s))
		if _, err := snd.WriteToUDP(msgs[i], dst); err != nil {
			t.Fatal(err)
		}
	}
	got, from := recvN(t, p, len(msgs))
	if len(got) != len(msgs) {
		t.Fatalf("received %d of %d; stats %+v", len(got), len(msgs), p.Stats())
	}
	for i := range msgs {
		if !bytes.Equal(got[i], msgs[i]) {
			t.Fatalf("datagram %d differs (%d vs %d bytes)", i, len(got[i]), len(msgs[i]))
		}
		if want := netip.AddrPortFrom(pr.A.Addr, kernelPort); from[i] != want {
			t.Fatalf("datagram %d from %v, want %v", i, from[i], want)
		}
	}
	if st := p.Stats(); st.RxInvalid != 0 || st.RxPackets != uint64(len(msgs)) {
		t.Fatalf("stats %+v", st)
	}
}

// TestXDPToXDP: both ends on AF_XDP, echo: the receiver answers each
// datagram to its source (its MAC learned from the frame, no Peer set).
func TestXDPToXDP(t *testing.T) {
	pr := newPair(t)
	big := func(c *Config) { c.RxFrames, c.FillFrames = 1024, 1024 } // room for the whole burst, all posted
	a := open(t, pr.A, netip.AddrPortFrom(pr.B.Addr, xdpPort), big)
	b := open(t, pr.B, netip.AddrPort{}, big)
	const n = 500
	var msgs [][]byte
	for i := range n {
		msgs = append(msgs, payload(i, 8+i%1400))
	}
	sendAll(t, a, msgs, netip.AddrPort{})
	got, from := recvN(t, b, n)
	if len(got) != n {
		t.Fatalf("B received %d of %d; stats %+v", len(got), n, b.Stats())
	}
	for i := range got {
		if !bytes.Equal(got[i], msgs[i]) || from[i] != a.LocalAddr() {
			t.Fatalf("datagram %d differs or from %v", i, from[i])
		}
	}
	sendAll(t, b, got, from[0]) // echo to the learned source
	back, _ := recvN(t, a, n)
	if len(back) != n {
		t.Fatalf("A received %d of %d echoes", len(back), n)
	}
	// No neighbour known for a stranger.
	v := batch.New(1, 64)
	v.Append([]byte("x"), netip.MustParseAddrPort("10.199.0.99:1"))
	if k, err := b.Send(v); k != 0 || !errors.Is(err, ErrNoNeighbor) {
		t.Fatalf("send to a stranger: %d %v", k, err)
	}
}

// TestNonMatchingTrafficReachesKernel: with the redirect program attached,
// ARP/ICMP and UDP to other ports still reach B's kernel, and none of it
// shows up on the AF_XDP socket.
func TestNonMatchingTrafficReachesKernel(t *testing.T) {
	c := netns.DefaultConfig()
	c.StaticNeigh = false // ARP must work through the program too
	pr := netns.New(t, c)
	p := open(t, pr.B, netip.AddrPort{}, nil)
	if err := pr.A.Ping(pr.B.Addr, 2*time.Second); err != nil {
		t.Fatalf("ping A→B with redirect on B: %v", err)
	}
	other := kernelUDP(t, pr.B, kernelPort)
	snd := kernelUDP(t, pr.A, 0)
	for i := range 10 {
		if _, err := snd.WriteToUDP(payload(i, 32), net.UDPAddrFromAddrPort(netip.AddrPortFrom(pr.B.Addr, kernelPort))); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 64)
	for i := range 10 {
		other.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := other.Read(buf); err != nil {
			t.Fatalf("kernel socket on the other port got %d of 10: %v", i, err)
		}
	}
	if got, _ := recvN(t, p, 1); len(got) != 0 {
		t.Fatalf("AF_XDP socket received %d non-matching datagrams", len(got))
	}
	if st := p.Stats(); st.RxInvalid != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestFillRingStarvation: with 16 RX frames and nobody receiving, the
// kernel runs out of fill-ring buffers and counts the drops; after Recv
// returns the frames, traffic flows again.
func TestFillRingStarvation(t *testing.T) {
	pr := newPair(t)
	p := open(t, pr.B, netip.AddrPort{}, func(c *Config) { c.RxFrames = 16 })
	snd := kernelUDP(t, pr.A, 0)
	dst := net.UDPAddrFromAddrPort(p.LocalAddr())
	for i := range 64 {
		if _, err := snd.WriteToUDP(payload(i, 64), dst); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	got, _ := recvN(t, p, 64)
	st := p.Stats()
	t.Logf("received %d of 64; stats %+v", len(got), st)
	if len(got) != 16 {
		t.Fatalf("received %d, want the 16 that had buffers", len(got))
	}
	for i := range got {
		if binary.BigEndian.Uint64(got[i]) != uint64(i) {
			t.Fatalf("datagram %d has seq %d", i, binary.BigEndian.Uint64(got[i]))
		}
	}
	if drops := st.KernelRxDropped + st.KernelRxRingFull; drops != 48 || st.KernelRxFillRingEmpty == 0 {
		t.Fatalf("kernel drops %d (want 48), fill-ring-empty %d", drops, st.KernelRxFillRingEmpty)
	}
	for i := range 8 {
		snd.WriteToUDP(payload(100+i, 64), dst)
	}
	if got, _ := recvN(t, p, 8); len(got) != 8 {
		t.Fatalf("after refill received %d of 8", len(got))
	}
}

// TestTxCompletionBacklog: 8 TX frames, 200 datagrams: Send reports partial
// progress (never an error) until completions return frames, and every
// frame comes back.
func TestTxCompletionBacklog(t *testing.T) {
	pr := newPair(t)
	rcv := kernelUDP(t, pr.B, kernelPort)
	p := open(t, pr.A, netip.AddrPortFrom(pr.B.Addr, kernelPort), func(c *Config) { c.TxFrames = 8 })
	const n = 200
	v := batch.New(64, 2048)
	sent, calls, partial := 0, 0, 0
	for sent < n {
		v.Reset()
		for i := sent; i < n && !v.Full(); i++ {
			v.Append(payload(i, 100), netip.AddrPort{})
		}
		k, err := p.Send(v)
		if err != nil {
			t.Fatal(err)
		}
		if k > 8 {
			t.Fatalf("sent %d with 8 TX frames", k)
		}
		if k < v.Len() {
			partial++
		}
		sent += k
		calls++
		if calls > 100000 {
			t.Fatalf("stuck at %d; stats %+v", sent, p.Stats())
		}
	}
	buf := make([]byte, 2048)
	for i := range n {
		rcv.SetReadDeadline(time.Now().Add(2 * time.Second))
		k, err := rcv.Read(buf)
		if err != nil || binary.BigEndian.Uint64(buf[:k]) != uint64(i) {
			t.Fatalf("datagram %d: %v", i, err)
		}
	}
	p.reclaim()
	if len(p.txFree) != 8 {
		t.Fatalf("%d of 8 TX frames back after all completions", len(p.txFree))
	}
	if partial == 0 || p.Stats().TxFull == 0 {
		t.Fatalf("no partial send in %d calls", calls)
	}
	t.Logf("%d calls, %d partial; stats %+v", calls, partial, p.Stats())
}

// TestBurstLargerThanRings: 4000 datagrams at once into 64-frame rings
// while the receiver polls: what arrives is intact and in order, and every
// missing datagram is counted by the kernel.
func TestBurstLargerThanRings(t *testing.T) {
	pr := newPair(t)
	p := open(t, pr.B, netip.AddrPort{}, func(c *Config) { c.RxFrames = 64 })
	snd := kernelUDP(t, pr.A, 0)
	dst := net.UDPAddrFromAddrPort(p.LocalAddr())
	const n = 4000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			snd.WriteToUDP(payload(i, 256), dst)
		}
	}()
	got, _ := recvN(t, p, n)
	<-done
	more, _ := recvN(t, p, n)
	got = append(got, more...)
	prev := -1
	for _, g := range got {
		s := int(binary.BigEndian.Uint64(g))
		if s <= prev || !bytes.Equal(g, payload(s, 256)) {
			t.Fatalf("seq %d after %d, or corrupt", s, prev)
		}
		prev = s
	}
	st := p.Stats()
	drops := st.KernelRxDropped + st.KernelRxRingFull
	t.Logf("received %d of %d, kernel drops %d; stats %+v", len(got), n, drops, st)
	if uint64(len(got))+drops != n {
		t.Fatalf("received %d + dropped %d != sent %d", len(got), drops, n)
	}
}

// TestMultiQueueRefused: a 2-queue device is refused with advice.
func TestMultiQueueRefused(t *testing.T) {
	c := netns.DefaultConfig()
	c.Queues = 2
	pr := netns.New(t, c)
	cfg := DefaultConfig()
	cfg.Interface, cfg.Local = pr.B.Link, netip.AddrPortFrom(pr.B.Addr, xdpPort)
	err := pr.B.Do(func() error {
		p, err := Open(cfg)
		if err == nil {
			p.Close()
		}
		return err
	})
	if !errors.Is(err, ErrMultiQueue) || !strings.Contains(err.Error(), "2 RX queues") {
		t.Fatalf("Open on a 2-queue veth: %v", err)
	}
}

// TestImpairOnXDPReceiver: the impair logic embedded in the redirect
// program drops every 2nd datagram before the socket sees it.
func TestImpairOnXDPReceiver(t *testing.T) {
	pr := newPair(t)
	im, err := bpf.NewImpair(bpf.ImpairConfig{Port: xdpPort, EveryNth: 2, RecordType: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	p := open(t, pr.B, netip.AddrPort{}, func(c *Config) { c.Impair = im })
	snd := kernelUDP(t, pr.A, 0)
	for i := range 100 {
		snd.WriteToUDP(payload(i, 64), net.UDPAddrFromAddrPort(p.LocalAddr()))
	}
	got, _ := recvN(t, p, 100)
	if len(got) != 50 {
		t.Fatalf("received %d of 100, want 50", len(got))
	}
	for i, g := range got {
		if s := binary.BigEndian.Uint64(g); s != uint64(2*i) {
			t.Fatalf("datagram %d has seq %d, want %d", i, s, 2*i)
		}
	}
	if c, _ := im.Counters(); c.Dropped != 50 {
		t.Fatalf("counters %+v", c)
	}
}

// TestSendRecvAllocs: the hot path allocates nothing.
func TestSendRecvAllocs(t *testing.T) {
	pr := newPair(t)
	a := open(t, pr.A, netip.AddrPortFrom(pr.B.Addr, xdpPort), nil)
	b := open(t, pr.B, netip.AddrPort{}, nil)
	sv, rv := batch.New(16, 2048), batch.New(16, 2048)
	for i := range 16 {
		sv.Append(payload(i, 128), netip.AddrPort{})
	}
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := a.Send(sv); err != nil {
			t.Fatal(err)
		}
		for range 1000 {
			if n, _ := b.Recv(rv); n > 0 {
				break
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per Send+Recv", allocs)
	}
}

func TestClosed(t *testing.T) {
	pr := newPair(t)
	p := open(t, pr.B, netip.AddrPort{}, nil)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	v := batch.New(1, 64)
	if _, err := p.Recv(v); !errors.Is(err, datapath.ErrClosed) {
		t.Fatalf("Recv after Close: %v", err)
	}
	out, _ := pr.B.Exec("ip", "link", "show", pr.B.Link)
	if bytes.Contains(out, []byte("xdp")) {
		t.Fatalf("program still attached after Close:\n%s", out)
	}
}

// TestTxBudget: with XDP_MAX_TX_SKB_BUDGET (Linux 6.17+) a batch of 64 goes
// out in one kick; with the kernel's fixed 32 it takes two, the first
// answered EAGAIN. Both deliver everything.
func TestTxBudget(t *testing.T) {
	pr := newPair(t)
	rcv := kernelUDP(t, pr.B, kernelPort)
	for _, budget := range []int{0, 32} {
		p := open(t, pr.A, netip.AddrPortFrom(pr.B.Addr, kernelPort), func(c *Config) { c.TxBudget = budget })
		if budget == 0 && p.TxBudget() == 32 {
			t.Log("kernel lacks XDP_MAX_TX_SKB_BUDGET (Linux 6.17): one kick per 32 descriptors")
		}
		v := batch.New(64, 2048)
		for i := range 64 {
			v.Append(payload(i, 100), netip.AddrPort{})
		}
		before := p.Stats()
		if n, err := p.Send(v); n != 64 || err != nil {
			t.Fatalf("budget %d: sent %d, %v", budget, n, err)
		}
		st := p.Stats()
		kicks, again := st.TxKicks-before.TxKicks, st.TxAgain-before.TxAgain
		want := uint64((64 + p.TxBudget() - 1) / p.TxBudget())
		if kicks != want || again != want-1 {
			t.Fatalf("budget %d (effective %d): %d kicks, %d EAGAIN for 64 frames; want %d, %d", budget, p.TxBudget(), kicks, again, want, want-1)
		}
		buf := make([]byte, 2048)
		for i := range 64 {
			rcv.SetReadDeadline(time.Now().Add(2 * time.Second))
			if _, _, err := rcv.ReadFromUDPAddrPort(buf); err != nil {
				t.Fatalf("budget %d: datagram %d: %v", budget, i, err)
			}
		}
		p.Close()
	}
}

// TestBusyPollOnlyWithNAPI: busy polling starts after the first frames
// and only if the socket has a NAPI context (SO_INCOMING_NAPI_ID); before,
// and without one (veth on Linux 6.18), empty polls make no system call.
func TestBusyPollOnlyWithNAPI(t *testing.T) {
	pr := newPair(t)
	for _, mode := range []bpf.Mode{bpf.ModeNative, bpf.ModeGeneric} {
		a := open(t, pr.A, netip.AddrPortFrom(pr.B.Addr, xdpPort), func(c *Config) { c.XDPMode, c.BusyPoll = mode, 50 })
		b := open(t, pr.B, netip.AddrPortFrom(pr.A.Addr, xdpPort), func(c *Config) { c.XDPMode, c.BusyPoll = mode, 50 })
		v := batch.New(8, 2048)
		for range 100 {
			b.Recv(v)
		}
		if st := b.Stats(); st.BusyPolling || st.RecvKicks != 0 {
			t.Fatalf("%v: busy polling before any frame (no NAPI id yet): %+v", mode, st)
		}
		sendAll(t, a, [][]byte{payload(1, 64)}, netip.AddrPort{})
		if got, _ := recvN(t, b, 1); len(got) != 1 {
			t.Fatalf("%v: datagram lost", mode)
		}
		napi, st := b.NAPIID(), b.Stats()
		t.Logf("%v attach: NAPI id %d, busy polling %v", mode, napi, st.BusyPolling)
		if st.BusyPolling != (napi != 0) {
			t.Fatalf("%v: busy polling %v with NAPI id %d", mode, st.BusyPolling, napi)
		}
		for range 1000 {
			b.Recv(v)
		}
		if kicks := b.Stats().RecvKicks - st.RecvKicks; !st.BusyPolling && kicks != 0 {
			t.Fatalf("%v: %d recvfrom calls on 1000 empty polls without a NAPI context", mode, kicks)
		} else if st.BusyPolling && kicks != 1000 {
			t.Fatalf("%v: %d busy polls on 1000 empty polls", mode, kicks)
		}
		a.Close()
		b.Close()
	}
}
