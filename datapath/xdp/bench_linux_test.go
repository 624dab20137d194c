package xdp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/datapath/mmsg"
	"github.com/walcast/walcast/datapath/udp"
	"github.com/walcast/walcast/internal/benchkit"
	"github.com/walcast/walcast/internal/netns"
	"golang.org/x/sys/unix"
)

// benchPath opens one kind of path on h (port 0 for kernel paths means
// any), sending to peer.
type benchPath struct {
	name string
	open func(tb testing.TB, h netns.Host, port uint16, peer netip.AddrPort) datapath.Path
}

var benchPaths = []benchPath{
	{"udp", func(tb testing.TB, h netns.Host, port uint16, peer netip.AddrPort) datapath.Path {
		c := udp.DefaultConfig()
		c.Local, c.Peer = netip.AddrPortFrom(h.Addr, port), peer
		var p *udp.Path
		must(tb, h.Do(func() (err error) { p, err = udp.New(c); return }))
		return p
	}},
	{"mmsg", func(tb testing.TB, h netns.Host, port uint16, peer netip.AddrPort) datapath.Path {
		c := mmsg.DefaultConfig()
		c.Local, c.Peer = netip.AddrPortFrom(h.Addr, port), peer
		var p *mmsg.Path
		must(tb, h.Do(func() (err error) { p, err = mmsg.New(c); return }))
		return p
	}},
	{"xdp", xdpOpen(DefaultConfig().BusyPoll)},
	{"xdp-nobusypoll", xdpOpen(0)},
}

func xdpOpen(busyPoll int) func(tb testing.TB, h netns.Host, port uint16, peer netip.AddrPort) datapath.Path {
	return func(tb testing.TB, h netns.Host, port uint16, peer netip.AddrPort) datapath.Path {
		c := DefaultConfig()
		c.BusyPoll = busyPoll
		if port == 0 {
			port = xdpPort + 1
		}
		c.Interface, c.Local, c.Peer = h.Link, netip.AddrPortFrom(h.Addr, port), peer
		var p *Path
		must(tb, h.Do(func() (err error) { p, err = Open(c); return }))
		return p
	}
}

// swCounters counts, for the calling thread, software perf events (task
// clock in ns, context switches, page faults; an event the kernel refuses
// reads as -1) and the user and system time from getrusage(RUSAGE_THREAD)
// (the task clock ignores exclude_kernel, so it cannot split the two).
type swCounters struct {
	fds [3]int
	ru0 unix.Rusage
}

func openSW() *swCounters {
	c := &swCounters{}
	for i, config := range []uint64{unix.PERF_COUNT_SW_TASK_CLOCK, unix.PERF_COUNT_SW_CONTEXT_SWITCHES, unix.PERF_COUNT_SW_PAGE_FAULTS} {
		attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: config, Bits: unix.PerfBitExcludeHv}
		attr.Size = uint32(unsafe.Sizeof(attr))
		fd, err := unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
		if err != nil {
			fd = -1
		}
		c.fds[i] = fd
	}
	unix.Getrusage(unix.RUSAGE_THREAD, &c.ru0)
	return c
}

// read returns task clock (ns), context switches, page faults, user ns and
// system ns since openSW, and closes the counters.
func (c *swCounters) read() [5]int64 {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_THREAD, &ru)
	var out [5]int64
	out[3] = unix.TimevalToNsec(ru.Utime) - unix.TimevalToNsec(c.ru0.Utime)
	out[4] = unix.TimevalToNsec(ru.Stime) - unix.TimevalToNsec(c.ru0.Stime)
	for i, fd := range c.fds {
		out[i] = -1
		if fd < 0 {
			continue
		}
		var b [8]byte
		if n, err := unix.Read(fd, b[:]); err == nil && n == 8 {
			out[i] = int64(binary.NativeEndian.Uint64(b[:]))
		}
		unix.Close(fd)
	}
	return out
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

// echo returns every datagram to its source until stop, recording how long
// each Send took (ns).
func echo(p datapath.Path, stop *atomic.Bool, errc chan<- error, send *benchkit.Samples) {
	v := batch.New(64, 2048)
	for i := 0; ; i++ {
		n, err := p.Recv(v)
		if err != nil {
			errc <- err
			return
		}
		if n == 0 {
			if i&1023 == 0 && stop.Load() {
				return
			}
			continue
		}
		t0 := time.Now()
		for sent := 0; sent < n; {
			k, err := p.Send(v)
			if err != nil {
				errc <- err
				return
			}
			sent += k
			v.Drop(k)
		}
		send.Record(int64(time.Since(t0)))
	}
}

// BenchmarkRTT is a 144-byte ping-pong between the two namespaces over each
// path, client pinned to CPU 0 and echo to CPU 1, both spinning. It reports
// the RTT percentiles and, per stage, how long the client's Send call took
// (the copy-mode transmit, and on veth the receiver's whole softirq path, run
// inside it).
//
//	flock /tmp/walcast-bench.lock go test -run '^$' -bench RTT -benchtime 100000x ./datapath/xdp
func BenchmarkRTT(b *testing.B) {
	pr := netns.New(b, netns.DefaultConfig())
	affinity.EnsureGOMAXPROCS(2)
	for _, bp := range benchPaths {
		b.Run(bp.name, func(b *testing.B) {
			srv := bp.open(b, pr.B, xdpPort, netip.AddrPort{})
			defer srv.Close()
			cli := bp.open(b, pr.A, 0, srv.LocalAddr())
			defer cli.Close()
			var stop atomic.Bool
			errc := make(chan error, 2)
			// Stopped and joined before the deferred Closes run.
			esend := benchkit.NewSamples(b.N + 2000)
			e, err := affinity.Go(affinity.OnCPU(1), func() { echo(srv, &stop, errc, esend) })
			must(b, err)
			defer func() { stop.Store(true); e.Wait() }()
			rtt, send := benchkit.NewSamples(b.N), benchkit.NewSamples(b.N)
			var lost int
			var runErr error
			b.ResetTimer()
			var sw [5]int64
			c, err := affinity.Go(affinity.OnCPU(0), func() {
				ctr := openSW()
				lost, runErr = ping(cli, b.N, 1000, rtt, send)
				sw = ctr.read()
			})
			must(b, err)
			c.Wait()
			b.StopTimer()
			stop.Store(true)
			e.Wait()
			must(b, runErr)
			select {
			case err := <-errc:
				b.Fatal(err)
			default:
			}
			r, s := rtt.Summarize(), send.Summarize()
			b.ReportMetric(float64(r.P50), "p50-ns")
			b.ReportMetric(float64(r.P99), "p99-ns")
			b.ReportMetric(float64(r.P999), "p99.9-ns")
			b.ReportMetric(float64(s.P50), "send-p50-ns")
			b.ReportMetric(float64(esend.Summarize().P50), "echo-send-p50-ns")
			b.ReportMetric(float64(lost), "lost")
			// Client thread: CPU time per ping, the share of it spent in
			// the kernel (syscalls, and on veth the peer's receive path
			// run inside them), and context switches per ping.
			pings := float64(b.N + 1000)
			if sw[0] > 0 {
				b.ReportMetric(float64(sw[0])/pings, "cpu-ns/ping")
			}
			if sw[3]+sw[4] > 0 {
				b.ReportMetric(100*float64(sw[4])/float64(sw[3]+sw[4]), "sys-%")
			}
			if sw[1] >= 0 {
				b.ReportMetric(float64(sw[1])/pings, "ctxsw/ping")
			}
			if x, ok := cli.(*Path); ok {
				b.Logf("xdp mode %v zero-copy %v; client stats %+v", x.Mode(), x.ZeroCopy(), x.Stats())
			}
		})
	}
}

// ping sends n+warmup pings one at a time and records each round trip and
// each Send call (ns).
func ping(p datapath.Path, n, warmup int, rtt, send *benchkit.Samples) (lost int, err error) {
	out, in := batch.New(1, 2048), batch.New(64, 2048)
	msg := make([]byte, 144)
	for i := range n + warmup {
		binary.LittleEndian.PutUint64(msg, uint64(i))
		out.Reset()
		out.Append(msg, netip.AddrPort{})
		t0 := time.Now()
		for {
			k, err := p.Send(out)
			if err != nil {
				return lost, err
			}
			if k == 1 {
				break
			}
		}
		t1 := time.Now()
		deadline := t0.Add(time.Second)
	wait:
		for j := 0; ; j++ {
			k, err := p.Recv(in)
			if err != nil {
				return lost, err
			}
			for m := range k {
				b, _ := in.Msg(m)
				if len(b) >= 8 && binary.LittleEndian.Uint64(b) == uint64(i) {
					if i >= warmup {
						rtt.Record(int64(time.Since(t0)))
						send.Record(int64(t1.Sub(t0)))
					}
					break wait
				}
			}
			if j&1023 == 1023 && time.Now().After(deadline) {
				lost++
				break
			}
		}
	}
	return lost, nil
}

// BenchmarkThroughput streams 144-byte datagrams in batches of 64 from A
// (CPU 0) to B (CPU 1) for b.N datagrams with no flow control, and reports
// how fast the sender handed them over (on veth that includes the
// receiver's softirq work, run inside the sender's syscalls), what arrived
// per second, and the fraction lost (receive buffers full).
//
//	flock /tmp/walcast-bench.lock go test -run '^$' -bench Throughput -benchtime 2000000x ./datapath/xdp
func BenchmarkThroughput(b *testing.B) {
	pr := netns.New(b, netns.DefaultConfig())
	affinity.EnsureGOMAXPROCS(2)
	for _, bp := range benchPaths {
		b.Run(bp.name, func(b *testing.B) {
			rcv := bp.open(b, pr.B, xdpPort, netip.AddrPort{})
			defer rcv.Close()
			snd := bp.open(b, pr.A, 0, rcv.LocalAddr())
			defer snd.Close()
			var got atomic.Int64
			var stop atomic.Bool
			var last atomic.Int64 // unix ns of the last arrival
			r, err := affinity.Go(affinity.OnCPU(1), func() {
				v := batch.New(64, 2048)
				for i := 0; ; i++ {
					n, err := rcv.Recv(v)
					if err != nil && !errors.Is(err, datapath.ErrClosed) {
						b.Error(err)
						return
					}
					if n > 0 {
						got.Add(int64(n))
						last.Store(time.Now().UnixNano())
					} else if i&1023 == 0 && stop.Load() {
						return
					}
				}
			})
			must(b, err)
			v := batch.New(64, 2048)
			msg := make([]byte, 144)
			var sendErr error
			start := time.Now()
			s, err := affinity.Go(affinity.OnCPU(0), func() {
				for sent := 0; sent < b.N; {
					v.Reset()
					for i := 0; i < 64 && sent+i < b.N; i++ {
						binary.LittleEndian.PutUint64(msg, uint64(sent+i))
						v.Append(msg, netip.AddrPort{})
					}
					k, err := snd.Send(v)
					if err != nil {
						sendErr = err
						return
					}
					sent += k
				}
			})
			must(b, err)
			s.Wait()
			sendSec := time.Since(start).Seconds()
			must(b, sendErr)
			// Let the receiver drain: stop after 200 ms without arrivals.
			for time.Since(time.Unix(0, last.Load())) < 200*time.Millisecond {
				time.Sleep(20 * time.Millisecond)
			}
			stop.Store(true)
			r.Wait()
			el := time.Unix(0, last.Load()).Sub(start).Seconds()
			b.ReportMetric(float64(b.N)/sendSec, "sent/s")
			b.ReportMetric(float64(got.Load())/el, "delivered/s")
			b.ReportMetric(100*(1-float64(got.Load())/float64(b.N)), "lost-%")
			b.ReportMetric(0, "ns/op")
			if x, ok := rcv.(*Path); ok {
				b.Logf("receiver stats %s", fmt.Sprintf("%+v", x.Stats()))
			}
		})
	}
}
