package cast

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/datapath/mmsg"
	"github.com/walcast/walcast/datapath/udp"
	"github.com/walcast/walcast/wal"
	"github.com/walcast/walcast/wire"
)

// pipeKernel stands in for the kernel under two connected datapath/mmsg
// sockets (batch.Sys swapped): sendmmsg queues each header's bytes as
// one datagram (a GSO super-datagram when it carries UDP_SEGMENT) for the
// other socket, recvmmsg hands queued datagrams out as the kernel does
// with UDP_GRO on (whole super-datagrams, the segment size in a cmsg).
// It lets a benchmark run both loops' user-space work with no system
// call: what callgrind and the CPU profile see is ours, less pipeKernel.
type pipeKernel struct {
	fds   [2]int
	addrs [2]netip.AddrPort
	q     [2]pipeQueue // q[i]: datagrams for socket i
}

type pipeQueue struct {
	bufs      [][]byte
	lens, seg []int
	head, n   int
}

func newPipeKernel(a, b interface{ LocalAddr() netip.AddrPort }) *pipeKernel {
	k := &pipeKernel{fds: [2]int{-1, -1}, addrs: [2]netip.AddrPort{a.LocalAddr(), b.LocalAddr()}}
	for i := range k.q {
		q := &k.q[i]
		q.bufs, q.lens, q.seg = make([][]byte, 64), make([]int, 64), make([]int, 64)
		for j := range q.bufs {
			q.bufs[j] = make([]byte, batch.GROSlot)
		}
	}
	return k
}

// side maps fd to 0 (a) or 1 (b), learning it from the socket's name once.
func (k *pipeKernel) side(fd int) int {
	for i, f := range k.fds {
		if f == fd {
			return i
		}
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		panic(err)
	}
	port := sa.(*unix.SockaddrInet4).Port
	for i, ap := range k.addrs {
		if int(ap.Port()) == port {
			k.fds[i] = fd
			return i
		}
	}
	panic("pipeKernel: unknown socket")
}

func (k *pipeKernel) sendmmsg(fd int, hs []unix.Mmsghdr, _ int) (int, unix.Errno) {
	q := &k.q[1-k.side(fd)]
	for h := range hs {
		if q.n == len(q.bufs) {
			if h == 0 {
				return 0, unix.EAGAIN
			}
			return h, 0
		}
		hdr := &hs[h].Hdr
		j := (q.head + q.n) % len(q.bufs)
		iovs := unsafe.Slice(hdr.Iov, hdr.Iovlen)
		n := 0
		for _, iov := range iovs {
			n += copy(q.bufs[j][n:], unsafe.Slice(iov.Base, iov.Len))
		}
		seg := n
		if hdr.Controllen > 0 {
			seg = int(*(*uint16)(unsafe.Add(unsafe.Pointer(hdr.Control), unix.CmsgLen(0))))
		}
		q.lens[j], q.seg[j] = n, seg
		hs[h].Len = uint32(n)
		q.n++
	}
	return len(hs), 0
}

func (k *pipeKernel) recvmmsg(fd int, hs []unix.Mmsghdr, _ int) (int, unix.Errno) {
	me := k.side(fd)
	q := &k.q[me]
	if q.n == 0 {
		return 0, unix.EAGAIN
	}
	got := 0
	for ; got < len(hs) && q.n > 0; got++ {
		hdr := &hs[got].Hdr
		j := q.head
		hs[got].Len = uint32(copy(unsafe.Slice(hdr.Iov.Base, hdr.Iov.Len), q.bufs[j][:q.lens[j]]))
		hdr.Namelen = batch.PutSockaddr((*unix.RawSockaddrInet6)(unsafe.Pointer(hdr.Name)), unix.AF_INET, k.addrs[1-me])
		c := (*unix.Cmsghdr)(unsafe.Pointer(hdr.Control))
		c.Level, c.Type = unix.SOL_UDP, unix.UDP_GRO
		c.SetLen(unix.CmsgLen(4))
		*(*int32)(unsafe.Add(unsafe.Pointer(hdr.Control), unix.CmsgLen(0))) = int32(q.seg[j])
		hdr.SetControllen(unix.CmsgSpace(4))
		hdr.Flags = 0
		q.head = (q.head + 1) % len(q.bufs)
		q.n--
	}
	return got, 0
}

func (k *pipeKernel) sendto(fd int, p []byte, _ int, _ *unix.RawSockaddrInet6, _ uint32) (int, unix.Errno) {
	q := &k.q[1-k.side(fd)]
	if q.n == len(q.bufs) {
		return 0, unix.EAGAIN
	}
	j := (q.head + q.n) % len(q.bufs)
	q.lens[j], q.seg[j] = copy(q.bufs[j], p), len(p)
	q.n++
	return len(p), 0
}

func (k *pipeKernel) recvfrom(fd int, p []byte, _ int, sa *unix.RawSockaddrInet6, salen *uint32) (int, unix.Errno) {
	me := k.side(fd)
	q := &k.q[me]
	if q.n == 0 {
		return 0, unix.EAGAIN
	}
	j := q.head
	n := copy(p, q.bufs[j][:q.lens[j]])
	if sa != nil {
		*salen = batch.PutSockaddr(sa, unix.AF_INET, k.addrs[1-me])
	}
	q.head = (q.head + 1) % len(q.bufs)
	q.n--
	return n, 0
}

// benchClock is the loops' clock in these benchmarks: it moves on a
// fixed step per read, so that the timers (ticks, Status, probes) run as
// often per iteration under callgrind as at full speed.
type benchClock struct{ t int64 }

func (c *benchClock) now() int64 { c.t += 250; return c.t }

// BenchmarkLoopPingPong runs the ping-pong of cast bench rtt's
// casting-udp row (a client loop and an echo loop, each with a Sender
// and a Receiver, over datapath/udp) on one goroutine with pipeKernel in
// place of the kernel: per op one round trip (one client and one echo
// iteration). The /idle row is one iteration of a loop with nothing to
// receive: what a spinning loop adds before it sees a datagram.
func BenchmarkLoopPingPong(b *testing.B) {
	pa, pb := openPair(b, "udp", false)
	k := newPipeKernel(pa.(*udp.Path), pb.(*udp.Path))
	saved := batch.Sys
	batch.Sys.Sendto, batch.Sys.Recvfrom = k.sendto, k.recvfrom
	b.Cleanup(func() { batch.Sys = saved })
	clock := &benchClock{}
	newLoop := func(p datapath.Path, onRecord func(*Loop, wire.Header, []byte)) *Loop {
		snd, err := protocol.NewSender(protocol.DefaultSenderConfig(), nil)
		if err != nil {
			b.Fatal(err)
		}
		rcv, err := protocol.NewReceiver(protocol.DefaultReceiverConfig())
		if err != nil {
			b.Fatal(err)
		}
		l, err := NewLoop(LoopConfig{Path: p, Sender: snd, Receiver: rcv, OnRecord: onRecord})
		if err != nil {
			b.Fatal(err)
		}
		l.vclock = clock.now
		return l
	}
	ping := make([]byte, 112)
	rtts := 0
	client := newLoop(pa, func(l *Loop, _ wire.Header, _ []byte) {
		rtts++
		_, _ = l.Send(1, ping)
	})
	echo := newLoop(pb, func(l *Loop, h wire.Header, p []byte) { _, _ = l.Send(h.Type, p) })
	if _, err := client.Send(1, ping); err != nil {
		b.Fatal(err)
	}
	step := func() {
		if !client.iterate() || !echo.iterate() {
			b.Fatal(client.err, echo.err)
		}
	}
	b.Run("rtt", func(b *testing.B) {
		for range 100 {
			step()
		}
		r0 := rtts
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			step()
		}
		if rtts-r0 < b.N/2 {
			b.Fatalf("%d round trips in %d steps", rtts-r0, b.N)
		}
	})
	b.Run("idle", func(b *testing.B) {
		idle := newLoop(pa, nil)
		for range 100 {
			idle.iterate()
		}
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			idle.iterate()
		}
	})
}

// BenchmarkLoopPipe runs a sending Loop (the producer in OnPoll, 64
// records per iteration) and a receiving Loop (records counted in
// OnRecord) over datapath/mmsg with GSO and GRO, on one goroutine, with
// pipeKernel in place of the kernel: the casting layer's user-space
// work per record (ns/rec), flow control and Status included. The +wal
// rows give the Sender an in-memory-flushed WAL's append path.
//
// The +batch rows produce with Loop.SendBatch, one call an iteration;
// the +ring rows with Loop.Publish into the loop's SendRing (the
// Producer's path), which the next iteration drains.
func BenchmarkLoopPipe(b *testing.B) {
	for _, size := range []int{144, 1443} {
		for _, withWAL := range []bool{false, true} {
			for _, how := range []string{"", "+batch", "+ring"} {
				name := fmt.Sprint(size)
				if withWAL {
					name += "+wal"
				}
				b.Run(name+how, func(b *testing.B) { benchLoopPipe(b, size, withWAL, how) })
			}
		}
	}
	// A flow-control table of MaxReceivers slots, as cast send gives a
	// multicast group (one receiver in it here).
	b.Run("144+batch+table", func(b *testing.B) { benchLoopPipe(b, 144, false, "+batch+table") })
}

func benchLoopPipe(b *testing.B, size int, withWAL bool, how string) {
	const per = 64
	pa, pb := openPair(b, "mmsg", false)
	a, bb := pa.(*mmsg.Path), pb.(*mmsg.Path)
	if !a.Features().GSO || !bb.Features().GRO {
		b.Skipf("needs GSO and GRO: %s %s", a.Features().GSOReason, bb.Features().GROReason)
	}
	k := newPipeKernel(a, bb)
	saved := batch.Sys
	batch.Sys.Sendmmsg, batch.Sys.Recvmmsg = k.sendmmsg, k.recvmmsg
	b.Cleanup(func() { batch.Sys = saved })

	var log protocol.Log
	if withWAL {
		w, err := wal.Open(wal.Config{Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { w.Close() })
		log = w
	}
	rc := protocol.DefaultReceiverConfig()
	rcv, err := protocol.NewReceiver(rc)
	if err != nil {
		b.Fatal(err)
	}
	var got int
	slot := max(protocol.DefaultMaxFrame, 2048)
	rl, err := NewLoop(LoopConfig{Path: pb, Receiver: rcv, Batch: per, Slot: slot,
		OnRecord: func(*Loop, wire.Header, []byte) { got++ }})
	if err != nil {
		b.Fatal(err)
	}
	sc := protocol.DefaultSenderConfig()
	if strings.HasSuffix(how, "+table") {
		sc.MaxReceivers = protocol.MaxReceivers
		how = strings.TrimSuffix(how, "+table")
	}
	snd, err := protocol.NewSender(sc, log)
	if err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, size-wire.HeaderSize)
	payloads := make([][]byte, per)
	for i := range payloads {
		payloads[i] = payload
	}
	sent, refused := 0, 0
	ring := 0
	if how == "+ring" {
		ring = 4 * per
	}
	sl, err := NewLoop(LoopConfig{Path: pa, Sender: snd, Batch: per, Slot: slot, SendRing: ring,
		OnPoll: func(l *Loop, _ int64) {
			if how == "+ring" {
				for range per {
					if l.Publish(1, payload) != nil {
						refused++
						return
					}
					sent++
				}
				return
			}
			if how == "+batch" {
				n, err := l.SendBatch(1, payloads)
				sent += n
				if err != nil {
					refused++
				}
				return
			}
			for range per {
				if _, err := l.Send(1, payload); err != nil {
					refused++
					return
				}
				sent++
			}
		}})
	if err != nil {
		b.Fatal(err)
	}
	clock := &benchClock{}
	sl.vclock, rl.vclock = clock.now, clock.now
	step := func() {
		if !sl.iterate() || !rl.iterate() {
			b.Fatal(sl.err, rl.err)
		}
	}
	for range 100 { // warm: flow control settles, the rings are touched
		step()
	}
	sent0, got0 := sent, got
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		step()
	}
	b.StopTimer()
	if got-got0 < (sent-sent0)/2 {
		b.Fatalf("sent %d, delivered %d, refused %d", sent-sent0, got-got0, refused)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(got-got0), "ns/rec")
	b.ReportMetric(float64(got-got0)/float64(b.N), "rec/op")
	if testing.Verbose() {
		b.Logf("sender %+v\nreceiver %+v\nrefused %d", snd.Stats(), rcv.Stats(), refused)
	}
}
