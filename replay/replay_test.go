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
	"testing"
	"time"

	"github.com/walcast/walcast/wire"
)

// Catch-up from 40 on a log of 1..100 delivers 40..100, then CaughtUp,
// then records made durable later arrive live — each exactly once. A
// record appended but not yet durable is held back until it is.
func TestCatchUpThenLive(t *testing.T) {
	src := newMemSource(1, 1, 64)
	src.AppendFlush(100)
	srv, addr := startServer(t, nil, src)

	cfg := testClientConfig(t, addr)
	cfg.StartTip = 39
	var caughtAt atomic.Int64
	caught := make(chan wire.CaughtUp, 4)
	col := newCollector(t)
	cfg.OnEvent = func(e Event) {
		if e.Kind == EventCaughtUp {
			caughtAt.Store(int64(len(col.snapshot())))
			caught <- e.CaughtUp
		}
	}
	cl, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cl.Run(ctx, col.handle) }()

	select {
	case cu := <-caught:
		if cu.LiveSeq != 100 || cu.Stream != 1 || cu.Seq != 0 {
			t.Errorf("CaughtUp = %+v, want live_seq 100 stream 1 seq 0", cu)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no CaughtUp")
	}
	if n := caughtAt.Load(); n != 61 {
		t.Errorf("CaughtUp after %d records, want 61 (40..100)", n)
	}
	// Appended but not flushed: must not be sent.
	src.Append(10)
	time.Sleep(50 * time.Millisecond)
	if got := col.snapshot(); lastOf(got) != uint64(100) {
		t.Fatalf("non-durable records were sent: last %v", lastOf(got))
	}
	src.Flush()
	col.waitFor(t, 110, 10*time.Second)
	for range 20 {
		src.AppendFlush(7)
	}
	col.waitFor(t, 250, 10*time.Second)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
	checkRange(t, col.snapshot(), 40, 250)
	if st := srv.Stats(); st.Records != 211 {
		t.Errorf("server sent %d records, want 211", st.Records)
	}
	if st := cl.Stats(); st.Duplicates != 0 || st.Records != 211 || st.Connects != 1 {
		t.Errorf("client stats %+v", st)
	}
}

// A request below the oldest record held gets NotAvailable with the
// server's range, and the client reports it and fails the pass.
func TestNotAvailable(t *testing.T) {
	cases := []struct {
		name          string
		first, n      int
		startTip      uint64
		oldest, highs uint64
	}{
		{"pruned", 50, 51, 9, 50, 100},
		{"empty", 1, 0, 0, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := newMemSource(1, uint64(tc.first), 64)
			if tc.n > 0 {
				src.AppendFlush(tc.n)
			}
			srv, addr := startServer(t, nil, src)
			cfg := testClientConfig(t, addr)
			cfg.StartTip = tc.startTip
			var got []wire.NotAvailable
			cfg.OnEvent = func(e Event) {
				if e.Kind == EventNotAvailable {
					got = append(got, e.NotAvailable)
				}
			}
			cl, err := NewClient(cfg)
			if err != nil {
				t.Fatal(err)
			}
			err = cl.RunOnce(context.Background(), func(wire.Header, []byte) error {
				t.Error("record delivered")
				return nil
			})
			if !errors.Is(err, ErrAllEndpoints) || !errors.Is(err, ErrNotAvailable) {
				t.Fatalf("RunOnce = %v, want ErrAllEndpoints wrapping ErrNotAvailable", err)
			}
			want := wire.NotAvailable{Requested: tc.startTip + 1, Oldest: tc.oldest, Highest: tc.highs, Stream: 1}
			if len(got) != 1 || got[0] != want {
				t.Errorf("NotAvailable events %+v, want [%+v]", got, want)
			}
			if srv.Stats().NotAvailable != 1 {
				t.Errorf("server NotAvailable = %d", srv.Stats().NotAvailable)
			}
			// Run gives up after the retry budget with ErrBlocked.
			_, err = cl.CatchUp(context.Background(), func(wire.Header, []byte) error { return nil })
			if !errors.Is(err, ErrBlocked) || !errors.Is(err, ErrNotAvailable) {
				t.Errorf("CatchUp = %v, want ErrBlocked wrapping ErrNotAvailable", err)
			}
			if r := cl.Stats().Retries; r != uint64(cfg.RetryBudget) {
				t.Errorf("retries = %d, want %d", r, cfg.RetryBudget)
			}
		})
	}
}

// Endpoints are tried in order: a dead one (connect fails), then one that
// pruned the history (NotAvailable), then an archive holding it all; the
// same from_seq is asked of each.
func TestFederation(t *testing.T) {
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()

	producer := newMemSource(1, 60, 64)
	producer.AppendFlush(41) // 60..100
	archive := newMemSource(1, 1, 64)
	archive.AppendFlush(100) // 1..100
	_, pAddr := startServer(t, nil, producer)
	_, aAddr := startServer(t, nil, archive)

	cfg := testClientConfig(t, deadAddr, pAddr, aAddr)
	cfg.StartTip = 4
	var events []string
	cfg.OnEvent = func(e Event) {
		events = append(events, fmt.Sprintf("%v %s", e.Kind, e.Endpoint))
		if e.Kind == EventNotAvailable && e.NotAvailable.Requested != 5 {
			t.Errorf("asked the producer from %d, want 5", e.NotAvailable.Requested)
		}
	}
	cl, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	col := newCollector(t)
	tip, err := cl.CatchUp(context.Background(), col.handle)
	if err != nil || tip != 100 {
		t.Fatalf("CatchUp = %d, %v; want 100, nil", tip, err)
	}
	checkRange(t, col.snapshot(), 5, 100)
	want := []string{
		"connect-failed " + deadAddr, "connected " + pAddr, "not-available " + pAddr,
		"connected " + aAddr, "caught-up " + aAddr,
	}
	if fmt.Sprint(events) != fmt.Sprint(want) {
		t.Errorf("events\n got %v\nwant %v", events, want)
	}
	// Now the producer holds the tip+1: the next pass is served by it.
	events = nil
	producer.AppendFlush(10)
	tip, err = cl.CatchUp(context.Background(), col.handle)
	if err != nil || tip != 110 {
		t.Fatalf("second CatchUp = %d, %v", tip, err)
	}
	if len(events) != 3 || events[1] != "connected "+pAddr {
		t.Errorf("second pass events %v, want served by the producer", events)
	}
	checkRange(t, col.snapshot(), 5, 110)
}

func fakeServer(t *testing.T, handshake bool, script func(n int, c net.Conn, req wire.ReplicationRequest)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var conns sync.Map
	t.Cleanup(func() {
		ln.Close()
		conns.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; ; n++ {
			raw, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Store(raw, true)
			wg.Add(1)
			go func(n int) {
				defer wg.Done()
				defer raw.Close()
				if !handshake {
					script(n, raw, wire.ReplicationRequest{})
					return
				}
				c := tls.Server(raw, serverTLS(t))
				req, err := readRequest(c)
				if err != nil {
					t.Errorf("fake server: %v", err)
					return
				}
				script(n, c, req)
			}(n)
		}
	}()
	return ln.Addr().String()
}

// A frame that fails its checks drops the connection; the client
// reconnects and resumes from the last good seq, delivering each record
// once.
func TestCorruptFrameResumes(t *testing.T) {
	cases := []struct {
		name    string
		corrupt func(f []byte)
	}{
		{"payload bit flip", func(f []byte) { f[wire.HeaderSize+20] ^= 1 }},
		{"crc", func(f []byte) { f[8] ^= 0x80 }},
		{"version", func(f []byte) { f[0] = 2 }},
		{"version zero", func(f []byte) { f[0] = 0 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var reqs []uint64
			var mu sync.Mutex
			addr := fakeServer(t, true, func(n int, c net.Conn, req wire.ReplicationRequest) {
				mu.Lock()
				reqs = append(reqs, req.From)
				mu.Unlock()
				for seq := req.From; seq <= 20; seq++ {
					f := dataFrame(seq, 64)
					if n == 0 && seq == 11 {
						tc.corrupt(f)
					}
					if _, err := c.Write(f); err != nil {
						return
					}
					if n == 0 && seq == 11 {
						// Keep the connection open: the client must drop it.
						io.Copy(io.Discard, c)
						return
					}
				}
				var cu [wire.CaughtUpFrameSize]byte
				wire.PutCaughtUpFrame(cu[:], wire.CaughtUp{Stream: 1, LiveSeq: 20})
				c.Write(cu[:])
				io.Copy(io.Discard, c)
			})
			cl, _ := NewClient(testClientConfig(t, addr))
			col := newCollector(t)
			tip, err := cl.CatchUp(context.Background(), col.handle)
			if err != nil || tip != 20 {
				t.Fatalf("CatchUp = %d, %v", tip, err)
			}
			checkRange(t, col.snapshot(), 1, 20)
			if fmt.Sprint(reqs) != "[1 11]" {
				t.Errorf("requests from %v, want [1 11]", reqs)
			}
			if st := cl.Stats(); st.BadFrames != 1 || st.Retries != 1 {
				t.Errorf("stats %+v, want 1 bad frame, 1 retry", st)
			}
		})
	}
}

// A server that stalls trips the right timeout: one that accepts TCP and
// never handshakes (connect timeout), one that handshakes and sends
// nothing (read timeout), one that sends CaughtUp and then goes silent
// without keepalives (idle timeout).
func TestStalledServerTimeouts(t *testing.T) {
	cases := []struct {
		name      string
		handshake bool
		script    func(n int, c net.Conn, req wire.ReplicationRequest)
		wantIdle  bool
	}{
		{"no handshake", false, func(_ int, c net.Conn, _ wire.ReplicationRequest) { io.Copy(io.Discard, c) }, false},
		{"no data", true, func(_ int, c net.Conn, _ wire.ReplicationRequest) { io.Copy(io.Discard, c) }, true},
		{"silent after CaughtUp", true, func(_ int, c net.Conn, _ wire.ReplicationRequest) {
			c.Write(dataFrame(1, 64))
			var cu [wire.CaughtUpFrameSize]byte
			wire.PutCaughtUpFrame(cu[:], wire.CaughtUp{Stream: 1, LiveSeq: 1})
			c.Write(cu[:])
			io.Copy(io.Discard, c)
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := fakeServer(t, tc.handshake, tc.script)
			cfg := testClientConfig(t, addr)
			cfg.ConnectTimeout = 300 * time.Millisecond
			cfg.ReadTimeout = 300 * time.Millisecond
			cfg.IdleTimeout = 300 * time.Millisecond
			cl, _ := NewClient(cfg)
			start := time.Now()
			err := cl.RunOnce(context.Background(), func(wire.Header, []byte) error { return nil })
			el := time.Since(start)
			if err == nil {
				t.Fatal("RunOnce returned nil against a stalled server")
			}
			if tc.wantIdle != errors.Is(err, ErrIdle) {
				t.Errorf("err = %v; ErrIdle expected: %v", err, tc.wantIdle)
			}
			if el > 5*time.Second {
				t.Errorf("took %v to give up", el)
			}
			t.Logf("%v after %v", err, el.Round(time.Millisecond))
		})
	}
}

// The server repeats CaughtUp on an idle live tail, so an idle stream
// does not trip the client's idle timeout.
func TestIdleStreamKeepsAlive(t *testing.T) {
	src := newMemSource(1, 1, 64)
	src.AppendFlush(3)
	srv, addr := startServer(t, func(c *ServerConfig) { c.KeepaliveInterval = 50 * time.Millisecond }, src)
	cfg := testClientConfig(t, addr)
	cfg.IdleTimeout = time.Second // 20 keepalive intervals: survives a loaded machine
	cl, _ := NewClient(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	defer cancel()
	col := newCollector(t)
	err := cl.Run(ctx, col.handle)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run = %v", err)
	}
	if st := cl.Stats(); st.Connects != 1 || st.Timeouts != 0 {
		t.Errorf("idle stream reconnected or timed out: %+v", st)
	}
	if srv.Stats().Keepalives < 5 {
		t.Errorf("keepalives = %d", srv.Stats().Keepalives)
	}
	checkRange(t, col.snapshot(), 1, 3)
}

// A consumer that never reads is dropped after the write timeout with
// ErrSlowConsumer; meanwhile the producer keeps appending and a normal
// consumer receives everything.
func TestSlowConsumerDropped(t *testing.T) {
	src := newMemSource(1, 1, 1000)
	src.AppendFlush(20000) // ~20 MB: more than the socket buffers hold
	reports := make(chan ConnReport, 8)
	srv, addr := startServer(t, func(c *ServerConfig) {
		c.WriteTimeout = time.Second
		c.BufferBytes = 64 << 10
		c.OnDisconnect = func(r ConnReport) { reports <- r }
	}, src)

	// The stuck consumer: TLS up, request sent, then never reads.
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if tc, ok := raw.(*net.TCPConn); ok {
		tc.SetReadBuffer(4096)
	}
	cfgTLS := clientTLS(t).Clone()
	cfgTLS.ServerName = "127.0.0.1"
	stuck := tls.Client(raw, cfgTLS)
	var req [wire.ControlFrameSize]byte
	wire.PutReplicationRequestFrame(req[:], wire.ReplicationRequest{Stream: 1, From: 1})
	if _, err := stuck.Write(req[:]); err != nil {
		t.Fatal(err)
	}

	// The producer keeps going while the stuck consumer fills up.
	prodDone := make(chan time.Duration)
	go func() {
		start := time.Now()
		for range 100 {
			src.AppendFlush(50)
			time.Sleep(5 * time.Millisecond)
		}
		prodDone <- time.Since(start)
	}()
	cl, _ := NewClient(testClientConfig(t, addr))
	col := newCollector(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cl.Run(ctx, col.handle) }()

	// The normal consumer may be dropped too if the race detector stalls
	// it past the write timeout; it then resumes, which the range check
	// below covers. Find the stuck one's report.
	var r ConnReport
	for r.Remote != raw.LocalAddr().String() {
		select {
		case r = <-reports:
		case <-time.After(20 * time.Second):
			t.Fatal("stuck consumer was never dropped")
		}
	}
	if !errors.Is(r.Reason, ErrSlowConsumer) {
		t.Errorf("dropped for %v, want ErrSlowConsumer", r.Reason)
	}
	t.Logf("stuck consumer dropped after %d records: %v", r.Records, r.Reason)
	el := <-prodDone
	if el > 10*time.Second {
		t.Errorf("producer took %v for 100 flushes", el)
	}
	col.waitFor(t, 25000, 30*time.Second)
	cancel()
	<-done
	checkRange(t, col.snapshot(), 1, 25000)
	if srv.Stats().SlowConsumers < 1 {
		t.Errorf("SlowConsumers = %d", srv.Stats().SlowConsumers)
	}
}

// Many consumers at different tips follow one stream concurrently, each
// receiving its own range exactly once.
func TestManyConsumers(t *testing.T) {
	src := newMemSource(1, 1, 128)
	src.AppendFlush(1000)
	_, addr := startServer(t, nil, src)
	const n = 8
	cols := make([]*collector, n)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range n {
		cfg := testClientConfig(t, addr)
		cfg.StartTip = uint64(i * 100)
		cl, err := NewClient(cfg)
		if err != nil {
			t.Fatal(err)
		}
		cols[i] = newCollector(t)
		wg.Add(1)
		go func() { defer wg.Done(); cl.Run(ctx, cols[i].handle) }()
	}
	for range 50 {
		src.AppendFlush(40)
		time.Sleep(time.Millisecond)
	}
	for i := range n {
		cols[i].waitFor(t, 3000, 20*time.Second)
	}
	cancel()
	wg.Wait()
	for i := range n {
		checkRange(t, cols[i].snapshot(), uint64(i*100+1), 3000)
	}
}

// A consumer restarted with the same tip file resumes at tip+1: nothing at
// or below the persisted tip is delivered again.
func TestRestartResumesFromTip(t *testing.T) {
	src := newMemSource(1, 1, 64)
	src.AppendFlush(100)
	_, addr := startServer(t, nil, src)
	cfg := testClientConfig(t, addr)
	cfg.TipPath = t.TempDir() + "/consumer.tip"

	cl, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	col := newCollector(t)
	err = cl.Run(context.Background(), func(h wire.Header, p []byte) error {
		col.handle(h, p)
		if wire.Seq(p) == 60 {
			return ErrStop
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if tip, _ := ReadTip(cfg.TipPath); tip != 60 {
		t.Fatalf("tip file = %d after stopping at 60", tip)
	}
	cl2, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	col2 := newCollector(t)
	if tip, err := cl2.CatchUp(context.Background(), col2.handle); err != nil || tip != 100 {
		t.Fatalf("restart CatchUp = %d, %v", tip, err)
	}
	checkRange(t, col.snapshot(), 1, 60)
	checkRange(t, col2.snapshot(), 61, 100)
	if tip, _ := ReadTip(cfg.TipPath); tip != 100 {
		t.Errorf("tip file = %d at the end", tip)
	}
	// A handler error leaves the tip before the failed record and ends Run.
	src.AppendFlush(5)
	boom := errors.New("boom")
	err = cl2.Run(context.Background(), func(h wire.Header, p []byte) error {
		if wire.Seq(p) == 103 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || cl2.Tip() != 102 {
		t.Errorf("Run = %v, tip %d; want boom, 102", err, cl2.Tip())
	}
}

// Verify tells whether an endpoint holds a record with a given CRC,
// waiting for a record not yet durable.
func TestVerify(t *testing.T) {
	src := newMemSource(1, 1, 64)
	src.AppendFlush(10)
	_, addr := startServer(t, nil, src)
	cl, _ := NewClient(testClientConfig(t, addr))
	crc := func(seq uint64) uint32 { h, _ := wire.ParseHeader(dataFrame(seq, 64)); return h.CRC }
	cases := []struct {
		name     string
		seq      uint64
		crc      uint32
		check    bool
		appendAt time.Duration // make records durable after this (0: never)
		want     bool
	}{
		{"same record", 7, crc(7), true, 0, true},
		{"different record", 7, crc(7) ^ 1, true, 0, false},
		{"any crc", 10, 0, false, 0, true},
		{"absent", 20, crc(20), true, 0, false},
		{"becomes durable", 12, crc(12), true, 50 * time.Millisecond, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.appendAt > 0 {
				time.AfterFunc(tc.appendAt, func() { src.AppendFlush(5) })
			}
			got, err := cl.Verify(context.Background(), tc.seq, tc.crc, tc.check, 300*time.Millisecond)
			if err != nil || got != tc.want {
				t.Errorf("Verify = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	if cl.Tip() != 0 {
		t.Errorf("Verify moved the tip to %d", cl.Tip())
	}
}

// CatchUpTo follows the live tail past CaughtUp until the target seq,
// and gives up after the grace when the target never becomes durable.
func TestCatchUpTo(t *testing.T) {
	src := newMemSource(1, 1, 64)
	src.AppendFlush(100)
	_, addr := startServer(t, nil, src)
	cl, _ := NewClient(testClientConfig(t, addr))
	col := newCollector(t)
	time.AfterFunc(50*time.Millisecond, func() { src.AppendFlush(50) })
	tip, err := cl.CatchUpTo(context.Background(), 140, 5*time.Second, col.handle)
	if err != nil || tip < 140 || tip > 150 {
		t.Fatalf("CatchUpTo(140) = %d, %v", tip, err)
	}
	start := time.Now()
	tip, err = cl.CatchUpTo(context.Background(), 1000, 100*time.Millisecond, col.handle)
	if err != nil || tip != 150 {
		t.Fatalf("CatchUpTo(1000) = %d, %v", tip, err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("gave up after %v with a 100 ms grace", el)
	}
	checkRange(t, col.snapshot(), 1, 150)
}
