// Package quic is the QUIC peer (github.com/quic-go/quic-go): one
// long-lived bidirectional stream carrying length-prefixed messages (the
// reliable comparison), and, as a second row, unreliable DATAGRAM frames
// (RFC 9221). TLS 1.3 with a self-signed certificate made in-process.
// quic-go runs its own goroutines, so Recv blocks on them (netpoll).
package quic

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"time"

	quicgo "github.com/quic-go/quic-go"
	"github.com/walcast/walcast/bench/peers"
	"github.com/walcast/walcast/bench/peers/internal/lossy"
)

// StreamPeer is QUIC with one bidirectional stream.
func StreamPeer() peers.Peer {
	return peers.Peer{Name: "quic-stream", Mode: "netpoll", Reliable: true, Lossy: true, Open: func(c peers.Config) (*peers.Pair, error) { return open(c, false) }}
}

// DatagramPeer is QUIC DATAGRAM frames: unreliable, never retransmitted.
func DatagramPeer() peers.Peer {
	return peers.Peer{Name: "quic-datagram", Mode: "netpoll", Lossy: true, Open: func(c peers.Config) (*peers.Pair, error) { return open(c, true) }}
}

const alpn = "walcast-bench"

func tlsConfigs() (server, client *tls.Config, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := x509.Certificate{
		SerialNumber: big.NewInt(1), DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, &tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	server = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, NextProtos: []string{alpn}}
	client = &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{alpn}}
	return server, client, nil
}

type streamConn struct {
	s   *quicgo.Stream
	out []byte
	hdr [4]byte
}

func (c *streamConn) Send(p []byte) error {
	c.out = binary.BigEndian.AppendUint32(c.out[:0], uint32(len(p)))
	c.out = append(c.out, p...)
	_, err := c.s.Write(c.out)
	return mapErr(err)
}

func (c *streamConn) Recv(p []byte) (int, error) {
	if _, err := io.ReadFull(c.s, c.hdr[:]); err != nil {
		return 0, mapErr(err)
	}
	n := int(binary.BigEndian.Uint32(c.hdr[:]))
	if n > len(p) {
		return 0, fmt.Errorf("quic: %d-byte message into %d: %w", n, len(p), peers.ErrCorrupt)
	}
	_, err := io.ReadFull(c.s, p[:n])
	return n, mapErr(err)
}

type dgramConn struct {
	c       *quicgo.Conn
	timeout time.Duration
}

func (c dgramConn) Send(p []byte) error { return mapErr(c.c.SendDatagram(p)) }

func (c dgramConn) Recv(p []byte) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	b, err := c.c.ReceiveDatagram(ctx)
	if err != nil {
		return 0, mapErr(err)
	}
	return copy(p, b), nil
}

func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return peers.ErrTimeout
	}
	return fmt.Errorf("quic: %v: %w", err, peers.ErrClosed)
}

type stats struct{ a, b *quicgo.Conn }

// Retransmits is the packets both ends declared lost (QUIC retransmits
// their frames in new packets).
func (s stats) Retransmits() int64 {
	return int64(s.a.ConnectionStats().PacketsLost + s.b.ConnectionStats().PacketsLost)
}

func open(cfg peers.Config, dgram bool) (*peers.Pair, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	stls, ctls, err := tlsConfigs()
	if err != nil {
		return nil, err
	}
	qc := &quicgo.Config{EnableDatagrams: true, MaxIdleTimeout: 30 * time.Second, KeepAlivePeriod: 5 * time.Second}
	// spc is B's socket (the server), cpc A's (the client).
	spc, err := cfg.ListenPacket(true)
	if err != nil {
		return nil, err
	}
	cpc, err := cfg.ListenPacket(false)
	if err != nil {
		spc.Close()
		return nil, err
	}
	var sc, cc net.PacketConn = spc, cpc
	if cfg.DropB > 0 {
		sc = lossy.Wrap(spc, cfg.DropB, cfg.Seed*31+7)
	}
	if cfg.DropA > 0 {
		cc = lossy.Wrap(cpc, cfg.DropA, cfg.Seed)
	}
	st, ct := &quicgo.Transport{Conn: sc}, &quicgo.Transport{Conn: cc}
	cleanup := func() { st.Close(); ct.Close(); spc.Close(); cpc.Close() }
	ln, err := st.Listen(stls, qc)
	if err != nil {
		cleanup()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := ct.Dial(ctx, spc.LocalAddr(), ctls, qc)
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("quic: dial: %w", err)
	}
	b, err := ln.Accept(ctx)
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("quic: accept: %w", err)
	}
	p := &peers.Pair{Stats: stats{a, b}}
	p.Close = func() error {
		a.CloseWithError(0, "done")
		b.CloseWithError(0, "done")
		ln.Close()
		cleanup()
		return nil
	}
	if dgram {
		p.A, p.B = dgramConn{a, cfg.RecvTimeout()}, dgramConn{b, cfg.RecvTimeout()}
		return p, nil
	}
	as, err := a.OpenStreamSync(ctx)
	if err != nil {
		p.Close()
		return nil, err
	}
	if _, err := as.Write([]byte{0, 0, 0, 0}); err != nil { // an empty message makes the stream visible to B
		p.Close()
		return nil, err
	}
	bs, err := b.AcceptStream(ctx)
	if err != nil {
		p.Close()
		return nil, err
	}
	bc := &streamConn{s: bs}
	if _, err := bc.Recv(make([]byte, 4)); err != nil {
		p.Close()
		return nil, err
	}
	p.A, p.B = &streamConn{s: as, out: make([]byte, 0, cfg.MsgSize+4)}, bc
	return p, nil
}
