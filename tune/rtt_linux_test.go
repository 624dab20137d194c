package tune

import (
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/internal/benchkit"
	"github.com/walcast/walcast/internal/netns"
	"golang.org/x/sys/unix"
)

// rttCase is one host setting under test: veth GRO (NAPI mode) with
// rx-udp-gro-forwarding, SO_BUSY_POLL on both sockets (µs, per socket, so
// no global sysctl is touched), and whether the loops spin on a
// non-blocking socket or block in recv.
type rttCase struct {
	gro   bool
	busy  int
	block bool
}

func (c rttCase) String() string {
	mode := "spin"
	if c.block {
		mode = "block"
	}
	return fmt.Sprintf("gro=%s/busypoll=%d/%s", onOff(c.gro), c.busy, mode)
}

// udpSocket opens a connected UDP socket inside h's namespace.
func udpSocket(h netns.Host, local, remote netip.AddrPort, c rttCase) (int, error) {
	var fd int
	err := h.Do(func() error {
		flags := unix.SOCK_DGRAM | unix.SOCK_CLOEXEC
		if !c.block {
			flags |= unix.SOCK_NONBLOCK
		}
		var err error
		if fd, err = unix.Socket(unix.AF_INET, flags, 0); err != nil {
			return err
		}
		if c.busy > 0 {
			if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_BUSY_POLL, c.busy); err != nil {
				return fmt.Errorf("SO_BUSY_POLL: %w", err)
			}
		}
		if c.block {
			tv := unix.NsecToTimeval(int64(100 * time.Millisecond))
			if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
				return err
			}
		}
		if err := unix.Bind(fd, &unix.SockaddrInet4{Port: int(local.Port()), Addr: local.Addr().As4()}); err != nil {
			return err
		}
		return unix.Connect(fd, &unix.SockaddrInet4{Port: int(remote.Port()), Addr: remote.Addr().As4()})
	})
	return fd, err
}

// recvSpin reads one datagram, spinning on EAGAIN (and on the receive
// timeout of a blocking socket) until stop or deadline.
func recvSpin(fd int, buf []byte, stop *atomic.Bool, deadline int64) (int, error) {
	for i := 0; ; i++ {
		n, err := unix.Read(fd, buf)
		if err == nil {
			return n, nil
		}
		if err != unix.EAGAIN && err != unix.EINTR {
			return 0, err
		}
		if stop.Load() || (i&255 == 255 && time.Now().UnixNano() > deadline) {
			return 0, nil
		}
	}
}

// vethRTT runs n measured round trips (after warm) of size-byte UDP
// datagrams between two namespaces joined by a veth pair: client pinned
// to CPU 0, echo to CPU 1. It returns the RTT distribution, the NAPI id
// the echo socket saw, and the number of lost pings.
func vethRTT(c rttCase, n, warm, size int) (benchkit.Summary, uint32, int, error) {
	cfg := netns.DefaultConfig()
	cfg.GRO = c.gro
	p, err := netns.Create(cfg)
	if p != nil {
		defer p.Close()
	}
	if err != nil {
		return benchkit.Summary{}, 0, 0, err
	}
	if c.gro {
		for _, h := range []netns.Host{p.A, p.B} {
			if err := h.Do(func() error { return NewProber().SetFeature(h.Link, "rx-udp-gro-forwarding", true) }); err != nil {
				return benchkit.Summary{}, 0, 0, err
			}
		}
	}
	a := netip.AddrPortFrom(p.A.Addr, 9300)
	b := netip.AddrPortFrom(p.B.Addr, 9301)
	fa, err := udpSocket(p.A, a, b, c)
	if err != nil {
		return benchkit.Summary{}, 0, 0, err
	}
	defer unix.Close(fa)
	fb, err := udpSocket(p.B, b, a, c)
	if err != nil {
		return benchkit.Summary{}, 0, 0, err
	}
	defer unix.Close(fb)

	// Two locked spinners hold two Ps for good: leave room for the rest.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	var stop atomic.Bool
	echoErr := make(chan error, 1)
	echo, err := affinity.Go(affinity.OnCPU(1), func() {
		buf := make([]byte, 2048)
		for !stop.Load() {
			k, err := recvSpin(fb, buf, &stop, time.Now().Add(time.Second).UnixNano())
			if err != nil {
				echoErr <- err
				return
			}
			if k > 0 {
				if _, err := unix.Write(fb, buf[:k]); err != nil {
					echoErr <- err
					return
				}
			}
		}
		echoErr <- nil
	})
	if err != nil {
		return benchkit.Summary{}, 0, 0, err
	}
	samples := benchkit.NewSamples(n)
	lost := 0
	var cerr error
	client, err := affinity.Go(affinity.OnCPU(0), func() {
		out := make([]byte, size)
		in := make([]byte, 2048)
		for i := range warm + n {
			t0 := time.Now()
			if _, cerr = unix.Write(fa, out); cerr != nil {
				return
			}
			k, err := recvSpin(fa, in, &stop, t0.Add(time.Second).UnixNano())
			if err != nil {
				cerr = err
				return
			}
			if k == 0 {
				lost++
				continue
			}
			if i >= warm {
				samples.Record(time.Since(t0).Nanoseconds())
			}
		}
	})
	if err != nil {
		stop.Store(true)
		echo.Wait()
		return benchkit.Summary{}, 0, 0, err
	}
	client.Wait()
	stop.Store(true)
	echo.Wait()
	if err := errors.Join(cerr, <-echoErr); err != nil {
		return benchkit.Summary{}, 0, 0, err
	}
	id, _ := unix.GetsockoptInt(fb, unix.SOL_SOCKET, unix.SO_INCOMING_NAPI_ID)
	return samples.Summarize(), uint32(id), lost, nil
}

// BenchmarkVethRTT measures what nic.gro and net.busy_read are about:
// ping-pong RTT across a veth pair with and without GRO (NAPI mode) and
// SO_BUSY_POLL, spinning and blocking. b.N is the number of measured
// round trips; run with a fixed count, under the bench lock:
//
//	flock /tmp/walcast-bench.lock go test -run '^$' -bench VethRTT -benchtime 20000x -count 3 ./tune/
func BenchmarkVethRTT(b *testing.B) {
	netns.Require(b)
	var cases []rttCase
	for _, block := range []bool{false, true} {
		for _, gro := range []bool{false, true} {
			for _, busy := range []int{0, 50} {
				cases = append(cases, rttCase{gro: gro, busy: busy, block: block})
			}
		}
	}
	for _, c := range cases {
		b.Run(c.String(), func(b *testing.B) {
			s, id, lost, err := vethRTT(c, b.N, max(b.N/10, 100), 144)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(s.P50), "p50-ns")
			b.ReportMetric(float64(s.P99), "p99-ns")
			b.ReportMetric(float64(s.P999), "p99.9-ns")
			b.ReportMetric(float64(s.Max), "max-ns")
			b.ReportMetric(float64(id), "napi-id")
			b.ReportMetric(float64(lost), "lost")
			b.ReportMetric(0, "ns/op") // wall time per op includes netns setup: not meaningful
		})
	}
}

// The harness itself must work: a short run in each mode completes and
// sees NAPI ids only with GRO on. No timing is asserted.
func TestVethRTTHarness(t *testing.T) {
	netns.Require(t)
	for _, c := range []rttCase{{gro: false, busy: 50}, {gro: true, busy: 50, block: true}} {
		s, id, lost, err := vethRTT(c, 200, 20, 144)
		if err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		if s.N+lost != 200 || s.N == 0 {
			t.Errorf("%v: %d samples, %d lost", c, s.N, lost)
		}
		if (id != 0) != c.gro {
			t.Errorf("%v: NAPI id %d", c, id)
		}
	}
}
