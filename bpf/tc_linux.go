package bpf

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// TCImpair is the impair logic as a direct-action tc classifier
// (BPF_PROG_TYPE_SCHED_CLS), for the egress (or ingress) hook of an
// interface. It drops exactly what [Impair] drops, configured and counted
// the same way; only the hook differs. Egress is what lets one injector
// impair every path alike: put it on the ports of a bridge between the
// hosts, and kernel UDP, sendmmsg/GSO and AF_XDP frames all cross it.
type TCImpair struct {
	impairMaps
	prog *ebpf.Program
	lk   link.Link // TCX attachment
	cls  *clsact   // clsact attachment
	mode TCMode
	dir  Direction
}

// NewTCImpair loads the tc impair program configured with c. It is not
// attached; see [TCImpair.Attach].
func NewTCImpair(c ImpairConfig) (*TCImpair, error) {
	m, err := newImpairMaps(c)
	if err != nil {
		return nil, err
	}
	t := &TCImpair{impairMaps: m}
	s := m.spec()
	s.tc = true
	if t.prog, err = newProgram("walcast_tcimp", s); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// Attach hooks the program to the interface ifindex of the calling
// thread's network namespace, in direction d, and returns the mode used.
// TCAuto tries TCX, then clsact.
func (t *TCImpair) Attach(ifindex int, d Direction, m TCMode) (TCMode, error) {
	if t.lk != nil || t.cls != nil {
		return t.mode, fmt.Errorf("bpf: tc impair already attached (%v %v)", t.mode, t.dir)
	}
	if d != Egress && d != Ingress {
		return 0, fmt.Errorf("bpf: unknown direction %v", d)
	}
	tcx := func() error {
		at := ebpf.AttachTCXEgress
		if d == Ingress {
			at = ebpf.AttachTCXIngress
		}
		lk, err := link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: t.prog, Attach: at})
		if err != nil {
			return fmt.Errorf("bpf: attach tcx %v to ifindex %d: %w", d, ifindex, err)
		}
		t.lk, t.mode = lk, TCX
		return nil
	}
	cls := func() error {
		c, err := attachClsact(ifindex, d, t.prog.FD(), "walcast_tcimp")
		if err != nil {
			return err
		}
		t.cls, t.mode = c, TCClsact
		return nil
	}
	var err error
	switch m {
	case TCX:
		err = tcx()
	case TCClsact:
		err = cls()
	case TCAuto:
		if errX := tcx(); errX != nil {
			if errC := cls(); errC != nil {
				err = errors.Join(errX, errC)
			}
		}
	default:
		err = fmt.Errorf("bpf: unknown tc mode %v", m)
	}
	if err != nil {
		return 0, err
	}
	t.dir = d
	return t.mode, nil
}

// Mode is how the program is attached (TCAuto when it is not).
func (t *TCImpair) Mode() TCMode { return t.mode }

// Run executes the program once over an Ethernet frame (for tests;
// BPF_PROG_TEST_RUN) and returns the tc verdict: [TCActShot], or
// [TCActUnspec] (as uint32) for a frame it lets through.
func (t *TCImpair) Run(frame []byte) (uint32, error) {
	v, err := t.prog.Run(&ebpf.RunOptions{Data: frame})
	if err != nil {
		return 0, fmt.Errorf("bpf: test run: %w", err)
	}
	return v, nil
}

// Detach removes the attachment (the program and maps stay loaded, so it
// can be attached again).
func (t *TCImpair) Detach() error {
	var err error
	if t.lk != nil {
		err = t.lk.Close()
		t.lk = nil
	}
	if t.cls != nil {
		err = errors.Join(err, t.cls.close())
		t.cls = nil
	}
	t.mode = TCAuto
	if err != nil {
		return fmt.Errorf("bpf: detach tc impair: %w", err)
	}
	return nil
}

// Close detaches the program if attached and frees the program and maps.
func (t *TCImpair) Close() error {
	err := t.Detach()
	if t.prog != nil {
		err = errors.Join(err, t.prog.Close())
		t.prog = nil
	}
	return errors.Join(err, t.impairMaps.close())
}

// rtnetlink constants not in x/sys/unix.
const (
	tcHClsact       = 0xFFFFFFF1 // TC_H_CLSACT (= TC_H_INGRESS)
	tcHMinIngress   = 0xFFF2
	tcHMinEgress    = 0xFFF3
	tcaBPFFD        = 6
	tcaBPFName      = 7
	tcaBPFFlags     = 8
	tcaBPFActDirect = 1
	sizeofTCMsg     = 20
	clsactPrioBase  = 0x7a00 // first filter priority tried
	clsactPrios     = 64     // how many are tried past an existing one
)

// clsact is a cls_bpf filter under the clsact qdisc of one interface. It
// keeps the rtnetlink socket of the interface's namespace open so that
// close works from any thread.
type clsact struct {
	fd           int
	ifindex      int
	parent       uint32
	prio         uint16
	createdQdisc bool
	seq          uint32
}

// attachClsact creates the clsact qdisc when missing and adds a
// direct-action bpf filter running progFD on direction d.
func attachClsact(ifindex int, d Direction, progFD int, name string) (_ *clsact, err error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("bpf: rtnetlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bpf: bind rtnetlink: %w", err)
	}
	c := &clsact{fd: fd, ifindex: ifindex, parent: tcHClsact&0xFFFF0000 | tcHMinEgress}
	if d == Ingress {
		c.parent = tcHClsact&0xFFFF0000 | tcHMinIngress
	}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	// The qdisc: handle ffff:, parent TC_H_CLSACT, kind "clsact".
	err = c.request(unix.RTM_NEWQDISC, unix.NLM_F_CREATE|unix.NLM_F_EXCL, tcHClsact&0xFFFF0000, tcHClsact, 0, attr(unix.TCA_KIND, cstr("clsact")))
	switch {
	case err == nil:
		c.createdQdisc = true
	case errors.Is(err, unix.EEXIST):
	default:
		return nil, fmt.Errorf("bpf: add clsact qdisc to ifindex %d: %w", ifindex, err)
	}
	var u32 [4]byte
	binary.NativeEndian.PutUint32(u32[:], uint32(progFD))
	fdAttr := attr(tcaBPFFD, u32[:])
	binary.NativeEndian.PutUint32(u32[:], tcaBPFActDirect)
	opts := attr(unix.TCA_OPTIONS, append(append(fdAttr, attr(tcaBPFName, cstr(name))...), attr(tcaBPFFlags, u32[:])...))
	kind := attr(unix.TCA_KIND, cstr("bpf"))
	// Priority p, handle 1, every protocol; a priority in use is skipped.
	for p := range clsactPrios {
		c.prio = uint16(clsactPrioBase + p)
		err = c.request(unix.RTM_NEWTFILTER, unix.NLM_F_CREATE|unix.NLM_F_EXCL, 1, c.parent, c.info(), append(kind, opts...))
		if !errors.Is(err, unix.EEXIST) {
			break
		}
	}
	if err != nil {
		c.prio = 0
		return nil, fmt.Errorf("bpf: add bpf filter to clsact %v of ifindex %d: %w", d, ifindex, err)
	}
	return c, nil
}

// info is tcm_info of the filter: priority << 16 | protocol (network order).
func (c *clsact) info() uint32 {
	return uint32(c.prio)<<16 | uint32(htons(unix.ETH_P_ALL))
}

func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}

// close deletes the filter, then the qdisc if it was created here.
func (c *clsact) close() error {
	if c.fd < 0 {
		return nil
	}
	var errs []error
	if c.prio != 0 {
		if err := c.request(unix.RTM_DELTFILTER, 0, 1, c.parent, c.info(), attr(unix.TCA_KIND, cstr("bpf"))); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENODEV) {
			errs = append(errs, fmt.Errorf("delete bpf filter: %w", err))
		}
	}
	if c.createdQdisc {
		if err := c.request(unix.RTM_DELQDISC, 0, tcHClsact&0xFFFF0000, tcHClsact, 0, nil); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENODEV) {
			errs = append(errs, fmt.Errorf("delete clsact qdisc: %w", err))
		}
	}
	errs = append(errs, unix.Close(c.fd))
	c.fd = -1
	return errors.Join(errs...)
}

// request sends one rtnetlink tc message with NLM_F_REQUEST|NLM_F_ACK and
// returns the kernel's answer as an error (nil on success).
func (c *clsact) request(typ, flags int, handle, parent, info uint32, attrs []byte) error {
	c.seq++
	n := unix.SizeofNlMsghdr + sizeofTCMsg + len(attrs)
	b := make([]byte, n)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(n))
	ne.PutUint16(b[4:], uint16(typ))
	ne.PutUint16(b[6:], uint16(unix.NLM_F_REQUEST|unix.NLM_F_ACK|flags))
	ne.PutUint32(b[8:], c.seq)
	tm := b[unix.SizeofNlMsghdr:]
	tm[0] = unix.AF_UNSPEC
	ne.PutUint32(tm[4:], uint32(c.ifindex))
	ne.PutUint32(tm[8:], handle)
	ne.PutUint32(tm[12:], parent)
	ne.PutUint32(tm[16:], info)
	copy(tm[sizeofTCMsg:], attrs)
	if err := unix.Sendto(c.fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 8192)
	for {
		r, _, err := unix.Recvfrom(c.fd, buf, 0)
		if err != nil {
			return err
		}
		for m := buf[:r]; len(m) >= unix.SizeofNlMsghdr; {
			l := int(ne.Uint32(m[0:]))
			if l < unix.SizeofNlMsghdr || l > len(m) {
				return fmt.Errorf("bpf: rtnetlink: malformed answer")
			}
			typ, seq, data := ne.Uint16(m[4:]), ne.Uint32(m[8:]), m[unix.SizeofNlMsghdr:l]
			if seq == c.seq && typ == unix.NLMSG_ERROR && len(data) >= 4 {
				if e := int32(ne.Uint32(data)); e != 0 {
					return unix.Errno(-e)
				}
				return nil
			}
			m = m[min((l+3)&^3, len(m)):]
		}
	}
}

// attr encodes one rtnetlink attribute, padded to 4 bytes.
func attr(typ int, data []byte) []byte {
	l := unix.SizeofRtAttr + len(data)
	b := make([]byte, (l+3)&^3)
	binary.NativeEndian.PutUint16(b[0:], uint16(l))
	binary.NativeEndian.PutUint16(b[2:], uint16(typ))
	copy(b[unix.SizeofRtAttr:], data)
	return b
}

func cstr(s string) []byte { return append([]byte(s), 0) }
