package replay

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/walcast/walcast/wire"
)

// connect dials ep, runs the TLS handshake and sends the request
// (from_seq = tip+1), all within ConnectTimeout. raw is the TCP conn
// (deadlines are set on it).
func (c *Client) connect(ctx context.Context, ep string) (conn, raw net.Conn, err error) {
	return c.connectFrom(ctx, ep, c.tip.Load()+1)
}

func (c *Client) connectFrom(ctx context.Context, ep string, from uint64) (conn, raw net.Conn, err error) {
	d := net.Dialer{Timeout: c.cfg.ConnectTimeout}
	if c.cfg.KeepAlive > 0 {
		d.KeepAliveConfig = net.KeepAliveConfig{Enable: true, Idle: c.cfg.KeepAlive, Interval: c.cfg.KeepAlive, Count: 3}
	} else {
		d.KeepAlive = -1
	}
	raw, err = d.DialContext(ctx, "tcp", ep)
	if err != nil {
		return nil, nil, fmt.Errorf("replay: dial %s: %w", ep, err)
	}
	_ = raw.SetDeadline(time.Now().Add(c.cfg.ConnectTimeout))
	conn = raw
	if !c.cfg.Plaintext {
		cfg := c.cfg.TLS
		if cfg.ServerName == "" {
			host, _, herr := net.SplitHostPort(ep)
			if herr != nil {
				host = ep
			}
			cfg = cfg.Clone()
			cfg.ServerName = host
		}
		if cfg.MinVersion < tls.VersionTLS13 {
			if cfg == c.cfg.TLS {
				cfg = cfg.Clone()
			}
			cfg.MinVersion = tls.VersionTLS13
		}
		tc := tls.Client(raw, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, nil, fmt.Errorf("replay: TLS handshake with %s: %w", ep, err)
		}
		conn = tc
	}
	var f [wire.ControlFrameSize]byte
	wire.PutReplicationRequestFrame(f[:], wire.ReplicationRequest{Stream: c.cfg.Stream, From: from, Flags: wire.ReplayExt})
	if _, err := conn.Write(f[:]); err != nil {
		raw.Close()
		return nil, nil, fmt.Errorf("replay: send request to %s: %w", ep, err)
	}
	_ = raw.SetDeadline(time.Time{})
	return conn, raw, nil
}

// timeoutReader arms the read deadline before every read that reaches the
// socket (bufio refills), so silence past the current timeout fails.
type timeoutReader struct {
	c   net.Conn
	raw net.Conn
	d   time.Duration
}

func (r *timeoutReader) Read(p []byte) (int, error) {
	_ = r.raw.SetReadDeadline(time.Now().Add(r.d))
	return r.c.Read(p)
}

// session reads frames until the connection ends. Every frame's version,
// length and CRC are checked before anything in it is used; a bad frame
// drops the connection, and the next one resumes at tip+1 (the last good
// record).
func (c *Client) session(ctx context.Context, conn, raw net.Conn, ep string, h Handler, goal *catchGoal) (progressed bool, err error) {
	defer raw.Close()
	stop := context.AfterFunc(ctx, func() { raw.Close() })
	defer stop()
	tr := &timeoutReader{c: conn, raw: raw, d: c.cfg.ReadTimeout}
	br := bufio.NewReaderSize(tr, c.cfg.BufferBytes)
	buf := c.buf
	first, caughtUp := true, false
	for {
		if _, err := io.ReadFull(br, buf[:wire.HeaderSize]); err != nil {
			if errors.Is(err, io.EOF) && ctx.Err() == nil {
				if first {
					// Closed without answering (e.g. a TLS server fed plaintext).
					return progressed, fmt.Errorf("%w: %s closed before answering the request", ErrProtocol, ep)
				}
				return progressed, nil // clean end of stream between frames
			}
			return progressed, c.readErr(ctx, err)
		}
		hd, err := wire.ParseHeader(buf)
		if err != nil {
			c.badFrames.Add(1)
			return progressed, fmt.Errorf("replay: frame after seq %d from %s: %w", c.tip.Load(), ep, err)
		}
		n := wire.HeaderSize + int(hd.Len)
		if _, err := io.ReadFull(br, buf[wire.HeaderSize:n]); err != nil {
			return progressed, c.readErr(ctx, err)
		}
		_, payload, _, err := wire.DecodeFrame(buf[:n])
		if err != nil {
			c.badFrames.Add(1)
			return progressed, fmt.Errorf("replay: frame after seq %d from %s: %w", c.tip.Load(), ep, err)
		}
		c.bytes.Add(uint64(n))
		switch hd.Type {
		case wire.TypeNotAvailable:
			na, err := wire.ParseNotAvailable(payload)
			if err != nil {
				c.badFrames.Add(1)
				return progressed, fmt.Errorf("replay: NotAvailable from %s: %w", ep, err)
			}
			if na.Damaged != 0 {
				// Every record before the damaged seq was sent (and
				// handled above); the endpoint cannot serve that seq.
				c.damaged.Add(1)
				c.event(Event{Kind: EventNotAvailable, Endpoint: ep, NotAvailable: na})
				return progressed, fmt.Errorf("%w: %s cannot serve stream %d at seq %d (its log is damaged there; tip %d)", ErrDamaged, ep, na.Stream, na.Damaged, c.tip.Load())
			}
			if !first {
				return progressed, fmt.Errorf("%w: NotAvailable mid-stream from %s", ErrProtocol, ep)
			}
			c.notAvail.Add(1)
			c.event(Event{Kind: EventNotAvailable, Endpoint: ep, NotAvailable: na})
			return progressed, fmt.Errorf("%w: %s holds %d..%d, asked from %d", ErrNotAvailable, ep, na.Oldest, na.Highest, na.Requested)
		case wire.TypeCaughtUp:
			cu, err := wire.ParseCaughtUp(payload)
			if err != nil {
				c.badFrames.Add(1)
				return progressed, fmt.Errorf("replay: CaughtUp from %s: %w", ep, err)
			}
			if !caughtUp {
				caughtUp, progressed = true, true
				tr.d = c.cfg.IdleTimeout
				c.event(Event{Kind: EventCaughtUp, Endpoint: ep, CaughtUp: cu})
				if goal != nil {
					if c.tip.Load() >= goal.target {
						return progressed, errCaughtUp
					}
					goal.caughtAt = time.Now()
				}
			}
			if goal != nil && !goal.caughtAt.IsZero() && time.Since(goal.caughtAt) >= goal.grace {
				return progressed, errCaughtUp
			}
		case wire.TypeNak, wire.TypeHeartbeat, wire.TypeReplicationRequest:
			return progressed, fmt.Errorf("%w: control record %#x on the replay stream from %s", ErrProtocol, hd.Type, ep)
		default:
			seq := wire.Seq(payload)
			tip := c.tip.Load()
			switch {
			case seq == 0:
				c.badFrames.Add(1)
				return progressed, fmt.Errorf("%w: data record without a seq from %s", ErrProtocol, ep)
			case seq <= tip:
				c.dups.Add(1)
			case seq != tip+1 && !skipFrom(hd, payload, tip+1):
				return progressed, fmt.Errorf("%w: expected %d, got %d from %s", ErrGap, tip+1, seq, ep)
			default:
				herr := h(hd, payload)
				if herr != nil && !errors.Is(herr, ErrStop) {
					return progressed, &handlerError{herr}
				}
				c.tip.Store(seq)
				c.records.Add(1)
				progressed = true
				if herr != nil {
					return progressed, herr
				}
				if goal != nil && goal.target > 0 {
					if seq >= goal.target || (!goal.caughtAt.IsZero() && seq&1023 == 0 && time.Since(goal.caughtAt) >= goal.grace) {
						return progressed, errCaughtUp
					}
				}
			}
		}
		first = false
	}
}

// skipFrom reports whether a record is a Skip marker that stands for the
// seqs from next on: the stream continues at its seq.
func skipFrom(h wire.Header, payload []byte, next uint64) bool {
	if h.Type != wire.TypeSkip {
		return false
	}
	sk, err := wire.ParseSkip(payload)
	return err == nil && sk.From <= next
}

func (c *Client) readErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.timeouts.Add(1)
		return fmt.Errorf("%w: %w", ErrIdle, err)
	}
	return fmt.Errorf("replay: read: %w", err)
}
