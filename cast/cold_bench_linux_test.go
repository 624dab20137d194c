package cast

// BenchmarkColdPingPong runs BenchmarkLoopPingPong's ping-pong (Batch 1)
// hot (pipeKernel, no system call: the user-space work alone) and cold
// (each pipeKernel call also makes one real system call, getppid, so
// that the code after it runs in the state a real sendto/recvfrom leaves
// it in), next to the minimal floor loop (one sendto and one recvfrom per
// side) treated the same. casting cold − floor cold is what the casting
// loops' user code adds to a round trip's CPU on this machine; casting
// hot − floor hot what it adds with warm caches (issue 26 item 4).
// BenchmarkColdIdle is the same for one empty poll; BenchmarkColdPieces
// prices a clock read and page touches after a system call.

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/datapath/udp"
	"github.com/walcast/walcast/wire"
)

func BenchmarkColdPingPong(b *testing.B) {
	for _, flush := range []bool{false, true} {
		name := "hot"
		if flush {
			name = "cold"
			// The loops' own clock, as in the real rows (hot, the real
			// clock lets timers fire at pipeKernel's pace: vclock).
			b.Run("casting/cold-realclock", func(b *testing.B) { benchColdCasting(b, true, true) })
		}
		b.Run("casting/"+name, func(b *testing.B) { benchColdCasting(b, flush, false) })
		b.Run("floor/"+name, func(b *testing.B) { benchColdFloor(b, flush, false) })
		b.Run("floor+frame/"+name, func(b *testing.B) { benchColdFloor(b, flush, true) })
	}
	b.Run("getppid", func(b *testing.B) {
		for range b.N {
			unix.RawSyscall(unix.SYS_GETPPID, 0, 0, 0)
		}
	})
}

var coldCalls int

func coldInstall(b *testing.B, k *pipeKernel, flush bool) {
	saved := batch.Sys
	b.Cleanup(func() { batch.Sys = saved })
	batch.Sys.Sendto = func(fd int, p []byte, f int, sa *unix.RawSockaddrInet6, sl uint32) (int, unix.Errno) {
		coldCalls++
		if flush {
			unix.RawSyscall(unix.SYS_GETPPID, 0, 0, 0)
		}
		return k.sendto(fd, p, f, sa, sl)
	}
	batch.Sys.Recvfrom = func(fd int, p []byte, f int, sa *unix.RawSockaddrInet6, sl *uint32) (int, unix.Errno) {
		coldCalls++
		if flush {
			unix.RawSyscall(unix.SYS_GETPPID, 0, 0, 0)
		}
		return k.recvfrom(fd, p, f, sa, sl)
	}
}

func benchColdCasting(b *testing.B, flush, real bool) {
	pa, pb, _ := coldPair(b, flush)
	clock := &benchClock{}
	newLoop := func(p datapath.Path, onRecord func(*Loop, wire.Header, []byte)) *Loop {
		snd, _ := protocol.NewSender(protocol.DefaultSenderConfig(), nil)
		rcv, _ := protocol.NewReceiver(protocol.DefaultReceiverConfig())
		l, err := NewLoop(LoopConfig{Path: p, Sender: snd, Receiver: rcv, OnRecord: onRecord, Batch: 1})
		if err != nil {
			b.Fatal(err)
		}
		if !real {
			l.vclock = clock.now
		}
		return l
	}
	ping := make([]byte, 128)
	rtts := 0
	client := newLoop(pa, func(l *Loop, _ wire.Header, _ []byte) {
		rtts++
		_ = l.Now()
		_ = l.Now()
		_, _ = l.Send(1, ping)
	})
	echo := newLoop(pb, func(l *Loop, h wire.Header, p []byte) { _, _ = l.Send(h.Type, p) })
	_, _ = client.Send(1, ping)
	for range 1000 {
		client.iterate()
		echo.iterate()
	}
	r0, c0 := rtts, coldCalls
	b.ResetTimer()
	for range b.N {
		client.iterate()
		echo.iterate()
	}
	b.StopTimer()
	b.ReportMetric(float64(coldCalls-c0)/float64(rtts-r0), "calls/rtt")
	b.ReportMetric(float64(rtts-r0)/float64(b.N), "rtt/op")
}

// benchColdFloor is the minimal loop; framed, plus the wire format's own
// work per round trip and nothing else (as the throughput row
// floor+frame): each side copies the 128-byte payload into the next slot
// of a ring of the hot ring's size, stamps a seq and seals the frame
// (header, CRC-32C), and decodes and checks every frame it receives. The
// casting loops cannot do less than framed; casting − floor+frame is
// the protocol's state (sequencing, reorder, flow control, Status,
// timers, counters).
func benchColdFloor(b *testing.B, flush, framed bool) {
	pa, pb, k := coldPair(b, flush)
	v := batch.New(1, 2048)
	v.Append(make([]byte, 16), netip.AddrPort{})
	_, _ = pa.Send(v)
	_, _ = pb.Send(v)
	_, _ = pa.Recv(v)
	_, _ = pb.Recv(v)
	fa, fb := k.fds[0], k.fds[1]
	out := make([]byte, 144)
	in := make([]byte, 2048)
	ein := make([]byte, 2048)
	const slots, frame = protocol.DefaultSendRingSlots, 144
	ringA, ringB := make([]byte, slots*frame), make([]byte, slots*frame)
	payload := make([]byte, frame-wire.HeaderSize)
	// seal copies p into the ring's slot for seq, stamps and seals it.
	seal := func(ring, p []byte, seq int) []byte {
		fr := ring[seq%slots*frame : (seq%slots+1)*frame]
		copy(fr[wire.HeaderSize:], p)
		binary.LittleEndian.PutUint64(fr[wire.HeaderSize:], uint64(seq))
		_ = wire.Seal(fr, 1)
		return fr
	}
	check := func(fr []byte) []byte {
		_, p, _, err := wire.DecodeFrame(fr)
		if err != nil {
			b.Fatal(err)
		}
		return p
	}
	c0 := coldCalls
	b.ResetTimer()
	for i := range b.N {
		t0 := nanotimeForCold()
		if !framed {
			out[0] = byte(i)
			batch.Sys.Sendto(fa, out, 0, nil, 0)
			n, _ := batch.Sys.Recvfrom(fb, ein, 0, nil, nil)
			batch.Sys.Sendto(fb, ein[:n], 0, nil, 0)
			batch.Sys.Recvfrom(fa, in, 0, nil, nil)
		} else {
			batch.Sys.Sendto(fa, seal(ringA, payload, i), 0, nil, 0)
			n, _ := batch.Sys.Recvfrom(fb, ein, 0, nil, nil)
			batch.Sys.Sendto(fb, seal(ringB, check(ein[:n]), i), 0, nil, 0)
			n, _ = batch.Sys.Recvfrom(fa, in, 0, nil, nil)
			_ = check(in[:n])
		}
		coldSink += nanotimeForCold() - t0
	}
	b.StopTimer()
	b.ReportMetric(float64(coldCalls-c0)/float64(b.N), "calls/rtt")
}

var coldSink int64
var coldEpoch = time.Now()

func nanotimeForCold() int64 { return int64(time.Since(coldEpoch)) }

func BenchmarkColdIdle(b *testing.B) {
	for _, flush := range []bool{false, true} {
		name := "hot"
		if flush {
			name = "cold"
		}
		for _, off := range []bool{false, true} {
			n := name
			if off {
				n += "-nocounters"
			}
			b.Run("casting/"+n, func(b *testing.B) {
				pa, _, _ := coldPair(b, flush)
				snd, _ := protocol.NewSender(protocol.DefaultSenderConfig(), nil)
				rcv, _ := protocol.NewReceiver(protocol.DefaultReceiverConfig())
				polls := 0 // an OnPoll as the RTT client's (a closure over its state)
				l, err := NewLoop(LoopConfig{Path: pa, Sender: snd, Receiver: rcv, Batch: 1, Counters: Counters{Off: off},
					OnPoll: func(*Loop, int64) { polls++ }})
				if err != nil {
					b.Fatal(err)
				}
				for range 1000 {
					l.iterate()
				}
				b.ResetTimer()
				for range b.N {
					l.iterate()
				}
			})
		}
		b.Run("floor/"+name, func(b *testing.B) {
			pa, pb, k := coldPair(b, flush)
			v := batch.New(1, 2048)
			v.Append(make([]byte, 16), netip.AddrPort{})
			_, _ = pa.Send(v)
			_, _ = pb.Recv(v)
			fb := k.fds[1]
			in := make([]byte, 2048)
			b.ResetTimer()
			for range b.N {
				batch.Sys.Recvfrom(fb, in, 0, nil, nil)
			}
		})
	}
}

func BenchmarkColdPieces(b *testing.B) {
	ep := time.Now()
	var s int64
	b.Run("getppid", func(b *testing.B) {
		for range b.N {
			unix.RawSyscall(unix.SYS_GETPPID, 0, 0, 0)
		}
	})
	b.Run("getppid+clock", func(b *testing.B) {
		for range b.N {
			unix.RawSyscall(unix.SYS_GETPPID, 0, 0, 0)
			s += int64(time.Since(ep))
		}
	})
	b.Run("getppid+2clock", func(b *testing.B) {
		for range b.N {
			unix.RawSyscall(unix.SYS_GETPPID, 0, 0, 0)
			s += int64(time.Since(ep))
			s += int64(time.Since(ep))
		}
	})
	pages := make([]byte, 65<<12)
	for _, np := range []int{0, 8, 32, 64} {
		b.Run(fmt.Sprintf("getppid+%dpages", np), func(b *testing.B) {
			for range b.N {
				unix.RawSyscall(unix.SYS_GETPPID, 0, 0, 0)
				for p := range np {
					s += int64(pages[p<<12+64])
				}
			}
		})
	}
	coldSink += s
}

// coldPair opens a connected pair of udp paths over a pipeKernel whose
// calls are made cold (flush) or not (coldInstall).
func coldPair(b *testing.B, flush bool) (pa, pb datapath.Path, k *pipeKernel) {
	pa, pb = openPair(b, "udp", false)
	k = newPipeKernel(pa.(*udp.Path), pb.(*udp.Path))
	coldInstall(b, k, flush)
	return pa, pb, k
}
