package main

import (
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"
)

// recorder keeps datagrams and TCP segments as a capture on the wire
// would see them and writes them as a pcap file (raw IPv4), so that a
// test can decode real traffic with tshark without capturing, which
// needs root (CAP_NET_RAW): the traffic goes through taps it starts.
type recorder struct {
	mu  sync.Mutex
	pks []recPacket
}

type recPacket struct {
	at       time.Time
	src, dst netip.AddrPort
	tcp      bool
	seq, ack uint32
	flags    uint8 // TCP
	data     []byte
}

const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpPSH = 0x08
	tcpACK = 0x10
)

func (r *recorder) add(p recPacket) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p.at = time.Now()
	p.data = append([]byte(nil), p.data...)
	r.pks = append(r.pks, p)
}

// udp records one datagram from src to dst.
func (r *recorder) udp(src, dst netip.AddrPort, b []byte) {
	r.add(recPacket{src: src, dst: dst, data: b})
}

func addrOf(a net.Addr) netip.AddrPort {
	switch a := a.(type) {
	case *net.UDPAddr:
		return a.AddrPort()
	case *net.TCPAddr:
		return a.AddrPort()
	}
	return netip.AddrPort{}
}

// udpTap forwards datagrams sent to its address to target and the
// answers back to their sender, recording both directions as between
// the sender and the tap's address. It returns the tap's address.
func (r *recorder) udpTap(t *testing.T, target string) string {
	t.Helper()
	front, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	back, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	to, err := net.ResolveUDPAddr("udp4", target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { front.Close(); back.Close() })
	me := addrOf(front.LocalAddr())
	var peer sync.Map // the sender's address, learned from its first datagram
	go func() {
		b := make([]byte, 65536)
		for {
			n, from, err := front.ReadFromUDPAddrPort(b)
			if err != nil {
				return
			}
			peer.Store(0, from)
			r.udp(from, me, b[:n])
			back.WriteToUDP(b[:n], to)
		}
	}()
	go func() {
		b := make([]byte, 65536)
		for {
			n, _, err := back.ReadFromUDPAddrPort(b)
			if err != nil {
				return
			}
			if p, ok := peer.Load(0); ok {
				r.udp(me, p.(netip.AddrPort), b[:n])
				front.WriteToUDPAddrPort(b[:n], p.(netip.AddrPort))
			}
		}
	}()
	return me.String()
}

// tcpTap forwards every connection made to its address to target,
// recording each as a TCP connection between the client and the tap's
// address (handshake, one segment per read, FIN). It returns the tap's
// address.
func (r *recorder) tcpTap(t *testing.T, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	me := addrOf(ln.Addr())
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp4", target)
			if err != nil {
				c.Close()
				continue
			}
			cl := addrOf(c.RemoteAddr())
			seqs := [2]uint32{1000, 500000} // client, server: the next seq each sends
			var mu sync.Mutex
			seg := func(dir int, flags uint8, b []byte) {
				mu.Lock()
				defer mu.Unlock()
				src, dst := cl, me
				if dir == 1 {
					src, dst = me, cl
				}
				for len(b) > 1460 {
					r.add(recPacket{src: src, dst: dst, tcp: true, seq: seqs[dir], ack: seqs[1-dir], flags: tcpACK, data: b[:1460]})
					seqs[dir] += 1460
					b = b[1460:]
				}
				r.add(recPacket{src: src, dst: dst, tcp: true, seq: seqs[dir], ack: seqs[1-dir], flags: flags, data: b})
				seqs[dir] += uint32(len(b))
				if flags&(tcpSYN|tcpFIN) != 0 {
					seqs[dir]++
				}
			}
			r.add(recPacket{src: cl, dst: me, tcp: true, seq: seqs[0] - 1, flags: tcpSYN})
			r.add(recPacket{src: me, dst: cl, tcp: true, seq: seqs[1] - 1, ack: seqs[0], flags: tcpSYN | tcpACK})
			seg(0, tcpACK, nil)
			var wg sync.WaitGroup
			pipe := func(dir int, from, to net.Conn) {
				defer wg.Done()
				b := make([]byte, 64<<10)
				for {
					n, err := from.Read(b)
					if n > 0 {
						seg(dir, tcpACK|tcpPSH, b[:n])
						to.Write(b[:n])
					}
					if err != nil {
						seg(dir, tcpACK|tcpFIN, nil)
						if tc, ok := to.(*net.TCPConn); ok {
							tc.CloseWrite()
						}
						return
					}
				}
			}
			wg.Add(2)
			go pipe(0, c, s)
			go pipe(1, s, c)
			go func() { wg.Wait(); c.Close(); s.Close() }()
		}
	}()
	return me.String()
}

// write writes the recorded packets as a pcap file of raw IPv4
// (LINKTYPE_RAW): checksums are left 0 (tshark does not check them by
// default).
func (r *recorder) write(path string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	le := binary.LittleEndian
	var gh [24]byte
	le.PutUint32(gh[0:], 0xa1b2c3d4)
	le.PutUint16(gh[4:], 2)
	le.PutUint16(gh[6:], 4)
	le.PutUint32(gh[16:], 262144)
	le.PutUint32(gh[20:], 101) // LINKTYPE_RAW
	if _, err := f.Write(gh[:]); err != nil {
		return err
	}
	for i, p := range r.pks {
		pkt := ipv4(uint16(i), p)
		var ph [16]byte
		le.PutUint32(ph[0:], uint32(p.at.Unix()))
		le.PutUint32(ph[4:], uint32(p.at.Nanosecond()/1000))
		le.PutUint32(ph[8:], uint32(len(pkt)))
		le.PutUint32(ph[12:], uint32(len(pkt)))
		if _, err := f.Write(ph[:]); err != nil {
			return err
		}
		if _, err := f.Write(pkt); err != nil {
			return err
		}
	}
	return nil
}

// ipv4 is p as an IPv4 packet with its UDP or TCP header.
func ipv4(id uint16, p recPacket) []byte {
	be := binary.BigEndian
	l4 := 8
	proto := byte(17)
	if p.tcp {
		l4, proto = 20, 6
	}
	b := make([]byte, 20+l4+len(p.data))
	b[0] = 0x45
	be.PutUint16(b[2:], uint16(len(b)))
	be.PutUint16(b[4:], id)
	be.PutUint16(b[6:], 0x4000) // don't fragment
	b[8], b[9] = 64, proto
	s, d := p.src.Addr().As4(), p.dst.Addr().As4()
	copy(b[12:], s[:])
	copy(b[16:], d[:])
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(be.Uint16(b[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	be.PutUint16(b[10:], ^uint16(sum))
	h := b[20:]
	be.PutUint16(h[0:], p.src.Port())
	be.PutUint16(h[2:], p.dst.Port())
	if p.tcp {
		be.PutUint32(h[4:], p.seq)
		be.PutUint32(h[8:], p.ack)
		h[12] = 5 << 4
		h[13] = p.flags
		be.PutUint16(h[14:], 65535)
	} else {
		be.PutUint16(h[4:], uint16(8+len(p.data)))
	}
	copy(h[l4:], p.data)
	return b
}
