package rawudp

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/walcast/walcast/bench/peers"
	"github.com/walcast/walcast/bench/peers/internal/sock"
	"golang.org/x/sys/unix"
)

// Batch is the number of messages per sendmmsg/recvmmsg call and the
// largest number of GSO segments per write.
const Batch = 64

// MmsgPeer is raw UDP batched with sendmmsg/recvmmsg (64 per call).
func MmsgPeer() peers.Peer {
	return peers.Peer{Name: "raw-mmsg", Mode: "spin", Open: openMmsg}
}

// GSOPeer is raw UDP with UDP_SEGMENT on send (up to 64 equal segments
// per write) and UDP_GRO on receive: the kernel's fastest datagram path
// without kernel bypass.
func GSOPeer() peers.Peer {
	return peers.Peer{Name: "raw-gso", Mode: "spin", Open: openGSO}
}

// mmsgVec is a preallocated sendmmsg/recvmmsg vector.
type mmsgVec struct {
	slab []byte
	slot int
	iov  []unix.Iovec
	hdr  []unix.Mmsghdr
}

func newVec(slot int) *mmsgVec {
	v := &mmsgVec{slab: make([]byte, Batch*slot), slot: slot, iov: make([]unix.Iovec, Batch), hdr: make([]unix.Mmsghdr, Batch)}
	for i := range v.hdr {
		v.iov[i].Base = &v.slab[i*slot]
		v.iov[i].SetLen(slot)
		v.hdr[i].Hdr.Iov = &v.iov[i]
		v.hdr[i].Hdr.SetIovlen(1)
	}
	return v
}

func mmsg(trap uintptr, fd int, h []unix.Mmsghdr) (int, unix.Errno) {
	r, _, e := unix.Syscall6(trap, uintptr(fd), uintptr(unsafe.Pointer(&h[0])), uintptr(len(h)), unix.MSG_DONTWAIT, 0, 0)
	return int(r), e
}

type mmsgSender struct {
	u *sock.UDP
	v *mmsgVec
	n int
}

func (s *mmsgSender) Send(p []byte) error {
	if len(p) > s.v.slot {
		return fmt.Errorf("rawudp: message of %d bytes over slot %d", len(p), s.v.slot)
	}
	copy(s.v.slab[s.n*s.v.slot:], p)
	s.v.iov[s.n].SetLen(len(p))
	s.n++
	if s.n == Batch {
		return s.Flush()
	}
	return nil
}

func (s *mmsgSender) Flush() error {
	off := 0
	for off < s.n {
		if s.u.Closed() {
			return peers.ErrClosed
		}
		k, e := mmsg(unix.SYS_SENDMMSG, s.u.FD, s.v.hdr[off:s.n])
		if e == unix.EAGAIN || e == unix.ENOBUFS {
			continue
		}
		if e != 0 {
			return e
		}
		off += k
	}
	s.n = 0
	return nil
}

func (s *mmsgSender) Recv(p []byte) (int, error) { n, err := s.u.Read(p); return n, sock.PeerErr(err) }

type mmsgReceiver struct {
	u         *sock.UDP
	v         *mmsgVec
	next, got int
}

func (r *mmsgReceiver) Send(p []byte) error { return sock.PeerErr(r.u.Write(p)) }

func (r *mmsgReceiver) Recv(p []byte) (int, error) {
	var w sock.Wait
	for r.next == r.got {
		for i := range r.v.hdr {
			r.v.iov[i].SetLen(r.v.slot)
		}
		k, e := mmsg(unix.SYS_RECVMMSG, r.u.FD, r.v.hdr)
		if e == 0 {
			r.next, r.got = 0, k
			break
		}
		if e != unix.EAGAIN {
			return 0, e
		}
		if err := w.Idle(r.u.Closed, r.u.Timeout); err != nil {
			return 0, sock.PeerErr(err)
		}
	}
	i := r.next
	r.next++
	n := int(r.v.hdr[i].Len)
	return copy(p, r.v.slab[i*r.v.slot:i*r.v.slot+n]), nil
}

func openMmsg(cfg peers.Config) (*peers.Pair, error) {
	a, b, err := Sockets(cfg)
	if err != nil {
		return nil, err
	}
	return PairOf(a, b, &mmsgSender{u: a, v: newVec(cfg.MsgSize)}, &mmsgReceiver{u: b, v: newVec(cfg.MsgSize)}), nil
}

type gsoSender struct {
	u   *sock.UDP
	buf []byte
	seg int // current UDP_SEGMENT size, 0 before the first message
	n   int // segments queued
}

func (s *gsoSender) Send(p []byte) error {
	if s.seg != len(p) || (s.n+1)*len(p) > len(s.buf) || s.n == Batch {
		if err := s.Flush(); err != nil {
			return err
		}
	}
	if s.seg != len(p) {
		if err := unix.SetsockoptInt(s.u.FD, unix.SOL_UDP, unix.UDP_SEGMENT, len(p)); err != nil {
			return fmt.Errorf("rawudp: UDP_SEGMENT %d: %w", len(p), err)
		}
		s.seg = len(p)
	}
	copy(s.buf[s.n*s.seg:], p)
	s.n++
	return nil
}

func (s *gsoSender) Flush() error {
	if s.n == 0 {
		return nil
	}
	err := s.u.Write(s.buf[:s.n*s.seg])
	s.n = 0
	return sock.PeerErr(err)
}

func (s *gsoSender) Recv(p []byte) (int, error) { n, err := s.u.Read(p); return n, sock.PeerErr(err) }

type groReceiver struct {
	u        *sock.UDP
	buf, oob []byte
	off, end int
	seg      int
}

func (r *groReceiver) Send(p []byte) error { return sock.PeerErr(r.u.Write(p)) }

func (r *groReceiver) Recv(p []byte) (int, error) {
	var w sock.Wait
	for r.off >= r.end {
		n, oobn, _, _, err := unix.Recvmsg(r.u.FD, r.buf, r.oob, 0)
		if err == nil {
			r.off, r.end, r.seg = 0, n, n
			if oobn >= unix.CmsgSpace(2) {
				// One cmsg: SOL_UDP/UDP_GRO with the segment size (u16).
				h := (*unix.Cmsghdr)(unsafe.Pointer(&r.oob[0]))
				if h.Level == unix.SOL_UDP && h.Type == unix.UDP_GRO {
					if s := int(binary.NativeEndian.Uint16(r.oob[unix.CmsgLen(0):])); s > 0 {
						r.seg = s
					}
				}
			}
			break
		}
		if err != unix.EAGAIN {
			return 0, err
		}
		if err := w.Idle(r.u.Closed, r.u.Timeout); err != nil {
			return 0, sock.PeerErr(err)
		}
	}
	end := min(r.off+r.seg, r.end)
	n := copy(p, r.buf[r.off:end])
	r.off = end
	return n, nil
}

func openGSO(cfg peers.Config) (*peers.Pair, error) {
	a, b, err := Sockets(cfg)
	if err != nil {
		return nil, err
	}
	if err := unix.SetsockoptInt(b.FD, unix.SOL_UDP, unix.UDP_GRO, 1); err != nil {
		a.Release()
		b.Release()
		return nil, fmt.Errorf("rawudp: UDP_GRO: %w", err)
	}
	s := &gsoSender{u: a, buf: make([]byte, 65000)}
	r := &groReceiver{u: b, buf: make([]byte, 65535), oob: make([]byte, unix.CmsgSpace(4))}
	return PairOf(a, b, s, r), nil
}
