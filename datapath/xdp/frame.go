package xdp

import (
	"encoding/binary"
	"net/netip"
)

// Offsets in an untagged Ethernet/IPv4(IHL 5)/UDP frame, in bytes.
const (
	offDstMAC  = 0
	offSrcMAC  = 6
	offEthType = 12
	offIP      = 14
	offIPLen   = offIP + 2
	offIPID    = offIP + 4
	offIPFrag  = offIP + 6
	offIPTTL   = offIP + 8
	offIPProto = offIP + 9
	offIPCsum  = offIP + 10
	offIPSrc   = offIP + 12
	offIPDst   = offIP + 16
	offUDP     = offIP + 20
	offUDPSrc  = offUDP
	offUDPDst  = offUDP + 2
	offUDPLen  = offUDP + 4
	offUDPCsum = offUDP + 6
	offPayload = offUDP + 8
)

// header holds what Send writes in front of every payload.
type header struct {
	srcMAC [6]byte
	src    netip.AddrPort
	id     uint16 // IPv4 identification, incremented per datagram
}

// put writes the Ethernet, IPv4 and UDP headers for a payload of n bytes
// already in frame[offPayload:offPayload+n] and returns the frame length.
// Both checksums are computed here: the IPv4 header checksum over the 20
// header bytes, the UDP checksum over the pseudo-header, the UDP header and
// the payload (a computed 0 is sent as 0xffff, RFC 768).
func (h *header) put(frame []byte, dstMAC *[6]byte, dst netip.AddrPort, n int) int {
	_ = frame[:offPayload+n] // one bounds check for the writes below
	f := frame[:offPayload:offPayload]
	copy(f[offDstMAC:], dstMAC[:])
	copy(f[offSrcMAC:], h.srcMAC[:])
	f[offEthType], f[offEthType+1] = 0x08, 0x00
	f[offIP] = 0x45 // IPv4, IHL 5
	f[offIP+1] = 0  // DSCP/ECN
	binary.BigEndian.PutUint16(f[offIPLen:], uint16(20+8+n))
	h.id++
	binary.BigEndian.PutUint16(f[offIPID:], h.id)
	binary.BigEndian.PutUint16(f[offIPFrag:], 0x4000) // DF: never fragmented
	f[offIPTTL] = 64
	f[offIPProto] = 17
	f[offIPCsum], f[offIPCsum+1] = 0, 0
	src4, dst4 := h.src.Addr().As4(), dst.Addr().As4()
	copy(f[offIPSrc:], src4[:])
	copy(f[offIPDst:], dst4[:])
	binary.BigEndian.PutUint16(f[offIPCsum:], ^fold(sum(f[offIP:offUDP], 0)))

	udpLen := uint16(8 + n)
	binary.BigEndian.PutUint16(f[offUDPSrc:], h.src.Port())
	binary.BigEndian.PutUint16(f[offUDPDst:], dst.Port())
	binary.BigEndian.PutUint16(f[offUDPLen:], udpLen)
	f[offUDPCsum], f[offUDPCsum+1] = 0, 0
	// Pseudo-header: src, dst, zero+protocol, UDP length; then the UDP
	// header (with the length a second time) and the payload.
	s := sum(f[offIPSrc:offUDP], 17+uint64(udpLen))
	s = sum(f[offUDP:offPayload], s)
	s = sum(frame[offPayload:offPayload+n], s)
	c := ^fold(s)
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(f[offUDPCsum:], c)
	return offPayload + n
}

// parsed is a received datagram's source and payload bounds.
type parsed struct {
	srcMAC [6]byte
	src    netip.AddrPort
	off, n int // payload = frame[off:off+n]
}

// parse checks that frame is an untagged IPv4/UDP datagram to port with a
// valid IPv4 header checksum and consistent lengths. It does not verify the
// UDP checksum: a datagram from a local kernel socket over veth carries only
// the partial (pseudo-header) sum, because veth offers checksum offload and
// never completes it; the walcast record's CRC32C covers the payload.
// Ethernet padding after the IP datagram is ignored.
func parse(frame []byte, port uint16) (parsed, bool) {
	if len(frame) < offPayload {
		return parsed{}, false
	}
	if frame[offEthType] != 0x08 || frame[offEthType+1] != 0 || frame[offIP] != 0x45 || frame[offIPProto] != 17 {
		return parsed{}, false
	}
	if binary.BigEndian.Uint16(frame[offIPFrag:])&0x3fff != 0 { // MF or offset: a fragment
		return parsed{}, false
	}
	if fold(sum(frame[offIP:offUDP], 0)) != 0xffff {
		return parsed{}, false
	}
	ipLen := int(binary.BigEndian.Uint16(frame[offIPLen:]))
	udpLen := int(binary.BigEndian.Uint16(frame[offUDPLen:]))
	if ipLen > len(frame)-offIP || udpLen < 8 || udpLen != ipLen-20 {
		return parsed{}, false
	}
	if binary.BigEndian.Uint16(frame[offUDPDst:]) != port {
		return parsed{}, false
	}
	var p parsed
	copy(p.srcMAC[:], frame[offSrcMAC:])
	p.src = netip.AddrPortFrom(netip.AddrFrom4([4]byte(frame[offIPSrc:offIPSrc+4])), binary.BigEndian.Uint16(frame[offUDPSrc:]))
	p.off, p.n = offPayload, udpLen-8
	return p, true
}

// sum adds b as big-endian 16-bit words (RFC 1071) to s without folding.
// It reads 8 bytes at a time: the one's-complement sum of 64-bit words,
// folded, equals that of the 16-bit words.
func sum(b []byte, s uint64) uint64 {
	for len(b) >= 8 {
		v := binary.BigEndian.Uint64(b)
		s += v>>32 + v&0xffffffff
		b = b[8:]
	}
	if len(b) >= 4 {
		s += uint64(binary.BigEndian.Uint32(b))
		b = b[4:]
	}
	if len(b) >= 2 {
		s += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint64(b[0]) << 8
	}
	return s
}

// fold reduces a 64-bit one's-complement accumulator to 16 bits.
func fold(s uint64) uint16 {
	s = s>>32 + s&0xffffffff
	s = s>>32 + s&0xffffffff
	s = s>>16 + s&0xffff
	s = s>>16 + s&0xffff
	return uint16(s)
}
