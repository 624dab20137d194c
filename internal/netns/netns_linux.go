package netns

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walcast/walcast/bpf"
	"golang.org/x/sys/unix"
)

var seq atomic.Uint32

// New creates a pair for a test and removes it in tb.Cleanup (also when the
// test fails). It skips the test when not root or when ip(8) is missing,
// and fails it on any other error.
func New(tb testing.TB, c Config) *Pair {
	tb.Helper()
	return forTest(tb, func() (*Pair, error) { return Create(c) })
}

// forTest skips tb as Require does, runs create, removes what it built
// (also when partly built) in tb.Cleanup, and fails tb on error.
func forTest[T any, P interface {
	*T
	Close() error
}](tb testing.TB, create func() (P, error)) P {
	tb.Helper()
	Require(tb)
	v, err := create()
	if v != nil {
		tb.Cleanup(func() {
			if err := v.Close(); err != nil {
				tb.Errorf("netns cleanup: %v", err)
			}
		})
	}
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// Require skips tb unless the process can create namespaces: root and ip(8).
func Require(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("needs root to create network namespaces (CI runs as root)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		tb.Skip("needs ip(8) from iproute2 (scripts/setup.sh installs it)")
	}
}

// Create builds a pair. On error it returns the partly built pair (so that
// Close can remove what exists) together with the error.
func Create(c Config) (*Pair, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	id := uniqueID(12)
	ns := nsPrefix(c.Tag) + id
	p := &Pair{
		Cfg: c,
		A:   Host{NS: ns + "-a", Link: "wc" + id + "a", Addr: c.AddrA.Addr(), Prefix: c.AddrA},
		B:   Host{NS: ns + "-b", Link: "wc" + id + "b", Addr: c.AddrB.Addr(), Prefix: c.AddrB},
	}
	q := strconv.Itoa(c.Queues)
	steps := [][]string{
		{"netns", "add", p.A.NS},
		{"netns", "add", p.B.NS},
		{"link", "add", p.A.Link, "netns", p.A.NS, "numtxqueues", q, "numrxqueues", q,
			"type", "veth", "peer", "name", p.B.Link, "netns", p.B.NS, "numtxqueues", q, "numrxqueues", q},
	}
	for _, h := range []*Host{&p.A, &p.B} {
		steps = append(steps,
			[]string{"-n", h.NS, "link", "set", "lo", "up"},
			[]string{"-n", h.NS, "addr", "add", h.Prefix.String(), "dev", h.Link},
		)
		if c.MTU != 0 {
			steps = append(steps, []string{"-n", h.NS, "link", "set", h.Link, "mtu", strconv.Itoa(c.MTU)})
		}
		steps = append(steps, []string{"-n", h.NS, "link", "set", h.Link, "up"})
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return p, err
		}
	}
	gro := "off"
	if c.GRO {
		gro = "on"
	}
	for _, h := range []*Host{&p.A, &p.B} {
		if err := h.readLink(gro); err != nil {
			return p, err
		}
	}
	if c.StaticNeigh {
		for _, hp := range [][2]*Host{{&p.A, &p.B}, {&p.B, &p.A}} {
			if err := hp[0].staticNeigh(*hp[1]); err != nil {
				return p, err
			}
		}
	}
	return p, nil
}

// readLink fills in h's link index and MAC address and turns GRO on h's
// link to gro ("on" or "off").
func (h *Host) readLink(gro string) error {
	if err := h.Do(func() error {
		ifc, err := net.InterfaceByName(h.Link)
		if err != nil {
			return err
		}
		h.Index, h.MAC = ifc.Index, ifc.HardwareAddr
		return nil
	}); err != nil {
		return fmt.Errorf("netns: read %s in %s: %w", h.Link, h.NS, err)
	}
	_, err := h.Exec("ethtool", "-K", h.Link, "gro", gro)
	return err
}

// staticNeigh adds a permanent neighbour entry for peer on h's link.
func (h Host) staticNeigh(peer Host) error {
	return ip("-n", h.NS, "neigh", "replace", peer.Addr.String(), "lladdr", peer.MAC.String(),
		"dev", h.Link, "nud", "permanent")
}

// uniqueID is the process id and a per-process counter in base 36, at
// most n bytes (the tail, which changes fastest, is kept).
func uniqueID(n int) string {
	id := strconv.FormatUint(uint64(os.Getpid()), 36) + strconv.FormatUint(uint64(seq.Add(1)), 36)
	if len(id) > n {
		id = id[len(id)-n:]
	}
	return id
}

// Close deletes both namespaces (and with them the veth pair). It is safe to
// call on a partly built pair and more than once.
func (p *Pair) Close() error {
	var errs []error
	for _, h := range []Host{p.A, p.B} {
		if _, err := os.Stat("/run/netns/" + h.NS); err != nil {
			continue
		}
		if err := ip("netns", "del", h.NS); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("netns: ip %v: %w: %s", args, err, bytes.TrimSpace(out))
	}
	return nil
}

// Exec runs a command inside the namespace (ip netns exec) and returns its
// combined output.
func (h Host) Exec(name string, args ...string) ([]byte, error) {
	out, err := exec.Command("ip", append([]string{"netns", "exec", h.NS, name}, args...)...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("netns: %s %v in %s: %w: %s", name, args, h.NS, err, bytes.TrimSpace(out))
	}
	return out, nil
}

// Do runs f on a fresh locked OS thread that has joined h's network
// namespace and waits for it. Sockets and links f creates belong to that
// namespace and stay usable from any thread afterwards. If the thread cannot
// return to the original namespace, it is not unlocked, so the runtime
// destroys it instead of reusing it. Goroutines f starts do not inherit the
// namespace.
func (h Host) Do(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("netns: open own namespace: %w", err)
			return
		}
		defer unix.Close(orig)
		target, err := unix.Open("/run/netns/"+h.NS, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("netns: open %s: %w", h.NS, err)
			runtime.UnlockOSThread()
			return
		}
		defer unix.Close(target)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("netns: enter %s: %w", h.NS, err)
			runtime.UnlockOSThread()
			return
		}
		ferr := f()
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			// Leave the thread locked: it dies with this goroutine.
			errc <- errors.Join(ferr, fmt.Errorf("netns: leave %s: %w", h.NS, err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// AttachImpair loads the impair program with c and attaches it to h's veth
// end (ingress: it drops datagrams arriving at h). The caller closes the
// returned Impair to detach it. The mode used (native on veth) is returned.
func (h Host) AttachImpair(c bpf.ImpairConfig) (*bpf.Impair, bpf.Mode, error) {
	im, err := bpf.NewImpair(c)
	if err != nil {
		return nil, 0, err
	}
	var mode bpf.Mode
	if err := h.Do(func() error {
		var err error
		mode, err = im.Attach(h.Index, bpf.ModeAuto)
		return err
	}); err != nil {
		im.Close()
		return nil, 0, err
	}
	return im, mode, nil
}

// Ping sends one ICMP echo request from h to dst over a raw socket in h's
// namespace and waits up to timeout for the matching reply. It proves that
// non-UDP traffic still reaches the peer's kernel (for example while an XDP
// program is attached), without needing ping(8).
func (h Host) Ping(dst netip.Addr, timeout time.Duration) error {
	var fd int
	if err := h.Do(func() error {
		var err error
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
		return err
	}); err != nil {
		return fmt.Errorf("netns: ping socket in %s: %w", h.NS, err)
	}
	defer unix.Close(fd)
	id := uint16(os.Getpid()) ^ uint16(seq.Add(1))
	req := []byte{8, 0, 0, 0, byte(id >> 8), byte(id), 0, 1, 'w', 'a', 'l', 'c', 'a', 's', 't', 0}
	ck := inetChecksum(req)
	req[2], req[3] = byte(ck>>8), byte(ck)
	to := &unix.SockaddrInet4{Addr: dst.As4()}
	if err := unix.Sendto(fd, req, 0, to); err != nil {
		return fmt.Errorf("netns: ping %s from %s: %w", dst, h.NS, err)
	}
	deadline := time.Now().Add(timeout)
	buf := make([]byte, 1500)
	for left := timeout; left > 0; left = time.Until(deadline) {
		// Each wait is bounded by what is left; a signal interrupts a
		// receive with a timeout even under SA_RESTART (EINTR: wait again).
		tv := unix.NsecToTimeval(max(left.Nanoseconds(), int64(time.Microsecond)))
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("netns: ping %s from %s: no reply: %w", dst, h.NS, err)
		}
		if n < 20 {
			continue
		}
		icmp := buf[int(buf[0]&0x0f)*4 : n] // raw IPv4 sockets deliver the IP header
		if len(icmp) >= 8 && icmp[0] == 0 && icmp[4] == byte(id>>8) && icmp[5] == byte(id) {
			return nil
		}
	}
	return fmt.Errorf("netns: ping %s from %s: no reply within %v", dst, h.NS, timeout)
}

// inetChecksum is the RFC 1071 checksum of b.
func inetChecksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return ^uint16(s)
}
