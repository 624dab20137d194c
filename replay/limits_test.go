package replay

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/walcast/walcast/wire"
)

// TestServerMutualTLSByDefault: a server whose TLS config does not verify
// client certificates is refused unless AnyClient says so explicitly, and
// AnyClient then serves a client without a certificate.
func TestServerMutualTLSByDefault(t *testing.T) {
	src := newMemSource(1, 1, 64)
	src.AppendFlush(5)
	anyTLS, _ := testPKI(t).ServerTLS(false)
	for _, tc := range []struct {
		name string
		mod  func(*ServerConfig)
		ok   bool
	}{
		{"no client verification", func(c *ServerConfig) { c.TLS = anyTLS }, false},
		{"client certificate requested but not verified", func(c *ServerConfig) {
			c.TLS = anyTLS.Clone()
			c.TLS.ClientAuth = tls.RequestClientCert
		}, false},
		{"mutual TLS", func(c *ServerConfig) { c.TLS, _ = testPKI(t).ServerTLS(true) }, true},
		{"AnyClient opts out", func(c *ServerConfig) { c.TLS, c.AnyClient = anyTLS, true }, true},
		{"AnyClient with Plaintext", func(c *ServerConfig) { c.Plaintext, c.AnyClient = true, true }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultServerConfig()
			tc.mod(&c)
			_, err := NewServer(c, src)
			if tc.ok != (err == nil) || err != nil && !errors.Is(err, ErrConfig) {
				t.Fatalf("NewServer: %v, want ok=%v", err, tc.ok)
			}
		})
	}
	t.Run("AnyClient serves a client without a certificate", func(t *testing.T) {
		_, addr := startServer(t, func(c *ServerConfig) { c.TLS, c.AnyClient = anyTLS, true }, src)
		cfg := testClientConfig(t, addr)
		cfg.TLS = clientTLS(t).Clone()
		cfg.TLS.Certificates = nil
		cl, _ := NewClient(cfg)
		if tip, err := cl.CatchUp(t.Context(), newCollector(t).handle); err != nil || tip != 5 {
			t.Fatalf("tip %d, %v", tip, err)
		}
	})
}

// rawRequest dials addr over TLS with the dev client certificate, sends a
// ReplicationRequest from seq from and returns the connection.
func rawRequest(t *testing.T, addr string, from uint64) *tls.Conn {
	t.Helper()
	c, err := tls.Dial("tcp", addr, clientTLS(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var req [wire.ControlFrameSize]byte
	wire.PutReplicationRequestFrame(req[:], wire.ReplicationRequest{From: from, Stream: 1})
	if _, err := c.Write(req[:]); err != nil {
		t.Fatal(err)
	}
	return c
}

// readFrame reads one frame from c.
func readFrame(t *testing.T, c net.Conn) (wire.Header, []byte) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	var b [wire.HeaderSize + wire.MaxPayload]byte
	if _, err := io.ReadFull(c, b[:wire.HeaderSize]); err != nil {
		t.Fatal(err)
	}
	h, err := wire.ParseHeader(b[:])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, b[wire.HeaderSize:wire.HeaderSize+int(h.Len)]); err != nil {
		t.Fatal(err)
	}
	return h, b[wire.HeaderSize : wire.HeaderSize+int(h.Len)]
}

// TestCaughtUpBeyondTip: a request beyond the tip gets CaughtUp with
// live_seq = the tip, a seq that exists, not from−1;
// within the stream, live_seq stays the last seq sent.
func TestCaughtUpBeyondTip(t *testing.T) {
	src := newMemSource(1, 1, 64)
	src.AppendFlush(100)
	_, addr := startServer(t, nil, src)
	for _, tc := range []struct {
		from, live uint64
		records    int
	}{
		{from: 500, live: 100},
		{from: 101, live: 100},
		{from: 90, live: 100, records: 11},
	} {
		c := rawRequest(t, addr, tc.from)
		for i := 0; i < tc.records; i++ {
			if h, p := readFrame(t, c); h.Type == wire.TypeCaughtUp || wire.Seq(p) != tc.from+uint64(i) {
				t.Fatalf("from %d: frame %d is type %d seq %d", tc.from, i, h.Type, wire.Seq(p))
			}
		}
		h, p := readFrame(t, c)
		if h.Type != wire.TypeCaughtUp {
			t.Fatalf("from %d: type %d, want CaughtUp", tc.from, h.Type)
		}
		if cu, err := wire.ParseCaughtUp(p); err != nil || cu.LiveSeq != tc.live {
			t.Fatalf("from %d: CaughtUp %+v (%v), want live_seq %d", tc.from, cu, err, tc.live)
		}
	}
}

// TestSlowReadersMemoryReturned: connections that request a large history
// and never read hold at most their two buffers each, and every byte is
// given back when they close (not left to the garbage collector).
func TestSlowReadersMemoryReturned(t *testing.T) {
	const conns = 40
	dir := t.TempDir()
	w := openWAL(t, dir, 0)
	appendN(t, w, 4000, 1024) // 4 MB: more than a connection's buffers and socket take
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	srv, addr := startServer(t, nil, NewWriterSource(w, dir, 1))
	cfg := DefaultServerConfig()
	per := int64(cfg.BufferBytes + cfg.ReadBufferBytes)
	var cs []*tls.Conn
	for i := 0; i < conns; i++ {
		cs = append(cs, rawRequest(t, addr, 1))
	}
	// Each holds its two buffers once its request is read; never more.
	waitFor(t, func() bool { return srv.Stats().BufferBytes == conns*per })
	time.Sleep(100 * time.Millisecond) // the server keeps writing what the sockets take
	if st := srv.Stats(); st.BufferBytes != conns*per || st.Active != conns {
		t.Fatalf("%d connections hold %d buffer bytes, want %d", st.Active, st.BufferBytes, conns*per)
	}
	for _, c := range cs {
		c.Close()
	}
	waitFor(t, func() bool { return srv.Stats().Active == 0 })
	if b := srv.Stats().BufferBytes; b != 0 {
		t.Fatalf("%d buffer bytes held after every connection closed", b)
	}
}

// TestMaxConns: connections beyond MaxConns are closed at once and
// counted; a slot freed by a departed client is usable again.
func TestMaxConns(t *testing.T) {
	src := newMemSource(1, 1, 64)
	src.AppendFlush(10)
	srv, addr := startServer(t, func(c *ServerConfig) { c.MaxConns = 2 }, src)
	a, b := rawRequest(t, addr, 1), rawRequest(t, addr, 1)
	readFrame(t, a)
	readFrame(t, b)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("third connection was served")
	}
	waitFor(t, func() bool { return srv.Stats().Refused == 1 })
	a.Close()
	waitFor(t, func() bool { return srv.Stats().Active == 1 })
	d := rawRequest(t, addr, 1)
	if h, p := readFrame(t, d); h.Type == wire.TypeCaughtUp || wire.Seq(p) != 1 {
		t.Fatalf("after a slot freed: type %d seq %d", h.Type, wire.Seq(p))
	}
}

// waitFor polls cond for up to a minute (a loaded machine is slow, never
// wrong).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(time.Minute); !cond(); {
		if time.Now().After(end) {
			t.Fatal("condition not reached within a minute")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
