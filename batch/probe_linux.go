package batch

import (
	"net/netip"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Kernel returns the running kernel's version.
func Kernel() (KernelVersion, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return KernelVersion{}, err
	}
	return ParseKernelRelease(unix.ByteSliceToString(u.Release[:]))
}

var (
	gsoOnce sync.Once
	gsoErr  error
	groOnce sync.Once
	groErr  error
)

// ProbeGSO reports whether UDP GSO (UDP_SEGMENT) is usable: the kernel is
// not in a range known to corrupt equal-length segments, and a loopback
// self-test (one sendmsg of 3 segments) arrives as 3 intact datagrams. The
// result is computed once per process. A nil error means GSO may be used.
func ProbeGSO() error {
	gsoOnce.Do(func() { gsoErr = probeGSO() })
	return gsoErr
}

// ProbeGRO reports whether UDP_GRO can be enabled on a UDP socket (Linux
// 5.0+). Computed once per process.
func ProbeGRO() error {
	groOnce.Do(func() { groErr = probeGRO() })
	return groErr
}

func probeGRO() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return &UnsupportedError{Feature: "UDP GRO", Reason: "socket", Err: err}
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, unix.SOL_UDP, unix.UDP_GRO, 1); err != nil {
		return &UnsupportedError{Feature: "UDP GRO", Reason: "setsockopt UDP_GRO", Err: err}
	}
	return nil
}

func probeGSO() error {
	kv, err := Kernel()
	if err == nil && GSOEqualTailBroken(kv) {
		return &UnsupportedError{Feature: "UDP GSO", Reason: "kernel " + kv.String() + " (7.0-7.1.4 corrupt equal-length GSO segments)"}
	}
	rx, err := loopbackSocket()
	if err != nil {
		return &UnsupportedError{Feature: "UDP GSO", Reason: "self-test socket", Err: err}
	}
	defer unix.Close(rx)
	tx, err := loopbackSocket()
	if err != nil {
		return &UnsupportedError{Feature: "UDP GSO", Reason: "self-test socket", Err: err}
	}
	defer unix.Close(tx)
	if _, err := unix.GetsockoptInt(tx, unix.SOL_UDP, unix.UDP_SEGMENT); err != nil {
		return &UnsupportedError{Feature: "UDP GSO", Reason: "getsockopt UDP_SEGMENT", Err: err}
	}
	sa, err := unix.Getsockname(rx)
	if err != nil {
		return &UnsupportedError{Feature: "UDP GSO", Reason: "self-test getsockname", Err: err}
	}
	port := sa.(*unix.SockaddrInet4).Port
	const seg, nseg = 100, 3
	payload := make([]byte, seg*nseg)
	for i := range payload {
		payload[i] = byte(i / seg)
	}
	v := New(nseg, seg)
	dst := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(port))
	for i := 0; i < nseg; i++ {
		v.Append(payload[i*seg:(i+1)*seg], dst)
	}
	t := NewTx(tx, nseg, TxConfig{Family: unix.AF_INET, GSO: true})
	sent, e := t.Send(v)
	if e != 0 || t.GSOTurnedOff() || t.Supers() != 1 || sent != nseg {
		var err error
		if e != 0 {
			err = e
		}
		return &UnsupportedError{Feature: "UDP GSO", Reason: "self-test send", Err: err}
	}
	got := New(nseg+1, 2048)
	r := NewRx(rx, nseg+1, RxConfig{})
	var all int
	deadline := time.Now().Add(time.Second)
	buf := make([]byte, 0, seg*nseg)
	for all < nseg && time.Now().Before(deadline) {
		n, e := r.Recv(got)
		if e != 0 && e != unix.EAGAIN {
			return &UnsupportedError{Feature: "UDP GSO", Reason: "self-test receive", Err: e}
		}
		for i := 0; i < n; i++ {
			m, _ := got.Msg(i)
			if len(m) != seg {
				return &UnsupportedError{Feature: "UDP GSO", Reason: "self-test: segment of wrong size"}
			}
			buf = append(buf, m...)
		}
		all += n
		if n == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	if all != nseg || string(buf) != string(payload) {
		return &UnsupportedError{Feature: "UDP GSO", Reason: "self-test: segments lost or corrupted"}
	}
	return nil
}

func loopbackSocket() (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}
