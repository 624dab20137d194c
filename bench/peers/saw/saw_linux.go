package saw

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/walcast/walcast/bench/peers"
	"github.com/walcast/walcast/bench/peers/internal/sock"
	"github.com/walcast/walcast/bench/peers/rawudp"
)

// RetransmitTimeout is the classic sender's fixed wait for an ACK.
const RetransmitTimeout = 200 * time.Millisecond

// Peer is stop-and-wait over UDP. DropB is the classic receiver-side
// drop (of DATA); DropA drops ACKs at the sender (loss both ways).
func Peer() peers.Peer {
	return peers.Peer{Name: "stop-and-wait", Mode: "spin", Reliable: true, Lossy: true, Open: open}
}

type sender struct {
	u           *sock.UDP
	out, in     []byte
	seq         uint32
	retransmits *atomic.Int64
}

// RoundTrip sends p as the next DATA and returns when its ACK arrived,
// retransmitting every 200 ms.
func (s *sender) RoundTrip(p []byte) error {
	if len(p)+HeaderLen > len(s.out) {
		return fmt.Errorf("saw: message of %d bytes over %d", len(p), len(s.out)-HeaderLen)
	}
	PutHeader(s.out, s.seq, TypeData)
	copy(s.out[HeaderLen:], p)
	frame := s.out[:HeaderLen+len(p)]
	for {
		if err := s.u.Write(frame); err != nil {
			return sock.PeerErr(err)
		}
		sent := time.Now()
		for {
			n, ok, err := s.u.TryRead(s.in)
			if err != nil {
				return err
			}
			if ok {
				seq, typ, _, err := Parse(s.in[:n])
				if err == nil && typ == TypeAck && seq == s.seq {
					s.seq++
					return nil
				}
				continue // stale ACK of a retransmission, or garbage
			}
			if s.u.Closed() {
				return peers.ErrClosed
			}
			if time.Since(sent) >= RetransmitTimeout {
				break
			}
		}
		s.retransmits.Add(1)
	}
}

// Send is RoundTrip: stop-and-wait has no other way to send.
func (s *sender) Send(p []byte) error { return s.RoundTrip(p) }

// Recv: the sender receives only ACKs, inside RoundTrip.
func (s *sender) Recv([]byte) (int, error) {
	return 0, errors.New("saw: the sending side receives no data")
}

type receiver struct {
	u        *sock.UDP
	in, ack  []byte
	expected uint32
}

// Recv waits for the next in-order DATA, ACKing everything it keeps.
func (r *receiver) Recv(p []byte) (int, error) {
	for {
		n, err := r.u.Read(r.in)
		if err != nil {
			return 0, sock.PeerErr(err)
		}
		seq, typ, payload, err := Parse(r.in[:n])
		if err != nil || typ != TypeData {
			continue
		}
		PutHeader(r.ack, seq, TypeAck)
		if err := r.u.Write(r.ack); err != nil {
			return 0, sock.PeerErr(err)
		}
		if seq != r.expected {
			continue // a retransmission whose ACK was lost: re-ACKed above
		}
		r.expected++
		return copy(p, payload), nil
	}
}

// Send: the receiver sends only ACKs.
func (r *receiver) Send([]byte) error { return errors.New("saw: the receiving side sends no data") }

type stats struct{ n *atomic.Int64 }

func (s stats) Retransmits() int64 { return s.n.Load() }

func open(cfg peers.Config) (*peers.Pair, error) {
	a, b, err := rawudp.Sockets(cfg)
	if err != nil {
		return nil, err
	}
	var n atomic.Int64
	s := &sender{u: a, out: make([]byte, cfg.MsgSize+HeaderLen), in: make([]byte, 64), retransmits: &n}
	r := &receiver{u: b, in: make([]byte, cfg.MsgSize+HeaderLen), ack: make([]byte, HeaderLen)}
	p := rawudp.PairOf(a, b, s, r)
	p.Stats = stats{&n}
	return p, nil
}
