package replay

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walcast/walcast/wal"
	"github.com/walcast/walcast/wire"
)

// ServerConfig configures a [Server]. A zero field means its default
// (DefaultServerConfig shows them); TLS (or Plaintext) must be set.
type ServerConfig struct {
	// TLS is the server's TLS config (certificate required). It is used
	// with TLS 1.3 as the minimum version. Required unless Plaintext. It
	// must require and verify client certificates (ClientCAs set and
	// ClientAuth tls.RequireAndVerifyClientCert, as ServerTLS with a
	// client CA and DevPKI.ServerTLS(true) make it) unless AnyClient.
	TLS *tls.Config
	// AnyClient serves any TLS client, with or without a certificate: the
	// explicit opt-out of mutual TLS (`cast replay serve -any-client`).
	AnyClient bool
	// Plaintext serves without TLS. Off by default; it must be asked for
	// explicitly and TLS must then be nil.
	Plaintext bool
	// HandshakeTimeout bounds the TLS handshake plus reading the
	// ReplicationRequest (the reference has no timeout here).
	HandshakeTimeout time.Duration
	// WriteTimeout is how long one write to a connection may block. A
	// consumer that does not drain its connection for this long is
	// disconnected with ErrSlowConsumer; until then it is buffered by
	// at most BufferBytes plus the kernel socket buffer.
	WriteTimeout time.Duration
	// BufferBytes is the per-connection write buffer, in bytes.
	BufferBytes int
	// ReadBufferBytes is the per-connection read buffer of the WAL cursor
	// (sources that implement BufferOpener), in bytes, at least
	// wal.MinReaderBuffer (default 128 KiB). With BufferBytes it bounds
	// what a connection holds beyond the TLS record buffers; both are
	// returned to the operating system when the connection ends (see
	// ServerStats.BufferBytes).
	ReadBufferBytes int
	// KeepaliveInterval: in the live tail, after this long without a
	// record the server repeats CaughtUp (seq 0, so a reference client's
	// tip is unchanged) so clients can tell a quiet stream from a dead
	// server. Must be below the clients' IdleTimeout.
	KeepaliveInterval time.Duration
	// MaxConns caps concurrent connections; further ones are closed at
	// once (counted in Refused). Default 1024; negative: no cap.
	MaxConns int
	// OnDisconnect, when set, is called once per served connection as it
	// ends, from that connection's goroutine. It must not block.
	OnDisconnect func(ConnReport)
}

// DefaultServerConfig returns mutual TLS required (TLS still to be
// filled in), 10 s handshake, 5 s write timeout, 64 KiB write and 128 KiB
// read buffers per connection, 1 s keepalive, 1024 connections.
func DefaultServerConfig() ServerConfig {
	return ServerConfig{
		HandshakeTimeout:  10 * time.Second,
		WriteTimeout:      5 * time.Second,
		BufferBytes:       64 << 10,
		ReadBufferBytes:   128 << 10,
		KeepaliveInterval: time.Second,
		MaxConns:          1024,
	}
}

// Validate reports a configuration the server cannot run with.
func (c ServerConfig) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Plaintext && c.TLS != nil:
		return fmt.Errorf("%w: Plaintext with a TLS config", ErrConfig)
	case !c.Plaintext && (c.TLS == nil || (len(c.TLS.Certificates) == 0 && c.TLS.GetCertificate == nil && c.TLS.GetConfigForClient == nil)):
		return fmt.Errorf("%w: server needs a TLS certificate (or Plaintext explicitly)", ErrConfig)
	case !c.Plaintext && !c.AnyClient && c.TLS.GetConfigForClient == nil && (c.TLS.ClientAuth != tls.RequireAndVerifyClientCert || c.TLS.ClientCAs == nil):
		return fmt.Errorf("%w: server TLS does not verify client certificates: give it the clients' CA (ServerTLS with a client CA file, `cast replay serve -client-ca`), or serve any TLS client explicitly (AnyClient, -any-client)", ErrConfig)
	case c.AnyClient && c.Plaintext:
		return fmt.Errorf("%w: AnyClient is a TLS option; Plaintext has no clients to verify", ErrConfig)
	case c.HandshakeTimeout <= 0 || c.WriteTimeout <= 0 || c.KeepaliveInterval <= 0:
		return fmt.Errorf("%w: server timeouts must be positive", ErrConfig)
	case c.BufferBytes < 4096 || c.BufferBytes > 64<<20:
		return fmt.Errorf("%w: BufferBytes %d outside 4096..%d", ErrConfig, c.BufferBytes, 64<<20)
	case c.ReadBufferBytes < wal.MinReaderBuffer || c.ReadBufferBytes > 64<<20:
		return fmt.Errorf("%w: ReadBufferBytes %d outside %d..%d", ErrConfig, c.ReadBufferBytes, wal.MinReaderBuffer, 64<<20)
	case c.MaxConns < 0:
		return fmt.Errorf("%w: MaxConns < 0", ErrConfig)
	}
	return nil
}

// ConnReport describes one served connection when it ends.
type ConnReport struct {
	Remote  string
	Stream  uint32
	From    uint64 // requested from_seq
	Last    uint64 // last seq sent (0 if none)
	Records uint64 // data records sent
	Reason  error  // why it ended: io.EOF (peer closed), ErrSlowConsumer, ErrNotAvailable, …
}

// ServerStats are cumulative counters of a [Server].
type ServerStats struct {
	Accepted        uint64 // connections accepted
	Active          int64  // connections being served now
	Refused         uint64 // closed at once: MaxConns reached
	HandshakeFailed uint64 // TLS handshake failed or timed out (e.g. plaintext client)
	BadRequests     uint64 // request frame missing, corrupt or of the wrong type
	NotAvailable    uint64 // answered ReplicationNotAvailable
	SlowConsumers   uint64 // dropped because a write blocked past WriteTimeout
	Records         uint64 // data records sent, all connections
	Bytes           uint64 // frame bytes sent, all connections
	Keepalives      uint64 // CaughtUp keepalives sent on idle live tails
	// Damaged counts connections ended at damage in the log: every record
	// before it was sent, then a NotAvailable naming the damaged seq.
	Damaged uint64
	// BufferBytes is the connection buffers held now (write and read
	// buffers of the connections being served), in bytes: at most Active
	// × (BufferBytes + ReadBufferBytes), and 0 once they all ended.
	BufferBytes int64
}

// Server serves streams over TCP: one goroutine per connection, each with
// its own cursor on the source, so connections never wait on each other
// and the producer never waits on any of them.
type Server struct {
	cfg     ServerConfig
	tls     *tls.Config
	sources map[uint32]Source

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	lns    map[net.Listener]struct{}
	conns  map[net.Conn]struct{}
	closed bool

	accepted, refused, hsFailed, badReq, notAvail, slow, records, bytes, keepalives, damaged atomic.Uint64
	active, bufBytes                                                                         atomic.Int64
}

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("replay: server closed")

// NewServer returns a server for the given sources (one per stream id).
func NewServer(cfg ServerConfig, sources ...Source) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, sources: map[uint32]Source{}, lns: map[net.Listener]struct{}{}, conns: map[net.Conn]struct{}{}}
	for _, src := range sources {
		if _, dup := s.sources[src.Stream()]; dup {
			return nil, fmt.Errorf("%w: two sources for stream %d", ErrConfig, src.Stream())
		}
		s.sources[src.Stream()] = src
	}
	if !cfg.Plaintext {
		s.tls = cfg.TLS.Clone()
		if s.tls.MinVersion < tls.VersionTLS13 {
			s.tls.MinVersion = tls.VersionTLS13
		}
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() ServerStats {
	return ServerStats{
		Accepted: s.accepted.Load(), Active: s.active.Load(), Refused: s.refused.Load(),
		HandshakeFailed: s.hsFailed.Load(), BadRequests: s.badReq.Load(), NotAvailable: s.notAvail.Load(),
		SlowConsumers: s.slow.Load(), Records: s.records.Load(), Bytes: s.bytes.Load(), Keepalives: s.keepalives.Load(),
		Damaged: s.damaged.Load(), BufferBytes: s.bufBytes.Load(),
	}
}

// ListenAndServe listens on addr (TCP) and serves until Close.
func (s *Server) ListenAndServe(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("replay: listen: %w", err)
	}
	return s.Serve(ln)
}

// Serve accepts connections on ln until Close; it closes ln on return and
// returns ErrServerClosed after Close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.lns[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.lns, ln)
		s.mu.Unlock()
		ln.Close()
	}()
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil {
				return ErrServerClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("replay: accept: %w", err)
			}
			// EMFILE, ECONNABORTED and friends: back off like net/http.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(delay):
			case <-s.ctx.Done():
				return ErrServerClosed
			}
			continue
		}
		delay = 0
		s.accepted.Add(1)
		if !s.track(c) {
			s.refused.Add(1)
			c.Close()
			continue
		}
		s.wg.Add(1)
		go s.serveConn(c)
	}
}

func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || (s.cfg.MaxConns > 0 && len(s.conns) >= s.cfg.MaxConns) {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

// Close stops accepting, closes every connection and waits for their
// goroutines to end.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.cancel()
	for ln := range s.lns {
		ln.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

func (s *Server) serveConn(raw net.Conn) {
	s.active.Add(1)
	rep := ConnReport{Remote: raw.RemoteAddr().String()}
	defer func() {
		raw.Close()
		s.mu.Lock()
		delete(s.conns, raw)
		s.mu.Unlock()
		s.active.Add(-1)
		if s.cfg.OnDisconnect != nil {
			s.cfg.OnDisconnect(rep)
		}
		s.wg.Done()
	}()
	rep.Reason = s.session(raw, &rep)
}

// session runs one connection's protocol and returns why it ended.
func (s *Server) session(raw net.Conn, rep *ConnReport) error {
	var conn net.Conn = raw
	_ = raw.SetDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
	if s.tls != nil {
		tc := tls.Server(raw, s.tls)
		if err := tc.HandshakeContext(s.ctx); err != nil {
			s.hsFailed.Add(1)
			return fmt.Errorf("replay: TLS handshake: %w", err)
		}
		conn = tc
	}
	req, err := readRequest(conn)
	if err != nil {
		s.badReq.Add(1)
		return err
	}
	_ = raw.SetDeadline(time.Time{})
	rep.Stream, rep.From = req.Stream, req.From

	src := s.sources[req.Stream]
	var oldest, durable uint64
	if src != nil {
		oldest, durable = src.Bounds()
	}
	// Servable as in the reference: from 0 means "from the oldest", and a
	// request above the highest seq waits for it.
	if src == nil || !(req.From == 0 || (durable != 0 && req.From >= oldest)) {
		s.notAvail.Add(1)
		var f [wire.ControlFrameSize]byte
		wire.PutNotAvailableFrame(f[:], wire.NotAvailable{Requested: req.From, Oldest: oldest, Highest: durable, Stream: req.Stream})
		_ = raw.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
		if _, err := conn.Write(f[:]); err != nil {
			return fmt.Errorf("replay: send NotAvailable: %w", err)
		}
		if cw, ok := conn.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		return ErrNotAvailable
	}

	// The client sends nothing after its request: a read returning means
	// it closed (or broke protocol). Watch for that so a quiet live tail
	// notices a departed client at once instead of at the next write.
	ctx, cancel := context.WithCancelCause(s.ctx)
	defer cancel(nil)
	go func() {
		var b [1]byte
		_, err := conn.Read(b[:])
		if err == nil {
			err = fmt.Errorf("%w: client sent bytes after its request", ErrProtocol)
		}
		cancel(err)
	}()
	defer raw.Close() // ends the watcher's Read

	// The connection's buffers: bounded, and returned when it ends (after
	// run has closed its cursor and the last flush below).
	mem, err := newConnMem(s.cfg.BufferBytes, s.cfg.ReadBufferBytes)
	if err != nil {
		return err
	}
	s.bufBytes.Add(int64(len(mem.mem)))
	defer func() {
		s.bufBytes.Add(-int64(len(mem.mem)))
		mem.release()
	}()
	st := streamer{
		s: s, src: src, rep: rep, ext: req.Flags&wire.ReplayExt != 0, req: req, rbuf: mem.r,
		bw: &connWriter{w: &deadlineWriter{c: conn, raw: raw, d: s.cfg.WriteTimeout}, buf: mem.w},
	}
	err = st.run(ctx, req.From, oldest, durable)
	if errors.Is(err, wal.ErrDamaged) || errors.Is(err, wire.ErrCorrupt) {
		s.damaged.Add(1)
		if werr := st.damage(err); werr != nil {
			err = errors.Join(err, werr)
		}
		if cw, ok := conn.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
	} else {
		// Whatever ended the connection, the records counted as sent go
		// out (a write error makes this a no-op).
		_ = st.bw.Flush()
	}
	if errors.Is(err, context.Canceled) {
		if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
			err = c
		}
	}
	if errors.Is(err, ErrSlowConsumer) {
		s.slow.Add(1)
	}
	return err
}

// readRequest reads and verifies the ReplicationRequest frame: version,
// type, length (64..1024 bytes, so a hostile length cannot make us
// allocate), then CRC before the payload is interpreted.
func readRequest(c net.Conn) (wire.ReplicationRequest, error) {
	var b [wire.HeaderSize + 1024]byte
	if _, err := io.ReadFull(c, b[:wire.HeaderSize]); err != nil {
		return wire.ReplicationRequest{}, fmt.Errorf("replay: read request: %w", err)
	}
	h, err := wire.ParseHeader(b[:])
	if err != nil {
		return wire.ReplicationRequest{}, fmt.Errorf("replay: request: %w", err)
	}
	if h.Type != wire.TypeReplicationRequest || h.Len < wire.ControlPayloadSize || int(h.Len) > len(b)-wire.HeaderSize {
		return wire.ReplicationRequest{}, fmt.Errorf("%w: request type %#x len %d", ErrProtocol, h.Type, h.Len)
	}
	n := wire.HeaderSize + int(h.Len)
	if _, err := io.ReadFull(c, b[wire.HeaderSize:n]); err != nil {
		return wire.ReplicationRequest{}, fmt.Errorf("replay: read request: %w", err)
	}
	_, p, _, err := wire.DecodeFrame(b[:n])
	if err != nil {
		return wire.ReplicationRequest{}, fmt.Errorf("replay: request: %w", err)
	}
	return wire.ParseReplicationRequest(p)
}

// deadlineWriter arms the write deadline before every write that reaches
// the socket (bufio calls it once per full buffer or flush), so a peer
// that stops draining fails the write after d instead of blocking it.
type deadlineWriter struct {
	c   net.Conn
	raw net.Conn
	d   time.Duration
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	_ = w.raw.SetWriteDeadline(time.Now().Add(w.d))
	n, err := w.c.Write(p)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return n, fmt.Errorf("%w: a write blocked for %v", ErrSlowConsumer, w.d)
		}
	}
	return n, err
}
