// Package soupbintcp is Nasdaq SoupBinTCP 4.1 over TCP: every packet is a
// big-endian u16 length (of what follows), a type byte and the payload.
// The client logs in ('L': username 6, password 10, requested session 10,
// requested sequence number 20, alphanumeric fields space-padded, numbers
// right-justified); the server accepts ('A': session 10, next sequence
// number 20) or rejects ('J'), then streams sequenced data ('S'); the
// client sends unsequenced data ('U'); both sides send a heartbeat ('H'
// server, 'R' client) after a second without sending; 'Z' ends the
// session and 'O' logs out.
package soupbintcp

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/walcast/walcast/bench/peers"
)

// Packet types.
const (
	Debug            = '+'
	LoginAccepted    = 'A'
	LoginRejected    = 'J'
	SequencedData    = 'S'
	ServerHeartbeat  = 'H'
	EndOfSession     = 'Z'
	LoginRequest     = 'L'
	UnsequencedData  = 'U'
	ClientHeartbeat  = 'R'
	LogoutRequest    = 'O'
	LoginRequestLen  = 46 // payload bytes
	LoginAcceptedLen = 30
)

// MaxPacket is the largest payload a u16 length allows (length counts
// the type byte).
const MaxPacket = 0xFFFF - 1

// AppendPacket appends one packet of type typ to dst.
func AppendPacket(dst []byte, typ byte, payload []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(payload)+1))
	dst = append(dst, typ)
	return append(dst, payload...)
}

// Next splits the first packet off a stream buffer. ok is false when b
// does not yet hold a whole packet; payload and rest are sub-slices of b.
func Next(b []byte) (typ byte, payload, rest []byte, ok bool, err error) {
	if len(b) < 2 {
		return 0, nil, b, false, nil
	}
	n := int(binary.BigEndian.Uint16(b))
	if n == 0 {
		return 0, nil, b, false, fmt.Errorf("soupbintcp: zero-length packet: %w", peers.ErrCorrupt)
	}
	if len(b) < 2+n {
		return 0, nil, b, false, nil
	}
	return b[2], b[3 : 2+n], b[2+n:], true, nil
}

// Login is the login request.
type Login struct {
	Username, Password, Session string
	Seq                         uint64 // requested next sequence number; 0 = from the current position
}

func pad(dst []byte, s string, n int, right bool) []byte {
	if len(s) > n {
		s = s[:n]
	}
	sp := strings.Repeat(" ", n-len(s))
	if right {
		return append(append(dst, sp...), s...)
	}
	return append(append(dst, s...), sp...)
}

// AppendLogin appends a login request packet.
func AppendLogin(dst []byte, l Login) []byte {
	var p []byte
	p = pad(p, l.Username, 6, false)
	p = pad(p, l.Password, 10, false)
	p = pad(p, l.Session, 10, true)
	p = pad(p, strconv.FormatUint(l.Seq, 10), 20, true)
	return AppendPacket(dst, LoginRequest, p)
}

func num(b []byte) (uint64, error) {
	s := strings.TrimSpace(string(b))
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("soupbintcp: number %q: %w", s, peers.ErrCorrupt)
	}
	return v, nil
}

// ParseLogin parses a login request payload.
func ParseLogin(p []byte) (Login, error) {
	if len(p) != LoginRequestLen {
		return Login{}, fmt.Errorf("soupbintcp: %d-byte login: %w", len(p), peers.ErrCorrupt)
	}
	seq, err := num(p[26:46])
	if err != nil {
		return Login{}, err
	}
	return Login{
		Username: strings.TrimRight(string(p[:6]), " "),
		Password: strings.TrimRight(string(p[6:16]), " "),
		Session:  strings.TrimSpace(string(p[16:26])),
		Seq:      seq,
	}, nil
}

// AppendAccepted appends a login-accepted packet.
func AppendAccepted(dst []byte, session string, next uint64) []byte {
	var p []byte
	p = pad(p, session, 10, true)
	p = pad(p, strconv.FormatUint(next, 10), 20, true)
	return AppendPacket(dst, LoginAccepted, p)
}

// ParseAccepted parses a login-accepted payload.
func ParseAccepted(p []byte) (session string, next uint64, err error) {
	if len(p) != LoginAcceptedLen {
		return "", 0, fmt.Errorf("soupbintcp: %d-byte login accepted: %w", len(p), peers.ErrCorrupt)
	}
	next, err = num(p[10:30])
	return strings.TrimSpace(string(p[:10])), next, err
}
