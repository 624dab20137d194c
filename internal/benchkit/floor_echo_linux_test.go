package benchkit

import (
	"fmt"
	"sort"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// BenchmarkFloorEchoUnconnected measures what an unconnected echo socket
// costs a raw ping-pong, with nothing of ours in the loop: floor-loop's
// sockets and calls (sendto/recvfrom through Syscall6, two threads pinned
// to CPUs 0 and 1, spin), once with the echo socket connected to the
// client (as floor-loop, and every RTT row since 09f6f25), once with it
// unconnected (recvfrom fetching the source address, sendto naming it, as
// raw-udp's echo did before). It alternates the two for 7 pairs of 20 000
// round trips and logs each pair's p50 and their ratio. Not part of any
// suite (tens of seconds):
//
//	go test -run '^$' -bench FloorEchoUnconnected -benchtime 1x -v ./internal/benchkit
func BenchmarkFloorEchoUnconnected(b *testing.B) {
	var ratios []float64
	for pair := 0; pair < 7; pair++ {
		con, err := echoPingPong(true, 20000)
		if err != nil {
			b.Fatal(err)
		}
		unc, err := echoPingPong(false, 20000)
		if err != nil {
			b.Fatal(err)
		}
		r := float64(unc) / float64(con)
		ratios = append(ratios, r)
		b.Logf("pair %d: p50 connected echo %v, unconnected echo %v: %.3f×", pair, con, unc, r)
	}
	sort.Float64s(ratios)
	b.Logf("unconnected ÷ connected p50: median %.3f (%.3f–%.3f)", ratios[len(ratios)/2], ratios[0], ratios[len(ratios)-1])
}

// echoPingPong runs n round trips of 128 bytes (after 2 000 unmeasured)
// between a connected client and an echo socket, connected to the client
// when connected is true, and returns the p50.
func echoPingPong(connected bool, n int) (time.Duration, error) {
	cli, srv, err := floorUDPPair(true)
	if err != nil {
		return 0, err
	}
	defer unix.Close(cli)
	defer func() { unix.Close(srv) }() // the echo socket in use at the end
	if !connected {
		// A fresh echo socket bound to the same address, never
		// connected (dissolving srv's association with AF_UNSPEC would
		// also unbind its port, which the kernel chose).
		sa, err := unix.Getsockname(srv)
		if err != nil {
			return 0, err
		}
		unix.Close(srv)
		if srv, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0); err != nil {
			srv = -1
			return 0, err
		}
		if err := unix.Bind(srv, sa); err != nil {
			return 0, err
		}
	}
	var stop atomic.Bool
	echoDone, err := floorThread(1, func() {
		buf := make([]byte, 2048)
		var from unix.RawSockaddrInet4
		for !stop.Load() {
			k, e := echoRecv(srv, buf, &from, connected)
			if e != 0 {
				continue
			}
			echoSend(srv, buf[:k], &from, connected)
		}
	})
	if err != nil {
		return 0, err
	}
	defer func() { stop.Store(true); <-echoDone }()
	lat := make([]time.Duration, 0, n)
	var runErr error
	clientDone, err := floorThread(0, func() {
		p, in := make([]byte, 128), make([]byte, 2048)
		for i := 0; i < n+2000; i++ {
			t0 := time.Now()
			if e := rawSend(cli, p); e != 0 {
				runErr = fmt.Errorf("sendto: %w", e)
				return
			}
			for spins := 0; ; spins++ {
				if _, e := rawRecv(cli, in); e == 0 {
					break
				}
				if spins&1023 == 1023 && time.Since(t0) > time.Second {
					runErr = fmt.Errorf("no echo within 1 s")
					return
				}
			}
			if i >= 2000 {
				lat = append(lat, time.Since(t0))
			}
		}
	})
	if err != nil {
		return 0, err
	}
	<-clientDone
	if runErr != nil {
		return 0, runErr
	}
	sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
	return lat[len(lat)/2], nil
}

func echoRecv(fd int, p []byte, from *unix.RawSockaddrInet4, connected bool) (int, unix.Errno) {
	if connected {
		return rawRecv(fd, p)
	}
	l := uint32(unsafe.Sizeof(*from))
	r, _, e := unix.Syscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), 0, uintptr(unsafe.Pointer(from)), uintptr(unsafe.Pointer(&l)))
	return int(r), e
}

func echoSend(fd int, p []byte, to *unix.RawSockaddrInet4, connected bool) unix.Errno {
	if connected {
		return rawSend(fd, p)
	}
	_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), 0, uintptr(unsafe.Pointer(to)), unsafe.Sizeof(*to))
	return e
}
