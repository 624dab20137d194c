package replay

import (
	"context"
	"crypto/tls"
	"errors"
	"testing"
	"time"

	"github.com/walcast/walcast/wire"
)

// TLS is on by default: a plaintext client, a client that does not trust
// the server's CA, and a TLS client against a plaintext server all fail
// and get no record.
func TestTLSRefusals(t *testing.T) {
	src := newMemSource(1, 1, 64)
	src.AppendFlush(10)
	tlsSrv, tlsAddr := startServer(t, nil, src)
	_, plainAddr := startServer(t, func(c *ServerConfig) { c.TLS = nil; c.Plaintext = true }, src)
	other, err := NewDevPKI(nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	otherTLS, _ := other.ClientTLS()

	cases := []struct {
		name string
		addr string
		mod  func(*ClientConfig)
	}{
		{"plaintext client, TLS server", tlsAddr, func(c *ClientConfig) { c.TLS = nil; c.Plaintext = true }},
		{"untrusted CA", tlsAddr, func(c *ClientConfig) { c.TLS = otherTLS }},
		{"wrong server name", tlsAddr, func(c *ClientConfig) { c.TLS = clientTLS(t).Clone(); c.TLS.ServerName = "elsewhere.example" }},
		{"TLS client, plaintext server", plainAddr, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testClientConfig(t, tc.addr)
			cfg.ConnectTimeout = 2 * time.Second
			cfg.ReadTimeout = 2 * time.Second
			if tc.mod != nil {
				tc.mod(&cfg)
			}
			cl, err := NewClient(cfg)
			if err != nil {
				t.Fatal(err)
			}
			err = cl.RunOnce(context.Background(), func(wire.Header, []byte) error {
				t.Error("record delivered")
				return nil
			})
			if err == nil {
				t.Fatal("RunOnce succeeded")
			}
			t.Logf("refused: %v", err)
		})
	}
	deadline := time.Now().Add(5 * time.Second)
	for tlsSrv.Stats().HandshakeFailed < 4 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := tlsSrv.Stats().HandshakeFailed; n < 3 {
		t.Errorf("TLS server counted %d failed handshakes, want ≥ 3", n)
	}
	if tlsSrv.Stats().Records != 0 {
		t.Error("TLS server sent records to a refused client")
	}
	// Configurations that cannot work are refused at construction.
	if _, err := NewServer(DefaultServerConfig(), src); !errors.Is(err, ErrConfig) {
		t.Errorf("server without TLS: %v", err)
	}
	c := DefaultClientConfig()
	c.Endpoints = []string{tlsAddr}
	if _, err := NewClient(c); !errors.Is(err, ErrConfig) {
		t.Errorf("client without CA: %v", err)
	}
	c.TLS = &tls.Config{}
	if _, err := NewClient(c); !errors.Is(err, ErrConfig) {
		t.Errorf("client with an empty TLS config: %v", err)
	}
}

// Mutual TLS: with a client CA configured, a client without a certificate
// is refused and one with the dev client certificate is served.
func TestMutualTLS(t *testing.T) {
	src := newMemSource(1, 1, 64)
	src.AppendFlush(5)
	_, addr := startServer(t, func(c *ServerConfig) { c.TLS, _ = testPKI(t).ServerTLS(true) }, src)

	cfg := testClientConfig(t, addr)
	cl, _ := NewClient(cfg)
	col := newCollector(t)
	if tip, err := cl.CatchUp(context.Background(), col.handle); err != nil || tip != 5 {
		t.Fatalf("with client cert: %d, %v", tip, err)
	}
	cfg.TLS = clientTLS(t).Clone()
	cfg.TLS.Certificates = nil
	cfg.RetryBudget = 0
	cl, _ = NewClient(cfg)
	if _, err := cl.CatchUp(context.Background(), col.handle); err == nil {
		t.Fatal("served a client without a certificate")
	}
}

// fakeServer accepts TLS connections and runs script on each with the
// connection's number (0-based) and the decoded request.
