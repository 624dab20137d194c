package moldudp64

import (
	"sync/atomic"
	"time"

	"github.com/walcast/walcast/bench/peers"
	"github.com/walcast/walcast/bench/peers/internal/sock"
	"github.com/walcast/walcast/bench/peers/rawudp"
	"golang.org/x/sys/unix"
)

// Publisher-side timing.
const (
	// HeartbeatInterval is how often an idle publisher (in Poll) says
	// which seq comes next, so a receiver can see a lost tail.
	HeartbeatInterval = 10 * time.Millisecond
	// RerequestInterval is how long a receiver waits before asking again
	// for a gap that was not filled.
	RerequestInterval = 20 * time.Millisecond
	// History is how many recent messages the publisher keeps for
	// re-requests.
	History = 1 << 14
	// MaxRequest caps the count of one request.
	MaxRequest = 64
	// MaxRuns caps the request packets a receiver sends per poll.
	MaxRuns = 32
)

// Peer is MoldUDP64 over UDP: A publishes one message per downstream
// packet and serves re-requests on a second socket from its history; B
// parses every packet, delivers in order and re-requests gaps. The echo
// direction (B→A) is a second, unrepaired MoldUDP64 stream.
func Peer() peers.Peer {
	return peers.Peer{Name: "moldudp64", Mode: "spin", Reliable: true, Lossy: true, Open: open}
}

type publisher struct {
	data, rereq *sock.UDP
	session     Session
	next        uint64 // seq of the next message
	hist        []byte // History slots of slot bytes
	histLen     []uint16
	slot        int
	out, in     []byte
	lastSend    time.Time
	retransmits *atomic.Int64
	echoNext    uint64 // next expected seq of the echo stream
}

func (p *publisher) Send(m []byte) error {
	if err := p.serve(); err != nil {
		return err
	}
	i := int(p.next % History)
	copy(p.hist[i*p.slot:], m)
	p.histLen[i] = uint16(len(m))
	p.out = AppendPacket(p.out[:0], p.session, p.next, m)
	p.next++
	p.lastSend = time.Now()
	return sock.PeerErr(p.data.Write(p.out))
}

// serve answers queued re-requests (one downstream packet per message).
func (p *publisher) serve() error {
	for {
		n, ok, err := p.rereq.TryRead(p.in)
		if err != nil || !ok {
			return err
		}
		r, err := ParseRequest(p.in[:n])
		if err != nil || r.Session != p.session {
			continue
		}
		for s := r.Seq; s < r.Seq+uint64(min(r.Count, MaxRequest)) && s < p.next; s++ {
			if s == 0 || p.next-s > History {
				continue // never sent (seqs start at 1), or gone from history
			}
			i := int(s % History)
			p.out = AppendPacket(p.out[:0], p.session, s, p.hist[i*p.slot:i*p.slot+int(p.histLen[i])])
			// From the data socket: B's socket is connected to it and
			// would filter datagrams from any other port.
			if err := p.data.Write(p.out); err != nil {
				return sock.PeerErr(err)
			}
			p.retransmits.Add(1)
		}
	}
}

// Poll serves re-requests and sends a heartbeat when idle.
func (p *publisher) Poll() error {
	if err := p.serve(); err != nil {
		return err
	}
	if time.Since(p.lastSend) >= HeartbeatInterval {
		p.out = AppendHeartbeat(p.out[:0], p.session, p.next)
		p.lastSend = time.Now()
		return sock.PeerErr(p.data.Write(p.out))
	}
	return nil
}

// Recv reads the echo stream (serving re-requests while it waits).
func (p *publisher) Recv(m []byte) (int, error) {
	var w sock.Wait
	for {
		n, ok, err := p.data.TryRead(p.in)
		if err != nil {
			return 0, err
		}
		if ok {
			pkt, err := Parse(p.in[:n])
			if err != nil || pkt.Count == 0 || pkt.EndOfSession() {
				continue
			}
			_, msg := pkt.Message(0)
			p.echoNext = pkt.Seq + 1
			return copy(m, msg), nil
		}
		if err := p.serve(); err != nil {
			return 0, err
		}
		if err := w.Idle(p.data.Closed, p.data.Timeout); err != nil {
			return 0, sock.PeerErr(err)
		}
	}
}

type subscriber struct {
	data     *sock.UDP
	rereqTo  *unix.SockaddrInet4
	session  Session
	expected uint64
	highest  uint64 // highest seq known to exist
	lastReq  time.Time
	reqHigh  uint64 // highest seq already requested
	// re-request pacing: the interval doubles while expected stands still
	backoff      time.Duration
	lastExpected uint64
	in, out      []byte
	echoSeq      uint64
	// reorder ring: slot seq%History holds message have[slot] (0 = empty)
	ring []byte
	have []uint64
	lens []uint16
	slot int
}

// request asks for every missing run in the reorder window: runs beyond
// what was already asked for at once, and everything still missing again
// once RerequestInterval passed without the gap filling. At most
// MaxRuns request packets go out per call.
func (s *subscriber) request() error {
	if s.highest < s.expected {
		return nil
	}
	from := max(s.expected, s.reqHigh+1)
	if time.Since(s.lastReq) >= s.backoff {
		from = s.expected
		s.lastReq = time.Now()
		// Back off while a full re-request brings no progress, so an
		// overloaded publisher is not buried in repeats (20 ms → 640 ms).
		if s.expected == s.lastExpected {
			s.backoff = min(2*s.backoff, 32*RerequestInterval)
		} else {
			s.backoff = RerequestInterval
		}
		s.lastExpected = s.expected
	}
	to := min(s.highest, s.expected+History-1)
	runs := 0
	for seq := from; seq <= to && runs < MaxRuns; {
		if s.have[int(seq%History)] == seq {
			seq++
			continue
		}
		cnt := uint64(1)
		for cnt < MaxRequest && seq+cnt <= to && s.have[int((seq+cnt)%History)] != seq+cnt {
			cnt++
		}
		s.out = AppendRequest(s.out[:0], Request{Session: s.session, Seq: seq, Count: uint16(cnt)})
		if err := sock.PeerErr(s.data.WriteTo(s.out, s.rereqTo)); err != nil {
			return err
		}
		runs++
		seq += cnt
		s.reqHigh = seq - 1
	}
	return nil
}

func (s *subscriber) Recv(m []byte) (int, error) {
	if n, ok := s.pop(m); ok {
		return n, nil
	}
	var w sock.Wait
	for {
		n, ok, err := s.data.TryRead(s.in)
		if err != nil {
			return 0, err
		}
		if !ok {
			if err := s.request(); err != nil {
				return 0, err
			}
			if err := w.Idle(s.data.Closed, s.data.Timeout); err != nil {
				return 0, sock.PeerErr(err)
			}
			continue
		}
		pkt, err := Parse(s.in[:n])
		if err != nil || pkt.Session != s.session || pkt.EndOfSession() {
			continue
		}
		if pkt.Heartbeat() {
			if pkt.Seq > 0 && pkt.Seq-1 > s.highest {
				s.highest = pkt.Seq - 1
			}
			continue
		}
		last := pkt.Seq + uint64(pkt.Count) - 1
		s.highest = max(s.highest, last)
		for i := range int(pkt.Count) {
			seq, msg := pkt.Message(i)
			if seq >= s.expected && seq-s.expected < History {
				s.stash(seq, msg) // ahead of a gap: kept until the gap fills
			}
		}
		if n, ok := s.pop(m); ok {
			return n, nil
		}
	}
}

// stash keeps message seq in the reorder ring.
func (s *subscriber) stash(seq uint64, msg []byte) {
	i := int(seq % History)
	if s.have[i] == seq {
		return
	}
	s.have[i] = seq
	s.lens[i] = uint16(copy(s.ring[i*s.slot:(i+1)*s.slot], msg))
}

// pop delivers the expected message if it is in the ring.
func (s *subscriber) pop(m []byte) (int, bool) {
	i := int(s.expected % History)
	if s.have[i] != s.expected {
		return 0, false
	}
	s.have[i] = 0
	s.expected++
	return copy(m, s.ring[i*s.slot:i*s.slot+int(s.lens[i])]), true
}

// Send publishes an echo packet back to A (its own, unrepaired stream).
func (s *subscriber) Send(m []byte) error {
	s.out = AppendPacket(s.out[:0], s.session, s.echoSeq, m)
	s.echoSeq++
	return sock.PeerErr(s.data.Write(s.out))
}

type stats struct{ n *atomic.Int64 }

func (s stats) Retransmits() int64 { return s.n.Load() }

func open(cfg peers.Config) (*peers.Pair, error) {
	a, b, err := rawudp.Sockets(cfg)
	if err != nil {
		return nil, err
	}
	addrA, inA := cfg.Side(false)
	rr, err := sock.ListenUDPOn(inA, addrA.As4())
	if err != nil {
		a.Release()
		b.Release()
		return nil, err
	}
	rr.Drop = sock.NewDrop(cfg.DropA, cfg.Seed*17+3)
	sess := NewSession("WALCAST1")
	var n atomic.Int64
	pub := &publisher{
		data: a, rereq: rr, session: sess, next: 1, slot: cfg.MsgSize,
		hist: make([]byte, History*cfg.MsgSize), histLen: make([]uint16, History),
		out: make([]byte, 0, cfg.MsgSize+HeaderLen+2), in: make([]byte, cfg.MsgSize+HeaderLen+2),
		retransmits: &n, lastSend: time.Now(),
	}
	sub := &subscriber{
		data: b, rereqTo: rr.Addr(), session: sess, expected: 1, echoSeq: 1, backoff: RerequestInterval,
		in: make([]byte, cfg.MsgSize+HeaderLen+2), out: make([]byte, 0, cfg.MsgSize+HeaderLen+2),
		ring: make([]byte, History*cfg.MsgSize), have: make([]uint64, History), lens: make([]uint16, History), slot: cfg.MsgSize,
	}
	p := rawudp.PairOf(a, b, pub, sub)
	closeAB, relAB := p.Close, p.Release
	p.Close = func() error { rr.Close(); return closeAB() }
	p.Release = func() { relAB(); rr.Release() }
	p.Stats = stats{&n}
	return p, nil
}
