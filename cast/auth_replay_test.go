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

// TestConsumerOutage with keys on both ends: the link goes dark for more
// than the consumer's window, the consumer escalates, catches up over
// mutual-TLS replay, resets its receiver and resumes authenticated UDP
// (its replay state survives the reset: the producer's datagrams after
// the outage are new counters of the same epoch). Every record once, in
// order; nothing refused.
func TestConsumerKeysOutage(t *testing.T) {
	pki, err := replay.NewDevPKI(nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	r := &consRig{t: t, dir: t.TempDir(), pki: pki, inject: make(chan []byte, 16)}
	r.net = mem.NewNetwork(monoClock{time.Now()})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	ln.Close()
	end, err := r.net.Listen(mem.AddrA, mem.AddrB)
	if err != nil {
		t.Fatal(err)
	}
	srvTLS, err := pki.ServerTLS(true)
	if err != nil {
		t.Fatal(err)
	}
	pc := ProducerConfig{To: mem.AddrB, Path: end, Dir: r.dir, Stream: 1, ReplayAddr: r.addr, TLS: srvTLS, Idle: quiet, Keys: testKeys}
	pc.Advanced.WAL.SegmentSize = 4 << 20
	p, err := NewProducer(pc)
	if err != nil {
		end.Close()
		t.Fatal(err)
	}
	r.p = p
	t.Cleanup(r.stopProducer)

	cfg := r.consumerConfig("")
	cfg.Keys = testKeys
	live := make(chan struct{}, 8)
	cfg.OnEvent = func(e Event) {
		if e.Kind == EventLive {
			live <- struct{}{}
		}
	}
	app := &orderCheck{t: t, first: 1}
	c, stop := startConsumer(t, r, cfg, app)
	<-live // bootstrap on the empty stream
	app.waitFor(t, r.send(1000), 20*time.Second)
	r.dark()
	gapEnd := r.send(52501)
	r.holdInput(true)
	r.lightAfter(gapEnd)
	last := r.send(1000)
	r.holdInput(false)
	app.waitFor(t, last, 60*time.Second)
	select {
	case <-live:
	case <-time.After(30 * time.Second):
		t.Fatalf("the consumer never resumed UDP: %s", app.diag())
	}
	udp := c.Stats().UDPRecords
	last = r.send(500)
	app.waitFor(t, last, 20*time.Second)
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v", err)
	}
	if app.err != nil {
		t.Fatal(app.err)
	}
	st, ps := c.Stats(), p.Stats()
	if n := app.n.Load(); n != last || st.UDPRecords+st.TCPRecords != last {
		t.Fatalf("delivered %d records (udp %d, tcp %d), want %d", n, st.UDPRecords, st.TCPRecords, last)
	}
	if st.Escalations == 0 || st.TCPRecords < gapEnd-1000 || st.UDPRecords == udp {
		t.Fatalf("want an escalation, the gap over TCP and UDP after it: %s", sprintStats(st))
	}
	if st.Auth.Refused() != 0 || ps.Auth.Refused() != 0 {
		t.Fatalf("genuine datagrams refused: consumer %+v, producer %+v", st.Auth, ps.Auth)
	}
}
