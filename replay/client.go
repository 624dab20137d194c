package replay

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walcast/walcast/wire"
)

// Handler receives one data record: its header and payload (the payload's
// first 8 bytes are its seq). payload is owned by the client and valid
// only during the call. Records arrive in seq order, each once per Client
// (records at or below the tip are skipped). A nil return applies the
// record (the tip moves to its seq). ErrStop also applies it and then
// ends Run cleanly. Any other error leaves the tip before the record and
// ends Run (or CatchUp, RunOnce) with that error, without retrying.
type Handler func(h wire.Header, payload []byte) error

// ClientConfig configures a [Client]. A zero field means its default
// (DefaultClientConfig shows them); Endpoints and TLS (or Plaintext) must
// be set.
type ClientConfig struct {
	// Endpoints are host:port addresses tried in order on every
	// (re)connect: newest source first (the producer), then archives.
	Endpoints []string
	// Stream is the stream id requested.
	Stream uint32
	// TLS is the client's TLS config (RootCAs = the CA to trust). Its
	// ServerName, when empty, is set per endpoint to the endpoint's host.
	// Required unless Plaintext.
	TLS *tls.Config
	// Plaintext connects without TLS; must be asked for explicitly.
	Plaintext bool
	// TipPath is the tip file. Empty: the tip lives in memory only,
	// starting at StartTip.
	TipPath string
	// StartTip is the tip when TipPath is empty (0: start at seq 1).
	StartTip uint64
	// TipInterval is the longest a delivered record waits before the tip
	// file records it (the reference persists every 10 ms). The tip is
	// also written when a connection ends.
	TipInterval time.Duration
	// ConnectTimeout bounds TCP connect + TLS handshake + sending the
	// request.
	ConnectTimeout time.Duration
	// ReadTimeout is the longest silence tolerated before CaughtUp (while
	// the history streams).
	ReadTimeout time.Duration
	// IdleTimeout is the longest silence tolerated after CaughtUp. The
	// server repeats CaughtUp every KeepaliveInterval (1 s) when idle, so
	// this catches a stalled or vanished server.
	IdleTimeout time.Duration
	// KeepAlive is the TCP keepalive idle time and probe interval
	// (3 probes); negative disables.
	KeepAlive time.Duration
	// Backoff is the delay before retry n (n-1 consecutive errors
	// before), the last entry repeating; each is scaled by a uniform
	// factor in [1−Jitter, 1+Jitter) (default 1/2/4/8/30 s ±20 %;
	// negative Jitter: none).
	Backoff []time.Duration
	Jitter  float64
	// RetryBudget: Run gives up with ErrBlocked after more than this many
	// consecutive failed connections (a connection that delivered a
	// record or a CaughtUp resets the count). Default 20; negative: no
	// retry.
	RetryBudget int
	// BufferBytes is the read buffer per connection, in bytes.
	BufferBytes int
	// OnEvent, when set, is called for connection-level events from the
	// goroutine running the client. It must not block.
	OnEvent func(Event)
}

// DefaultClientConfig returns TLS required, 10 ms tip interval, 5 s
// connect, 10 s read and 5 s idle timeouts, 15 s keepalive, backoff
// 1/2/4/8/30 s ±20 %, a budget of 20 retries, and a 256 KiB read buffer.
func DefaultClientConfig() ClientConfig {
	return ClientConfig{
		TipInterval:    10 * time.Millisecond,
		ConnectTimeout: 5 * time.Second,
		ReadTimeout:    10 * time.Second,
		IdleTimeout:    5 * time.Second,
		KeepAlive:      15 * time.Second,
		Backoff:        []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 30 * time.Second},
		Jitter:         0.2,
		RetryBudget:    20,
		BufferBytes:    256 << 10,
	}
}

// Validate reports a configuration the client cannot run with.
func (c ClientConfig) Validate() error {
	c = c.withDefaults()
	switch {
	case len(c.Endpoints) == 0:
		return fmt.Errorf("%w: no endpoints", ErrConfig)
	case c.Plaintext && c.TLS != nil:
		return fmt.Errorf("%w: Plaintext with a TLS config", ErrConfig)
	case !c.Plaintext && (c.TLS == nil || (c.TLS.RootCAs == nil && !c.TLS.InsecureSkipVerify)):
		return fmt.Errorf("%w: client needs a TLS config with the CA to trust (or Plaintext explicitly)", ErrConfig)
	case c.TipInterval <= 0 || c.ConnectTimeout <= 0 || c.ReadTimeout <= 0 || c.IdleTimeout <= 0:
		return fmt.Errorf("%w: client intervals and timeouts must be positive", ErrConfig)
	case len(c.Backoff) == 0:
		return fmt.Errorf("%w: empty backoff schedule", ErrConfig)
	case c.Jitter < 0 || c.Jitter >= 1:
		return fmt.Errorf("%w: jitter %v outside [0,1)", ErrConfig, c.Jitter)
	case c.RetryBudget < 0:
		return fmt.Errorf("%w: RetryBudget < 0", ErrConfig)
	case c.BufferBytes < 4096:
		return fmt.Errorf("%w: BufferBytes %d < 4096", ErrConfig, c.BufferBytes)
	}
	return nil
}

// EventKind names a client event.
type EventKind uint8

// Client events.
const (
	EventConnected     EventKind = iota + 1 // TLS up, request sent
	EventNotAvailable                       // endpoint answered NotAvailable; NotAvailable is set
	EventCaughtUp                           // first CaughtUp of a connection; CaughtUp is set
	EventDisconnected                       // connection ended; Err says why (nil: clean EOF)
	EventConnectFailed                      // dial or handshake failed; Err says why
	EventBackoff                            // sleeping Delay before the next pass; Err is the cause
)

func (k EventKind) String() string {
	switch k {
	case EventConnected:
		return "connected"
	case EventNotAvailable:
		return "not-available"
	case EventCaughtUp:
		return "caught-up"
	case EventDisconnected:
		return "disconnected"
	case EventConnectFailed:
		return "connect-failed"
	case EventBackoff:
		return "backoff"
	}
	return "unknown"
}

// Event is one client event.
type Event struct {
	Kind         EventKind
	Endpoint     string
	Tip          uint64 // the client's tip when the event happened
	Err          error
	Delay        time.Duration
	CaughtUp     wire.CaughtUp
	NotAvailable wire.NotAvailable
}

// ClientStats are cumulative counters of a [Client].
type ClientStats struct {
	Connects       uint64 // connections established (TLS up, request sent)
	ConnectFailed  uint64 // dial or handshake failures
	NotAvailable   uint64 // NotAvailable answers
	Records        uint64 // data records delivered to the handler
	Bytes          uint64 // frame bytes read
	Duplicates     uint64 // records at or below the tip, skipped
	BadFrames      uint64 // frames failing version, length or CRC checks
	Timeouts       uint64 // read or idle timeouts
	Retries        uint64 // backoff sleeps
	TipWrites      uint64 // tip file writes
	TipWriteErrors uint64 // failed tip file writes
	Damaged        uint64 // connections an endpoint ended at damage in its log
}

// Client follows one stream from a set of endpoints. Its methods must not
// be called concurrently with each other, except Tip and Stats.
type Client struct {
	cfg ClientConfig

	tip       atomic.Uint64 // last seq delivered
	persisted atomic.Uint64 // last tip written to the file
	persistMu sync.Mutex

	connects, connFailed, notAvail, records, bytes, dups, badFrames, timeouts, retries, tipWrites, tipErrs, damaged atomic.Uint64

	buf []byte // frame buffer: header + largest payload
}

// NewClient returns a client positioned after its tip: the tip file's
// value (missing/empty/garbled = 0) or cfg.StartTip without a file.
func NewClient(cfg ClientConfig) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c := &Client{cfg: cfg, buf: make([]byte, wire.HeaderSize+wire.MaxPayload)}
	tip := cfg.StartTip
	if cfg.TipPath != "" {
		t, err := ReadTip(cfg.TipPath)
		if err != nil {
			return nil, err
		}
		tip = t
	}
	c.tip.Store(tip)
	c.persisted.Store(tip)
	return c, nil
}

// Tip returns the last seq delivered to the handler (or loaded at start).
func (c *Client) Tip() uint64 { return c.tip.Load() }

// SetTip moves the tip, for a consumer that also delivers records by
// another path (UDP): the next request asks for tip+1. It does not write
// the tip file; call PersistTip for that.
func (c *Client) SetTip(tip uint64) { c.tip.Store(tip) }

// PersistTip writes the current tip to the tip file now if it changed
// since the last write. A no-op without a TipPath.
func (c *Client) PersistTip() error {
	if c.cfg.TipPath == "" {
		return nil
	}
	c.persistMu.Lock()
	defer c.persistMu.Unlock()
	t := c.tip.Load()
	if t == c.persisted.Load() {
		return nil
	}
	if err := WriteTip(c.cfg.TipPath, t); err != nil {
		c.tipErrs.Add(1)
		return err
	}
	c.tipWrites.Add(1)
	c.persisted.Store(t)
	return nil
}

// Stats returns a snapshot of the counters.
func (c *Client) Stats() ClientStats {
	return ClientStats{
		Connects: c.connects.Load(), ConnectFailed: c.connFailed.Load(), NotAvailable: c.notAvail.Load(),
		Records: c.records.Load(), Bytes: c.bytes.Load(), Duplicates: c.dups.Load(), BadFrames: c.badFrames.Load(),
		Timeouts: c.timeouts.Load(), Retries: c.retries.Load(), TipWrites: c.tipWrites.Load(), TipWriteErrors: c.tipErrs.Load(),
		Damaged: c.damaged.Load(),
	}
}

func (c *Client) event(e Event) {
	if c.cfg.OnEvent != nil {
		e.Tip = c.tip.Load()
		c.cfg.OnEvent(e)
	}
}

// handlerError carries a Handler's own error out of the retry loop.
type handlerError struct{ err error }

func (e *handlerError) Error() string { return "replay: handler: " + e.err.Error() }
func (e *handlerError) Unwrap() error { return e.err }

func isHandlerError(err error) bool {
	var he *handlerError
	return errors.As(err, &he)
}

// errCaughtUp ends a pass at the first CaughtUp (CatchUp mode).
var errCaughtUp = errors.New("replay: caught up")

// Run follows the stream until ctx is done (returns ctx's error), the
// handler returns ErrStop (returns nil), or the retry budget is spent
// (returns an error wrapping ErrBlocked and the last failure). A clean
// end of stream reconnects at once; a failure backs off.
func (c *Client) Run(ctx context.Context, h Handler) error {
	return c.loop(ctx, h, nil)
}

// CatchUp streams from tip+1 until the server's first CaughtUp, retrying
// with backoff like Run, and returns the tip then: every record up to the
// durable end of the source when the server answered has been delivered.
func (c *Client) CatchUp(ctx context.Context, h Handler) (uint64, error) {
	err := c.loop(ctx, h, &catchGoal{})
	return c.tip.Load(), err
}

// CatchUpTo is CatchUp that keeps following the live tail past CaughtUp
// until the tip reaches target, for at most grace after the first
// CaughtUp (records the source has not made durable yet arrive within a
// flush interval; a target that never becomes durable ends at grace).
// It returns early once the tip reaches target, even before CaughtUp.
func (c *Client) CatchUpTo(ctx context.Context, target uint64, grace time.Duration, h Handler) (uint64, error) {
	err := c.loop(ctx, h, &catchGoal{target: target, grace: grace})
	return c.tip.Load(), err
}

// catchGoal says when a catch-up pass ends: at the first CaughtUp once
// the tip is ≥ target, when the tip reaches target (target > 0), or grace
// after the first CaughtUp.
type catchGoal struct {
	target   uint64
	grace    time.Duration
	caughtAt time.Time
}

// CatchUpOnce is CatchUp without retries: one pass over the endpoints,
// ending at the first CaughtUp (nil error) or with the pass's failure.
func (c *Client) CatchUpOnce(ctx context.Context, h Handler) (uint64, error) {
	stop := c.StartPersister()
	defer stop()
	_, err := c.pass(ctx, h, &catchGoal{})
	if errors.Is(err, errCaughtUp) {
		err = nil
	}
	return c.tip.Load(), err
}

// RunOnce makes one pass over the endpoints without retrying: it returns
// nil on a clean end of stream, ErrStop from the handler as is, and the
// failure otherwise (ErrAllEndpoints when no endpoint could serve).
func (c *Client) RunOnce(ctx context.Context, h Handler) error {
	stop := c.StartPersister()
	defer stop()
	_, err := c.pass(ctx, h, nil)
	return err
}

func (c *Client) loop(ctx context.Context, h Handler, goal *catchGoal) error {
	stop := c.StartPersister()
	defer stop()
	fails := 0
	for {
		progressed, err := c.pass(ctx, h, goal)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, ErrStop):
			return nil
		case errors.Is(err, errCaughtUp):
			return nil
		case isHandlerError(err):
			return err
		case errors.Is(err, ErrDamaged):
			return err // waiting does not repair a log: no retry, no spin
		case err == nil:
			fails = 0
			continue
		}
		if progressed {
			fails = 0
		}
		fails++
		if fails > c.cfg.RetryBudget {
			return fmt.Errorf("%w after %d consecutive failures: %w", ErrBlocked, fails, err)
		}
		d := c.backoff(fails)
		c.retries.Add(1)
		c.event(Event{Kind: EventBackoff, Delay: d, Err: err})
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// backoff is the delay before retry n (1-based): Backoff[n-1] capped at
// the last entry, times a uniform jitter in [1−J, 1+J).
func (c *Client) backoff(n int) time.Duration {
	b := c.cfg.Backoff[min(n-1, len(c.cfg.Backoff)-1)]
	f := 1 - c.cfg.Jitter + 2*c.cfg.Jitter*rand.Float64()
	return time.Duration(float64(b) * f)
}

// StartPersister writes the tip file at most every TipInterval, off the
// delivery path (a file write plus two fsyncs take milliseconds), until
// the returned stop is called; stop writes the final tip synchronously.
// Run and the catch-ups start one for their passes; a consumer that also
// moves the tip with SetTip (records it got over UDP) starts one for its
// whole life. A no-op without a TipPath.
func (c *Client) StartPersister() (stop func()) {
	if c.cfg.TipPath == "" {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(c.cfg.TipInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = c.PersistTip()
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
		_ = c.PersistTip()
	}
}

// pass tries the endpoints in order with the same from_seq = tip+1. Only
// a failure to connect (dial, TLS handshake, request) or a NotAvailable
// answer moves on to the next endpoint; a connection that was served
// ends the pass with its result. progressed reports that some connection
// delivered a record or a CaughtUp.
func (c *Client) pass(ctx context.Context, h Handler, goal *catchGoal) (progressed bool, err error) {
	var lastErr error
	for _, ep := range c.cfg.Endpoints {
		if ctx.Err() != nil {
			return progressed, ctx.Err()
		}
		conn, raw, err := c.connect(ctx, ep)
		if err != nil {
			c.connFailed.Add(1)
			c.event(Event{Kind: EventConnectFailed, Endpoint: ep, Err: err})
			lastErr = err
			continue
		}
		c.connects.Add(1)
		c.event(Event{Kind: EventConnected, Endpoint: ep})
		p, err := c.session(ctx, conn, raw, ep, h, goal)
		progressed = progressed || p
		if errors.Is(err, ErrNotAvailable) || errors.Is(err, ErrDamaged) {
			// Another endpoint (an archive) may hold the seqs this one
			// cannot serve; ask it from the same tip.
			lastErr = err
			if errors.Is(err, ErrDamaged) {
				c.event(Event{Kind: EventDisconnected, Endpoint: ep, Err: err})
				_ = c.PersistTip()
			}
			continue
		}
		// CaughtUp mode ends the connection by design; do not report it
		// as a disconnect.
		if !errors.Is(err, errCaughtUp) {
			c.event(Event{Kind: EventDisconnected, Endpoint: ep, Err: err})
		}
		_ = c.PersistTip()
		return progressed, err
	}
	if lastErr == nil {
		lastErr = errors.New("not connected")
	}
	return progressed, fmt.Errorf("%w (%d endpoints): %w", ErrAllEndpoints, len(c.cfg.Endpoints), lastErr)
}
