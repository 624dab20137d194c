package moldudp64

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/walcast/walcast/internal/fanout"
	"github.com/walcast/walcast/internal/latency"
	"github.com/walcast/walcast/internal/netns"
	"github.com/walcast/walcast/internal/pace"
	"golang.org/x/sys/unix"
)

// Fan-out timing and sizes (the publisher serves every subscriber's
// re-requests from one history).
const (
	fanHistory = 1 << 18 // messages kept for re-requests
	fanTick    = time.Millisecond
)

// FanoutOptions are MoldUDP64's own knobs for RunFanout.
type FanoutOptions struct {
	// RepairsToGroup sends the request server's answers to the group
	// (every subscriber missing them is repaired at once) instead of to
	// the requester only, which is what the MoldUDP64 specification
	// describes.
	RepairsToGroup bool
}

// RunFanout runs MoldUDP64 on multicast with its request server in the
// fan-out network of internal/fanout: the publisher in host 0 sends one
// message per downstream packet to c.Group (port chosen by the kernel
// when 0) and answers re-requests on a unicast request socket; each
// subscriber in hosts 1..N joins the group, delivers in order and
// re-requests every missing run (at once, then every RerequestInterval
// until filled: MoldUDP64 has no suppression). Loss c.Loss is injected
// independently on the way to every subscriber. Only c.Receivers,
// Records, Payload, Rate, Loss, Group and Timeout are used. Every
// goroutine blocks in the kernel (no spinning), as the casting loops of
// the same workload park.
func RunFanout(ctx context.Context, c fanout.Config, o FanoutOptions) (fanout.Result, error) {
	res := fanout.Result{Config: c}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Minute
	}
	if c.Payload < 16 || c.Receivers < 1 || c.Records < 1 || !c.Group.Addr().Is4() || !c.Group.Addr().IsMulticast() {
		return res, fmt.Errorf("moldudp64: fan-out needs Payload ≥ 16, receivers, records and an IPv4 group (got %+v)", c)
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	env, err := fanout.NewEnv(c.Receivers, c.Loss)
	if err != nil {
		return res, err
	}
	defer env.Close()

	sess := NewSession("WALCASTFAN")
	var pub *publisherF
	if err := env.Sender().Do(func() error {
		var err error
		pub, err = newPublisherF(env.Sender(), c, sess, o)
		return err
	}); err != nil {
		return res, err
	}
	defer pub.close()
	group := &net.UDPAddr{IP: c.Group.Addr().AsSlice(), Port: pub.port}
	subs := make([]*subscriberF, c.Receivers)
	for i := range subs {
		h := env.Receiver(i)
		if err := h.Do(func() error {
			var err error
			subs[i], err = newSubscriberF(h, group, pub.reqAddr, c, sess, env.Clock)
			return err
		}); err != nil {
			return res, err
		}
		defer subs[i].conn.Close()
		if err := env.Impair(i, uint16(pub.port)); err != nil {
			return res, err
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, c.Receivers+2)
	for _, s := range subs {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- s.run(ctx) }()
	}
	pubCtx, stopPub := context.WithCancel(ctx)
	var pwg sync.WaitGroup
	pwg.Add(2)
	go func() { defer pwg.Done(); errs <- pub.serve(pubCtx) }()
	go func() { defer pwg.Done(); errs <- pub.publish(pubCtx, env.Clock) }()
	wg.Wait()
	res.Elapsed = time.Since(start)
	stopPub()
	pub.conn.SetReadDeadline(time.Now())
	pub.req.SetReadDeadline(time.Now())
	pwg.Wait()
	close(errs)
	var first error
	for e := range errs {
		if e != nil && !errors.Is(e, context.Canceled) && first == nil {
			first = e
		}
	}
	var events fanout.LostEvents
	for i, s := range subs {
		rr := fanout.ReceiverResult{Delivered: s.delivered, OutOfOrder: 0, UDP: s.delivered,
			Repairs: s.tr.Repairs(), Duplicates: s.tr.Duplicates(), NakFrames: s.requests, NakSeqs: s.reqSeqs,
			Dropped: env.Dropped(i), Latency: s.lat.Summarize()}
		if s.delivered < uint64(c.Records) {
			rr.Missing = uint64(c.Records) - s.delivered
		}
		rr.Lost = events.Add(s.tr)
		res.NakFrames += rr.NakFrames
		res.Receivers = append(res.Receivers, rr)
	}
	res.LostEvents = events.Count()
	res.SenderDatagrams = pub.datagrams.Load()
	res.SenderData = pub.data.Load()
	res.Repairs = pub.repairs.Load()
	if res.Elapsed > 0 {
		res.Throughput = float64(c.Records) / res.Elapsed.Seconds()
	}
	res.Load = env.Load()
	if ctx.Err() != nil && first == nil {
		first = fmt.Errorf("moldudp64: fan-out: %w", ctx.Err())
	}
	return res, first
}

// publisherF is the fan-out publisher: a data socket sending to the
// group and a request server socket (unicast).
type publisherF struct {
	conn, req *net.UDPConn
	port      int
	reqAddr   *net.UDPAddr
	group     *net.UDPAddr
	sess      Session
	c         fanout.Config
	o         FanoutOptions

	mu      sync.Mutex // history: written by publish, read by serve
	hist    []byte
	histLen []uint16
	next    uint64

	datagrams, data, repairs atomic.Uint64
}

func newPublisherF(h netns.Host, c fanout.Config, sess Session, o FanoutOptions) (*publisherF, error) {
	ifc, err := net.InterfaceByName(h.Link)
	if err != nil {
		return nil, err
	}
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: h.Addr.AsSlice()})
	if err != nil {
		return nil, err
	}
	if err := setMulticastIf(conn, ifc.Index); err != nil {
		conn.Close()
		return nil, err
	}
	req, err := net.ListenUDP("udp4", &net.UDPAddr{IP: h.Addr.AsSlice()})
	if err != nil {
		conn.Close()
		return nil, err
	}
	for _, k := range []*net.UDPConn{conn, req} {
		k.SetReadBuffer(8 << 20)
		k.SetWriteBuffer(8 << 20)
	}
	port := int(c.Group.Port())
	if port == 0 {
		port = conn.LocalAddr().(*net.UDPAddr).Port // free here, and a port is a port on every host
	}
	p := &publisherF{
		conn: conn, req: req, port: port, reqAddr: req.LocalAddr().(*net.UDPAddr),
		group: &net.UDPAddr{IP: c.Group.Addr().AsSlice(), Port: port}, sess: sess, c: c, o: o,
		hist: make([]byte, fanHistory*c.Payload), histLen: make([]uint16, fanHistory), next: 1,
	}
	return p, nil
}

// setMulticastIf makes conn send its multicast out of interface index.
func setMulticastIf(conn *net.UDPConn, index int) error {
	rc, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptIPMreqn(int(fd), unix.IPPROTO_IP, unix.IP_MULTICAST_IF, &unix.IPMreqn{Ifindex: int32(index)})
		if serr == nil {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_MULTICAST_TTL, 1)
		}
	}); err != nil {
		return err
	}
	return serr
}

func (p *publisherF) close() {
	p.conn.Close()
	p.req.Close()
}

func (p *publisherF) write(b []byte, to *net.UDPAddr) error {
	for {
		_, err := p.conn.WriteToUDP(b, to)
		if err == nil {
			p.datagrams.Add(1)
			return nil
		}
		if errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.EAGAIN) {
			time.Sleep(50 * time.Microsecond)
			continue
		}
		return err
	}
}

// publish sends Records messages at Rate (paced in 1 ms steps by the
// same token bucket as walcast's fan-out senders: after a stall it
// resumes at the rate, never racing to catch up), then heartbeats every
// HeartbeatInterval until ctx ends, so subscribers see a lost tail.
func (p *publisherF) publish(ctx context.Context, clk fanout.Clock) error {
	msg := make([]byte, p.c.Payload)
	out := make([]byte, 0, HeaderLen+2+p.c.Payload)
	bucket := pace.New(float64(p.c.Rate))
	sent := 0
	lastSend := time.Now()
	for ctx.Err() == nil {
		for sent < p.c.Records && bucket.Ready(clk.Now()) {
			bucket.Spend()
			seq := uint64(sent + 1)
			binary.LittleEndian.PutUint64(msg, seq)
			binary.LittleEndian.PutUint64(msg[8:], uint64(clk.Now()))
			p.mu.Lock()
			i := int(seq % fanHistory)
			copy(p.hist[i*p.c.Payload:], msg)
			p.histLen[i] = uint16(len(msg))
			p.next = seq + 1
			p.mu.Unlock()
			out = AppendPacket(out[:0], p.sess, seq, msg)
			if err := p.write(out, p.group); err != nil {
				return err
			}
			p.data.Add(1)
			sent++
			lastSend = time.Now()
		}
		if sent == p.c.Records && time.Since(lastSend) >= HeartbeatInterval {
			p.mu.Lock()
			next := p.next
			p.mu.Unlock()
			out = AppendHeartbeat(out[:0], p.sess, next)
			if err := p.write(out, p.group); err != nil {
				return err
			}
			lastSend = time.Now()
		}
		time.Sleep(fanTick)
	}
	return nil
}

// serve answers re-requests from the history, one downstream packet per
// message, to the requester (or to the group with RepairsToGroup).
func (p *publisherF) serve(ctx context.Context) error {
	in := make([]byte, 512)
	out := make([]byte, 0, HeaderLen+2+p.c.Payload)
	msg := make([]byte, p.c.Payload)
	for ctx.Err() == nil {
		p.req.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		n, from, err := p.req.ReadFromUDP(in)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				continue
			}
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		r, err := ParseRequest(in[:n])
		if err != nil || r.Session != p.sess {
			continue
		}
		to := from
		if p.o.RepairsToGroup {
			to = p.group
		}
		for s := r.Seq; s < r.Seq+uint64(min(r.Count, MaxRequest)); s++ {
			p.mu.Lock()
			ok := s > 0 && s < p.next && p.next-s <= fanHistory
			var k int
			if ok {
				i := int(s % fanHistory)
				k = copy(msg, p.hist[i*p.c.Payload:i*p.c.Payload+int(p.histLen[i])])
			}
			p.mu.Unlock()
			if !ok {
				continue
			}
			out = AppendPacket(out[:0], p.sess, s, msg[:k])
			if err := p.write(out, to); err != nil {
				return err
			}
			p.repairs.Add(1)
		}
	}
	return nil
}

// subscriberF joins the group, delivers in order, re-requests gaps.
type subscriberF struct {
	conn    *net.UDPConn
	reqTo   *net.UDPAddr
	sess    Session
	c       fanout.Config
	clk     fanout.Clock
	tr      *fanout.Tracker
	lat     *latency.Samples
	records uint64

	expected, highest, reqHigh uint64
	lastReq                    time.Time
	ring                       []byte
	have                       []uint64
	delivered                  uint64
	requests, reqSeqs          uint64
}

func newSubscriberF(h netns.Host, group, reqTo *net.UDPAddr, c fanout.Config, sess Session, clk fanout.Clock) (*subscriberF, error) {
	ifc, err := net.InterfaceByName(h.Link)
	if err != nil {
		return nil, err
	}
	conn, err := net.ListenMulticastUDP("udp4", ifc, group)
	if err != nil {
		return nil, err
	}
	conn.SetReadBuffer(8 << 20)
	return &subscriberF{
		conn: conn, reqTo: reqTo, sess: sess, c: c, clk: clk, tr: fanout.NewTracker(c.Records), lat: latency.NewSamples(c.Records),
		records: uint64(c.Records), expected: 1,
		ring: make([]byte, fanHistory*c.Payload), have: make([]uint64, fanHistory),
	}, nil
}

func (s *subscriberF) run(ctx context.Context) error {
	in := make([]byte, 2048)
	out := make([]byte, 0, RequestLen)
	for ctx.Err() == nil && s.delivered < s.records {
		s.conn.SetReadDeadline(time.Now().Add(2 * time.Millisecond))
		n, err := s.conn.Read(in)
		if err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				return err
			}
		} else {
			s.packet(in[:n])
		}
		var rerr error
		if out, rerr = s.request(out); rerr != nil {
			return rerr
		}
	}
	return ctx.Err()
}

func (s *subscriberF) packet(b []byte) {
	pkt, err := Parse(b)
	if err != nil || pkt.Session != s.sess || pkt.EndOfSession() {
		return
	}
	if pkt.Heartbeat() {
		if pkt.Seq > 0 && pkt.Seq-1 > s.highest {
			s.highest = pkt.Seq - 1
		}
		return
	}
	for i := range int(pkt.Count) {
		seq, msg := pkt.Message(i)
		s.tr.Observe(seq)
		s.highest = max(s.highest, seq)
		if seq < s.expected || seq-s.expected >= fanHistory || len(msg) < 16 {
			continue
		}
		k := int(seq % fanHistory)
		if s.have[k] != seq {
			s.have[k] = seq
			copy(s.ring[k*s.c.Payload:(k+1)*s.c.Payload], msg)
		}
	}
	for {
		k := int(s.expected % fanHistory)
		if s.have[k] != s.expected {
			return
		}
		ts := int64(binary.LittleEndian.Uint64(s.ring[k*s.c.Payload+8:]))
		s.lat.Record(s.clk.Now() - ts)
		s.have[k] = 0
		s.expected++
		s.delivered++
	}
}

// request asks for runs beyond what was already asked at once, and for
// everything still missing again once RerequestInterval passed.
func (s *subscriberF) request(out []byte) ([]byte, error) {
	if s.highest < s.expected {
		return out, nil
	}
	from := max(s.expected, s.reqHigh+1)
	if time.Since(s.lastReq) >= RerequestInterval {
		from = s.expected
		s.lastReq = time.Now()
	}
	to := min(s.highest, s.expected+fanHistory-1)
	runs := 0
	for seq := from; seq <= to && runs < MaxRuns; {
		if s.have[int(seq%fanHistory)] == seq {
			seq++
			continue
		}
		cnt := uint64(1)
		for cnt < MaxRequest && seq+cnt <= to && s.have[int((seq+cnt)%fanHistory)] != seq+cnt {
			cnt++
		}
		out = AppendRequest(out[:0], Request{Session: s.sess, Seq: seq, Count: uint16(cnt)})
		if _, err := s.conn.WriteToUDP(out, s.reqTo); err != nil && !errors.Is(err, syscall.ENOBUFS) {
			return out, err
		}
		s.requests++
		s.reqSeqs += cnt
		runs++
		seq += cnt
		s.reqHigh = seq - 1
	}
	return out, nil
}
