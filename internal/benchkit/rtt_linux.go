package benchkit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"sync/atomic"
	"time"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath"
)

// waiter is a datapath that can park on the netpoller.
type waiter interface {
	datapath.Path
	RecvWait(v *batch.Vec, deadline time.Time) (int, error)
}

// recvOne polls (spin) or parks (park) until p returns at least one
// datagram, the deadline passes (0, nil) or stop is set.
func recvOne(p waiter, v *batch.Vec, mode affinity.Strategy, deadline time.Time, stop *atomic.Bool) (int, error) {
	if mode == affinity.Park {
		for {
			d := time.Now().Add(50 * time.Millisecond)
			if d.After(deadline) {
				d = deadline
			}
			n, err := p.RecvWait(v, d)
			if n > 0 || err != nil || stop.Load() || !time.Now().Before(deadline) {
				return n, err
			}
		}
	}
	for i := 0; ; i++ {
		n, err := p.Recv(v)
		if n > 0 || err != nil {
			return n, err
		}
		if i&1023 == 1023 && (stop.Load() || !time.Now().Before(deadline)) {
			return 0, nil
		}
	}
}

// echoLoop sends every datagram p receives back to its source until stop.
func echoLoop(p waiter, mode affinity.Strategy, n int, stop *atomic.Bool, errc chan<- error) {
	v := batch.New(n, 2048)
	for !stop.Load() {
		n, err := recvOne(p, v, mode, time.Now().Add(100*time.Millisecond), stop)
		if err != nil {
			if !errors.Is(err, datapath.ErrClosed) {
				errc <- err
			}
			return
		}
		for sent := 0; sent < n; {
			k, err := p.Send(v)
			if err != nil {
				errc <- err
				return
			}
			sent += k
			v.Drop(k)
		}
	}
}

// RTTRawUDP is the datapath's layer: raw UDP ping-pong over
// datapath/udp on loopback with the same threads, pinning, idle mode and
// sockets (connected to each other, as floor-loop's and the casting
// rows' are) that the casting run uses, and no protocol.
func RTTRawUDP(c RTTConfig) (Row, error) {
	if err := c.Validate(); err != nil {
		return Row{}, err
	}
	cli, srv, err := ConnectedUDP()
	if err != nil {
		return Row{}, err
	}
	defer srv.Close()
	defer cli.Close()

	affinity.EnsureGOMAXPROCS(2)
	var stop atomic.Bool
	errc := make(chan error, 2)
	echo, err := affinity.GoFor(c.Mode, c.pin(1), func() { echoLoop(srv, c.Mode, c.Batch, &stop, errc) })
	if err != nil {
		return Row{}, err
	}
	defer func() { stop.Store(true); echo.Wait() }()

	var row Row
	var runErr error
	client, err := affinity.GoFor(c.Mode, c.pin(0), func() { row, runErr = pingLoop(cli, c, &stop) })
	if err != nil {
		return Row{}, err
	}
	client.Wait()
	if runErr != nil {
		return Row{}, runErr
	}
	select {
	case err := <-errc:
		return Row{}, err
	default:
	}
	row.Name, row.Path = "raw-udp", "udp"
	return row, nil
}

// pingLoop sends one ping, waits for its echo, records the round trip.
func pingLoop(p waiter, c RTTConfig, stop *atomic.Bool) (Row, error) {
	out := batch.New(1, 2048)
	in := batch.New(c.Batch, 2048)
	s := NewSamples(c.N)
	payload := make([]byte, c.Size)
	lost := 0
	start := time.Now()
	for i := 0; i < c.Warmup+c.N; i++ {
		if i == c.Warmup {
			start = time.Now()
		}
		binary.LittleEndian.PutUint64(payload, uint64(i))
		out.Reset()
		out.Append(payload, netip.AddrPort{})
		t0 := time.Now()
		for {
			n, err := p.Send(out)
			if err != nil {
				return Row{}, err
			}
			if n == 1 {
				break
			}
		}
		deadline := t0.Add(c.Timeout)
		for {
			n, err := recvOne(p, in, c.Mode, deadline, stop)
			if err != nil {
				return Row{}, err
			}
			if n == 0 { // timed out: lost on the way
				lost++
				break
			}
			m, _ := in.Msg(n - 1)
			if len(m) >= 8 && binary.LittleEndian.Uint64(m) == uint64(i) {
				if i >= c.Warmup {
					s.Record(int64(time.Since(t0)))
				}
				break
			}
		}
	}
	el := time.Since(start)
	row := Row{Workload: "rtt", Mode: c.Mode.String(), Latency: s.Summarize(), Records: int64(s.Len()), Seconds: el.Seconds()}
	row.RecPerS = float64(s.Len()) / el.Seconds()
	if lost > 0 {
		row.Note = fmt.Sprintf("%d pings lost", lost)
	}
	return row, nil
}

// RTTGoNet is the reference most Go programs get: a plain goroutine per
// side on net.UDPConn (netpoller, no pinning, one syscall per datagram).
func RTTGoNet(c RTTConfig) (Row, error) {
	if err := c.Validate(); err != nil {
		return Row{}, err
	}
	lo := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}
	srv, err := net.ListenUDP("udp4", lo)
	if err != nil {
		return Row{}, err
	}
	defer srv.Close()
	cli, err := net.DialUDP("udp4", nil, srv.LocalAddr().(*net.UDPAddr))
	if err != nil {
		return Row{}, err
	}
	defer cli.Close()
	go func() {
		b := make([]byte, 2048)
		for {
			n, from, err := srv.ReadFromUDPAddrPort(b)
			if err != nil {
				return
			}
			if _, err := srv.WriteToUDPAddrPort(b[:n], from); err != nil {
				return
			}
		}
	}()
	s := NewSamples(c.N)
	payload := make([]byte, c.Size)
	in := make([]byte, 2048)
	lost := 0
	start := time.Now()
	for i := 0; i < c.Warmup+c.N; i++ {
		if i == c.Warmup {
			start = time.Now()
		}
		binary.LittleEndian.PutUint64(payload, uint64(i))
		t0 := time.Now()
		if _, err := cli.Write(payload); err != nil {
			return Row{}, err
		}
		_ = cli.SetReadDeadline(t0.Add(c.Timeout))
		for {
			n, err := cli.Read(in)
			if err != nil {
				lost++
				break
			}
			if n >= 8 && binary.LittleEndian.Uint64(in) == uint64(i) {
				if i >= c.Warmup {
					s.Record(int64(time.Since(t0)))
				}
				break
			}
		}
	}
	el := time.Since(start)
	row := Row{Workload: "rtt", Name: "go-net-udp", Path: "net.UDPConn", Mode: "goroutines", Latency: s.Summarize(), Records: int64(s.Len()), Seconds: el.Seconds()}
	row.RecPerS = float64(s.Len()) / el.Seconds()
	if lost > 0 {
		row.Note = fmt.Sprintf("%d pings lost", lost)
	}

	return row, nil
}
