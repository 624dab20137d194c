package cast

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/replay"
)

// A keyed Consumer that starts behind a keyed Producer catches up over
// TCP replay with mutual TLS, then goes live over authenticated UDP:
// every record arrives once and in order, the catch-up carried the
// records the Consumer missed, no datagram either side sent was refused,
// and the replay server still refuses a client without a certificate.
func TestConsumerKeysCatchUp(t *testing.T) {
	const before, live = 20_000, 5_000
	pki, err := replay.NewDevPKI(nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	network := mem.NewNetwork(monoClock{time.Now()})
	pend, err := network.Listen(mem.AddrA, mem.AddrB)
	if err != nil {
		t.Fatal(err)
	}
	srvTLS, err := pki.ServerTLS(true)
	if err != nil {
		t.Fatal(err)
	}
	pc := ProducerConfig{To: mem.AddrB, Path: pend, Dir: t.TempDir(), Stream: 1, ReplayAddr: addr, TLS: srvTLS, Idle: quiet, Keys: testKeys}
	pc.Advanced.WAL.SegmentSize = 4 << 20
	p, err := NewProducer(pc)
	if err != nil {
		pend.Close()
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Published while no consumer listens: only the log has them.
	publishN(t, p, before)
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	cend, err := network.Listen(mem.AddrB, mem.AddrA)
	if err != nil {
		t.Fatal(err)
	}
	cliTLS, err := pki.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	cc := ConsumerConfig{From: mem.AddrA, Replay: []string{addr}, Stream: 1, TLS: cliTLS, Idle: quiet, Keys: testKeys, Path: cend}
	cc.Advanced.ReplayClient.Backoff = []time.Duration{20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond}
	cc.Advanced.ReplayClient.RetryBudget = 100
	c, err := NewConsumer(cc)
	if err != nil {
		t.Fatal(err)
	}
	app := &orderCheck{t: t, first: 1}
	done := make(chan error, 1)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { done <- c.Run(runCtx, app.deliver) }()
	app.diag = func() string { return "consumer " + sprintStats(c.Stats()) }
	app.waitFor(t, before, time.Minute)
	publishN(t, p, live)
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	app.waitFor(t, before+live, time.Minute)
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	if app.err != nil {
		t.Fatal(app.err)
	}
	st := c.Stats()
	if n := app.n.Load(); n != before+live || st.UDPRecords+st.TCPRecords != n {
		t.Fatalf("delivered %d records (udp %d, tcp %d), want %d", n, st.UDPRecords, st.TCPRecords, before+live)
	}
	if st.TCPRecords < before || st.UDPRecords == 0 || st.CatchUps == 0 {
		t.Fatalf("want the first %d records over TCP and the rest over UDP: %s", before, sprintStats(st))
	}
	ps := p.Stats()
	if st.Auth.Refused() != 0 || ps.Auth.Refused() != 0 || st.Auth.Sealed == 0 || ps.Auth.Sealed == 0 || ps.Sender.Statuses == 0 {
		t.Fatalf("authentication: consumer %+v, producer %+v (Status heard %d)", st.Auth, ps.Auth, ps.Sender.Statuses)
	}

	// Mutual TLS still holds: a client that trusts the server's CA but
	// shows no certificate of its own is refused.
	bare := cliTLS.Clone()
	bare.Certificates, bare.GetClientCertificate = nil, nil
	failed := ps.Replay.HandshakeFailed
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, bare)
	if err == nil {
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		_, err = conn.Read(make([]byte, 1)) // TLS 1.3: the server's verdict on the client comes after the client's handshake
		conn.Close()
	}
	if err == nil {
		t.Fatal("the replay server served a client without a certificate")
	}
	deadline := time.Now().Add(10 * time.Second)
	for p.Stats().Replay.HandshakeFailed == failed && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if p.Stats().Replay.HandshakeFailed == failed {
		t.Fatalf("the server did not count the refused handshake (%v): %+v", err, p.Stats().Replay)
	}
}

func sprintStats(s ConsumerStats) string {
	return fmt.Sprintf("tip %d, udp %d, tcp %d, catch-ups %d, escalations %d, auth %+v", s.Tip, s.UDPRecords, s.TCPRecords, s.CatchUps, s.Escalations, s.Auth)
}
