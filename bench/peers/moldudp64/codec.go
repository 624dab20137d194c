// Package moldudp64 is the Nasdaq MoldUDP64 protocol (version 1.00): a
// downstream packet is a 20-byte big-endian header — 10-byte session,
// u64 sequence number of the first message, u16 message count — followed
// by that many message blocks, each a u16 length and the message bytes.
// A count of 0 is a heartbeat (the sequence number is the next one to
// come), 0xFFFF is end of session. A receiver that sees a gap sends a
// 20-byte request packet (session, first sequence number, count) to the
// publisher's re-request port, which answers with downstream packets.
package moldudp64

import (
	"encoding/binary"
	"fmt"

	"github.com/walcast/walcast/bench/peers"
)

// Layout.
const (
	HeaderLen         = 20
	RequestLen        = 20
	CountHeartbeat    = 0
	CountEndOfSession = 0xFFFF
	// MaxMessages is the largest count a data packet may carry.
	MaxMessages = 0xFFFE
)

// Session names a stream: 10 bytes, alphanumeric, space-padded.
type Session [10]byte

// NewSession pads s with spaces (and truncates it to 10 bytes).
func NewSession(s string) Session {
	var out Session
	for i := range out {
		out[i] = ' '
	}
	copy(out[:], s)
	return out
}

// Header is a downstream packet header.
type Header struct {
	Session Session
	Seq     uint64 // sequence number of the first message (next expected for heartbeat/end)
	Count   uint16
}

// Put writes h into b[:20].
func (h Header) Put(b []byte) {
	copy(b, h.Session[:])
	binary.BigEndian.PutUint64(b[10:], h.Seq)
	binary.BigEndian.PutUint16(b[18:], h.Count)
}

// AppendPacket appends a downstream packet carrying msgs, numbered from
// seq, to dst and returns the extended slice.
func AppendPacket(dst []byte, s Session, seq uint64, msgs ...[]byte) []byte {
	var h [HeaderLen]byte
	Header{Session: s, Seq: seq, Count: uint16(len(msgs))}.Put(h[:])
	dst = append(dst, h[:]...)
	for _, m := range msgs {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(m)))
		dst = append(dst, m...)
	}
	return dst
}

// AppendHeartbeat appends a heartbeat announcing next as the next seq.
func AppendHeartbeat(dst []byte, s Session, next uint64) []byte {
	var h [HeaderLen]byte
	Header{Session: s, Seq: next, Count: CountHeartbeat}.Put(h[:])
	return append(dst, h[:]...)
}

// AppendEndOfSession appends the end-of-session packet.
func AppendEndOfSession(dst []byte, s Session, next uint64) []byte {
	var h [HeaderLen]byte
	Header{Session: s, Seq: next, Count: CountEndOfSession}.Put(h[:])
	return append(dst, h[:]...)
}

// Packet is a parsed downstream packet; Body holds the message blocks
// (a sub-slice of the parsed bytes).
type Packet struct {
	Header
	Body []byte
}

// Heartbeat reports a count of 0.
func (p Packet) Heartbeat() bool { return p.Count == CountHeartbeat }

// EndOfSession reports a count of 0xFFFF.
func (p Packet) EndOfSession() bool { return p.Count == CountEndOfSession }

// Parse checks a downstream packet: a full header, and for data packets
// exactly Count well-formed message blocks filling the datagram.
func Parse(b []byte) (Packet, error) {
	if len(b) < HeaderLen {
		return Packet{}, fmt.Errorf("moldudp64: %d-byte packet: %w", len(b), peers.ErrCorrupt)
	}
	var p Packet
	copy(p.Session[:], b)
	p.Seq = binary.BigEndian.Uint64(b[10:])
	p.Count = binary.BigEndian.Uint16(b[18:])
	p.Body = b[HeaderLen:]
	if p.Heartbeat() || p.EndOfSession() {
		if len(p.Body) != 0 {
			return Packet{}, fmt.Errorf("moldudp64: %d bytes after a count of %d: %w", len(p.Body), p.Count, peers.ErrCorrupt)
		}
		return p, nil
	}
	body := p.Body
	for i := 0; i < int(p.Count); i++ {
		if len(body) < 2 {
			return Packet{}, fmt.Errorf("moldudp64: message %d of %d truncated: %w", i, p.Count, peers.ErrCorrupt)
		}
		n := int(binary.BigEndian.Uint16(body))
		if len(body) < 2+n {
			return Packet{}, fmt.Errorf("moldudp64: message %d: %d of %d bytes: %w", i, len(body)-2, n, peers.ErrCorrupt)
		}
		body = body[2+n:]
	}
	if len(body) != 0 {
		return Packet{}, fmt.Errorf("moldudp64: %d bytes after %d messages: %w", len(body), p.Count, peers.ErrCorrupt)
	}
	if p.Seq+uint64(p.Count) < p.Seq {
		return Packet{}, fmt.Errorf("moldudp64: seq %d + %d wraps: %w", p.Seq, p.Count, peers.ErrCorrupt)
	}
	return p, nil
}

// Message returns message i of a packet Parse accepted (i < Count) and
// its sequence number.
func (p Packet) Message(i int) (seq uint64, msg []byte) {
	body := p.Body
	for range i {
		body = body[2+int(binary.BigEndian.Uint16(body)):]
	}
	n := int(binary.BigEndian.Uint16(body))
	return p.Seq + uint64(i), body[2 : 2+n]
}

// Request is a re-request packet.
type Request struct {
	Session Session
	Seq     uint64
	Count   uint16
}

// AppendRequest appends r's 20 bytes to dst.
func AppendRequest(dst []byte, r Request) []byte {
	var b [RequestLen]byte
	Header(r).Put(b[:])
	return append(dst, b[:]...)
}

// ParseRequest checks a request packet: exactly 20 bytes, count ≥ 1.
func ParseRequest(b []byte) (Request, error) {
	if len(b) != RequestLen {
		return Request{}, fmt.Errorf("moldudp64: %d-byte request: %w", len(b), peers.ErrCorrupt)
	}
	var r Request
	copy(r.Session[:], b)
	r.Seq = binary.BigEndian.Uint64(b[10:])
	r.Count = binary.BigEndian.Uint16(b[18:])
	if r.Count == 0 || r.Count == CountEndOfSession {
		return Request{}, fmt.Errorf("moldudp64: request count %d: %w", r.Count, peers.ErrCorrupt)
	}
	return r, nil
}
