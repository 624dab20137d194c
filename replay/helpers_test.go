package replay

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/walcast/walcast/wire"
)

// memSource is an in-memory stream: Append adds records that are not yet
// durable, Flush makes them durable and wakes waiters, like a WAL writer.
type memSource struct {
	stream uint32
	size   int // payload bytes per record

	mu      sync.Mutex
	first   uint64   // seq of frames[0]
	frames  [][]byte // frames[i] holds seq first+i
	durable uint64
	wake    chan struct{}
	opens   int
}

func newMemSource(stream uint32, first uint64, payload int) *memSource {
	return &memSource{stream: stream, size: payload, first: first, durable: first - 1, wake: make(chan struct{})}
}

func dataFrame(seq uint64, payload int) []byte {
	f := make([]byte, wire.HeaderSize+payload)
	binary.LittleEndian.PutUint64(f[wire.HeaderSize:], seq)
	for i := wire.HeaderSize + 8; i < len(f); i++ {
		f[i] = byte(seq) + byte(i)
	}
	_ = wire.Seal(f, 100)
	return f
}

// Append adds n records (not durable until Flush) and returns the last seq.
func (m *memSource) Append(n int) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	for range n {
		seq := m.first + uint64(len(m.frames))
		m.frames = append(m.frames, dataFrame(seq, m.size))
	}
	return m.first + uint64(len(m.frames)) - 1
}

func (m *memSource) Flush() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.durable = m.first + uint64(len(m.frames)) - 1
	close(m.wake)
	m.wake = make(chan struct{})
}

func (m *memSource) AppendFlush(n int) uint64 { last := m.Append(n); m.Flush(); return last }

func (m *memSource) Stream() uint32 { return m.stream }

func (m *memSource) Bounds() (uint64, uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.durable < m.first {
		return 0, 0
	}
	return m.first, m.durable
}

func (m *memSource) Open(from uint64) (Cursor, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.opens++
	return &memCursor{m: m, next: max(from, m.first)}, nil
}

func (m *memSource) WaitDurable(ctx context.Context, after uint64) (uint64, error) {
	for {
		m.mu.Lock()
		d, ch := m.durable, m.wake
		m.mu.Unlock()
		if d > after {
			return d, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

type memCursor struct {
	m    *memSource
	next uint64
}

// Next returns records whether durable or not, like a reader of files a
// writer is still syncing: the server must hold back the non-durable ones.
func (c *memCursor) Next() ([]byte, error) {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	i := c.next - c.m.first
	if i >= uint64(len(c.m.frames)) {
		return nil, io.EOF
	}
	c.next++
	return c.m.frames[i], nil
}

func (c *memCursor) Close() error { return nil }

var (
	pkiOnce sync.Once
	pki     *DevPKI
	pkiErr  error
)

func testPKI(t testing.TB) *DevPKI {
	pkiOnce.Do(func() { pki, pkiErr = NewDevPKI(nil, time.Hour) })
	if pkiErr != nil {
		t.Fatal(pkiErr)
	}
	return pki
}

func serverTLS(t testing.TB) *tls.Config {
	c, err := testPKI(t).ServerTLS(true)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func clientTLS(t testing.TB) *tls.Config {
	c, err := testPKI(t).ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// startServer serves srcs over TLS on a loopback port and returns its
// address; the server is closed at cleanup.
func startServer(t testing.TB, mod func(*ServerConfig), srcs ...Source) (*Server, string) {
	t.Helper()
	cfg := DefaultServerConfig()
	cfg.TLS = serverTLS(t)
	if mod != nil {
		mod(&cfg)
	}
	s, err := NewServer(cfg, srcs...)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; err != ErrServerClosed {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return s, ln.Addr().String()
}

func testClientConfig(t testing.TB, endpoints ...string) ClientConfig {
	cfg := DefaultClientConfig()
	cfg.Endpoints = endpoints
	cfg.Stream = 1
	cfg.TLS = clientTLS(t)
	cfg.Backoff = []time.Duration{10 * time.Millisecond}
	cfg.RetryBudget = 3
	return cfg
}

// collector records delivered seqs and checks each payload's bytes.
type collector struct {
	t    testing.TB
	mu   sync.Mutex
	seqs []uint64
	note chan struct{}
}

func newCollector(t testing.TB) *collector { return &collector{t: t, note: make(chan struct{}, 1)} }

func (c *collector) handle(h wire.Header, p []byte) error {
	seq := wire.Seq(p)
	want := dataFrame(seq, len(p))
	if string(want[wire.HeaderSize:]) != string(p) || h.Type != 100 {
		c.t.Errorf("record %d: payload or type differs from what was written", seq)
	}
	c.mu.Lock()
	c.seqs = append(c.seqs, seq)
	c.mu.Unlock()
	select {
	case c.note <- struct{}{}:
	default:
	}
	return nil
}

func (c *collector) snapshot() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]uint64(nil), c.seqs...)
}

// waitFor waits until the last delivered seq is ≥ seq.
func (c *collector) waitFor(t testing.TB, seq uint64, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		c.mu.Lock()
		n, last := len(c.seqs), uint64(0)
		if n > 0 {
			last = c.seqs[n-1]
		}
		c.mu.Unlock()
		if n > 0 && last >= seq {
			return
		}
		select {
		case <-c.note:
		case <-deadline:
			t.Fatalf("timed out waiting for seq %d; have %d records (last %d)", seq, n, last)
		}
	}
}

func lastOf(s []uint64) any {
	if len(s) == 0 {
		return "none"
	}
	return s[len(s)-1]
}

// checkRange fails unless got is exactly from..to, each once, in order.
func checkRange(t testing.TB, got []uint64, from, to uint64) {
	t.Helper()
	if uint64(len(got)) != to-from+1 {
		t.Fatalf("got %d records, want %d (%d..%d); first %v last %v", len(got), to-from+1, from, to, firstOf(got), lastOf(got))
	}
	for i, s := range got {
		if s != from+uint64(i) {
			t.Fatalf("record %d is seq %d, want %d", i, s, from+uint64(i))
		}
	}
}

func firstOf(s []uint64) any {
	if len(s) == 0 {
		return "none"
	}
	return s[0]
}
