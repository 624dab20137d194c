package soupbintcp

import (
	"fmt"
	"time"

	"github.com/walcast/walcast/bench/peers"
	"github.com/walcast/walcast/bench/peers/internal/sock"
	"golang.org/x/sys/unix"
)

// HeartbeatInterval is the protocol's idle interval before a heartbeat.
const HeartbeatInterval = time.Second

// Credentials the bench server accepts.
const (
	user    = "bench"
	pass    = "walcast"
	session = "WALCAST1"
)

// Peer is SoupBinTCP: A is the server streaming sequenced data, B the
// logged-in client answering with unsequenced data.
func Peer() peers.Peer {
	return peers.Peer{Name: "soupbintcp", Mode: "spin", Reliable: true, TCP: true, Open: open}
}

// end is one side of a session: a stream, its read buffer and its
// heartbeat clock.
type end struct {
	s        *sock.Stream
	rbuf     []byte
	r, w     int // unread bytes are rbuf[r:w]
	out      []byte
	dataType byte // what this side sends: 'S' (server) or 'U' (client)
	wantType byte // what it delivers: 'U' (server) or 'S' (client)
	hbType   byte
	lastSend time.Time
	seq      uint64 // server: next sequence number; client: next expected
}

func (e *end) send(typ byte, p []byte) error {
	e.out = AppendPacket(e.out[:0], typ, p)
	e.lastSend = time.Now()
	return sock.PeerErr(e.s.WriteAll(e.out))
}

func (e *end) Send(p []byte) error {
	if len(p) > MaxPacket {
		return fmt.Errorf("soupbintcp: %d-byte message", len(p))
	}
	if e.dataType == SequencedData {
		e.seq++
	}
	return e.send(e.dataType, p)
}

// next returns the next whole packet, reading and heartbeating as needed.
func (e *end) next() (byte, []byte, error) {
	var w sock.Wait
	for {
		typ, payload, _, ok, err := Next(e.rbuf[e.r:e.w])
		if err != nil {
			return 0, nil, err
		}
		if ok {
			e.r += 3 + len(payload)
			return typ, payload, nil
		}
		if e.r > 0 { // compact, so a packet always fits
			e.w = copy(e.rbuf, e.rbuf[e.r:e.w])
			e.r = 0
		}
		if e.w == len(e.rbuf) {
			return 0, nil, fmt.Errorf("soupbintcp: packet over %d bytes: %w", len(e.rbuf), peers.ErrCorrupt)
		}
		n, err := unix.Read(e.s.FD, e.rbuf[e.w:])
		if err == nil && n == 0 {
			return 0, nil, peers.ErrClosed
		}
		if err == nil {
			e.w += n
			w = sock.Wait{}
			continue
		}
		if err != unix.EAGAIN {
			return 0, nil, err
		}
		if time.Since(e.lastSend) >= HeartbeatInterval {
			if err := e.send(e.hbType, nil); err != nil {
				return 0, nil, err
			}
		}
		if err := w.Idle(e.closed, e.s.Timeout); err != nil {
			return 0, nil, sock.PeerErr(err)
		}
	}
}

func (e *end) closed() bool { return e.s.Closed() }

// Recv delivers the next data packet of the expected type, skipping
// heartbeats and debug packets.
func (e *end) Recv(p []byte) (int, error) {
	for {
		typ, payload, err := e.next()
		if err != nil {
			return 0, err
		}
		switch typ {
		case e.wantType:
			if typ == SequencedData {
				e.seq++
			}
			return copy(p, payload), nil
		case ServerHeartbeat, ClientHeartbeat, Debug:
			continue
		case EndOfSession, LogoutRequest:
			return 0, peers.ErrClosed
		default:
			return 0, fmt.Errorf("soupbintcp: unexpected packet %q: %w", typ, peers.ErrCorrupt)
		}
	}
}

func newEnd(s *sock.Stream, cfg peers.Config, server bool) *end {
	e := &end{s: s, rbuf: make([]byte, 2*(cfg.MsgSize+3)+4096), out: make([]byte, 0, cfg.MsgSize+3), lastSend: time.Now()}
	if server {
		e.dataType, e.wantType, e.hbType, e.seq = SequencedData, UnsequencedData, ServerHeartbeat, 1
	} else {
		e.dataType, e.wantType, e.hbType = UnsequencedData, SequencedData, ClientHeartbeat
	}
	return e
}

// login runs the handshake: the client asks for the session from seq 1,
// the server checks the credentials and accepts.
func login(srv, cli *end) error {
	cli.out = AppendLogin(cli.out[:0], Login{Username: user, Password: pass, Session: "", Seq: 1})
	if err := sock.PeerErr(cli.s.WriteAll(cli.out)); err != nil {
		return err
	}
	typ, p, err := srv.next()
	if err != nil {
		return err
	}
	l, err := ParseLogin(p)
	if typ != LoginRequest || err != nil || l.Username != user || l.Password != pass {
		srv.send(LoginRejected, []byte{'A'})
		return fmt.Errorf("soupbintcp: login refused (%q, %v)", typ, err)
	}
	srv.out = AppendAccepted(srv.out[:0], session, srv.seq)
	if err := sock.PeerErr(srv.s.WriteAll(srv.out)); err != nil {
		return err
	}
	typ, p, err = cli.next()
	if err != nil {
		return err
	}
	if typ != LoginAccepted {
		return fmt.Errorf("soupbintcp: login answered with %q", typ)
	}
	sess, next, err := ParseAccepted(p)
	if err != nil || sess != session || next != 1 {
		return fmt.Errorf("soupbintcp: accepted %q from %d (%v)", sess, next, err)
	}
	cli.seq = next
	return nil
}

func open(cfg peers.Config) (*peers.Pair, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// A is the server (sequenced data server → client), B the client.
	addrA, inA := cfg.Side(false)
	addrB, inB := cfg.Side(true)
	cs, ss, err := sock.TCPPairOn(inB, addrB.As4(), inA, addrA.As4())
	if err != nil {
		return nil, err
	}
	cs.Timeout, ss.Timeout = cfg.RecvTimeout(), cfg.RecvTimeout()
	srv, cli := newEnd(ss, cfg, true), newEnd(cs, cfg, false)
	if err := login(srv, cli); err != nil {
		cs.Release()
		ss.Release()
		return nil, err
	}
	return &peers.Pair{
		A: srv, B: cli,
		Close:   func() error { cs.Close(); ss.Close(); return nil },
		Release: func() { cs.Release(); ss.Release() },
	}, nil
}
