package cast

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/replay"
	"github.com/walcast/walcast/wal"
	"github.com/walcast/walcast/wire"
)

// monoClock is a real monotonic clock for datapath/mem, so the loops and
// the TCP catch-up all run in real time.
type monoClock struct{ start time.Time }

func (c monoClock) Now() int64 { return int64(time.Since(c.start)) + 1 }

// quiet is the idle strategy of the tests' loops: spin briefly, then
// sleep, so that a 2-CPU machine shared with other tests is not starved.
var quiet = affinity.Idler{Strategy: affinity.Backoff, Spins: 200, Yields: 20}

// consRig is a Producer (WAL, Sender loop on end A of a mem network, TLS
// replay server on loopback) and the network to a consumer on end B.
type consRig struct {
	t    testing.TB
	net  *mem.Network
	dir  string
	pki  *replay.DevPKI
	addr string // replay server

	inject chan []byte // datagrams the consumer's path receives as if from the producer
	in     *spoofed    // the path of the consumer startConsumer started last

	mu      sync.Mutex
	p       *Producer
	sent    atomic.Uint64 // highest seq sent
	prefill int           // records written to a fresh WAL before the producer starts
}

func newConsRig(t testing.TB) *consRig { return newConsRigPrefill(t, 0) }

func newConsRigPrefill(t testing.TB, prefill int) *consRig {
	t.Helper()
	pki, err := replay.NewDevPKI(nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	r := &consRig{t: t, dir: t.TempDir(), pki: pki, prefill: prefill, inject: make(chan []byte, 16)}
	r.net = mem.NewNetwork(monoClock{time.Now()})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	ln.Close()
	r.startProducer()
	t.Cleanup(r.stopProducer)
	return r
}

// startProducer starts a Producer on the rig's WAL (recovering it: seqs
// continue), its replay server on the rig's address and its loop on end A.
func (r *consRig) startProducer() {
	t := r.t
	if r.prefill > 0 {
		prefillWAL(t, r.dir, r.prefill)
		r.prefill = 0
	}
	end, err := r.net.Listen(mem.AddrA, mem.AddrB)
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg, _ := r.pki.ServerTLS(true)
	cfg := ProducerConfig{To: mem.AddrB, Path: end, Dir: r.dir, Stream: 1, ReplayAddr: r.addr, TLS: tlsCfg, Idle: quiet}
	cfg.Advanced.WAL.SegmentSize = 4 << 20
	var p *Producer
	for i := 0; ; i++ { // the replay port may still be held by the last producer's connections
		if p, err = NewProducer(cfg); err == nil || i > 100 || !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		end.Close()
		t.Fatal(err)
	}
	r.mu.Lock()
	r.p = p
	r.mu.Unlock()
	r.sent.Store(p.Stats().LastSeq)
}

// prefillWAL appends n records to a fresh WAL in dir, stream 1.
func prefillWAL(t testing.TB, dir string, n int) {
	cfg := wal.Config{Dir: dir, Stream: 1, SegmentSize: 4 << 20}
	w, err := wal.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 64)
	for range n {
		for {
			_, err := w.Append(100, p)
			if errors.Is(err, wal.ErrBackpressure) {
				time.Sleep(100 * time.Microsecond)
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// stopProducer closes the Producer: everything it accepted sent and
// durable, then loop, replay server and WAL closed.
func (r *consRig) stopProducer() {
	r.mu.Lock()
	p := r.p
	r.p = nil
	r.mu.Unlock()
	if p == nil {
		return
	}
	if err := p.Close(); err != nil {
		r.t.Error(err)
	}
}

// send publishes n records and waits until they are sent (and durable).
func (r *consRig) send(n int) uint64 {
	r.mu.Lock()
	p := r.p
	r.mu.Unlock()
	ctx := context.Background()
	publishN(r.t, p, n)
	if err := p.Flush(ctx); err != nil {
		r.t.Fatal(err)
	}
	last := p.Stats().LastSeq
	r.sent.Store(last)
	return last
}

func (r *consRig) dark() {
	r.net.Impair(mem.AddrA, mem.AddrB, mem.Impairment{Blackouts: []mem.Window{{From: 0, To: math.MaxInt64}}})
}
func (r *consRig) light() { r.net.Impair(mem.AddrA, mem.AddrB, mem.Impairment{}) }

// lightAfter ends an outage begun by dark with the first data record
// past seq: the heartbeats sent before it are lost like the rest, so
// the consumer learns of the gap from newer data, never first from a
// heartbeat announcing it (which starts a repair by NAK instead; see
// TestConsumerOutageHeardFirst).
func (r *consRig) lightAfter(seq uint64) {
	var on atomic.Bool
	r.net.Impair(mem.AddrA, mem.AddrB, mem.Impairment{Script: func(_ int, b []byte) mem.Action {
		if on.Load() {
			return mem.Pass
		}
		if h, p, _, err := wire.DecodeFrame(b); err == nil && !wire.UDPControl(h.Type) && len(p) >= 8 && wire.Seq(p) > seq {
			on.Store(true)
			return mem.Pass
		}
		return mem.Drop
	}})
}

// holdInput stops (true) or resumes the last consumer's reads: what the
// producer sends meanwhile waits in its inbox, as in a socket buffer,
// and is then read in full batches.
func (r *consRig) holdInput(on bool) { r.in.held.Store(on) }

// consumerConfig is a consumer on end B that knows its producer (From)
// and catches up over TLS from the rig's replay server.
func (r *consRig) consumerConfig(tipPath string) ConsumerConfig {
	tlsCfg, _ := r.pki.ClientTLS()
	cfg := ConsumerConfig{From: mem.AddrA, Replay: []string{r.addr}, Stream: 1, TLS: tlsCfg, TipPath: tipPath, Idle: quiet}
	cfg.Advanced.ReplayClient.Backoff = []time.Duration{20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond}
	cfg.Advanced.ReplayClient.RetryBudget = 100
	return cfg
}

// orderCheck is the application: it fails on any seq that is not the
// previous one plus one.
type orderCheck struct {
	t     testing.TB
	first uint64
	last  atomic.Uint64
	n     atomic.Uint64
	err   error
	diag  func() string

	mark   atomic.Uint64 // seq whose delivery time is recorded
	markNs atomic.Int64
}

func (o *orderCheck) markAt(seq uint64) { o.markNs.Store(0); o.mark.Store(seq) }

func (o *orderCheck) marked() time.Time { return time.Unix(0, o.markNs.Load()) }

func (o *orderCheck) deliver(r Record) error {
	last := o.last.Load()
	if o.n.Load() == 0 {
		if o.first != 0 && r.Seq != o.first {
			o.err = fmt.Errorf("first record %d, want %d", r.Seq, o.first)
		}
	} else if r.Seq != last+1 && o.err == nil {
		o.err = fmt.Errorf("record %d after %d", r.Seq, last)
	}
	if r.Type != 100 || len(r.Payload) != 64 || wire.Seq(r.Payload) != r.Seq {
		o.err = fmt.Errorf("record %d: type %d, %d bytes", r.Seq, r.Type, len(r.Payload))
	}
	o.last.Store(r.Seq)
	o.n.Add(1)
	if r.Seq == o.mark.Load() {
		o.markNs.Store(time.Now().UnixNano())
	}
	return nil
}

func (o *orderCheck) waitFor(t testing.TB, seq uint64, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for o.last.Load() < seq {
		if time.Now().After(deadline) {
			d := ""
			if o.diag != nil {
				d = o.diag()
			}
			t.Fatalf("timed out at %d waiting for %d: %s", o.last.Load(), seq, d)
		}
		time.Sleep(time.Millisecond)
	}
}

// startConsumer runs a consumer on end B of the rig's network; the
// returned stop cancels it and returns Run's error.
func startConsumer(t testing.TB, r *consRig, cfg ConsumerConfig, app *orderCheck) (*Consumer, func() error) {
	t.Helper()
	end, err := r.net.Listen(mem.AddrB, mem.AddrA)
	if err != nil {
		t.Fatal(err)
	}
	r.in = &spoofed{End: end, from: mem.AddrA, inject: r.inject}
	cfg.Path = r.in
	var evs []string
	var evMu sync.Mutex
	userEv := cfg.OnEvent
	cfg.OnEvent = func(e Event) {
		evMu.Lock()
		evs = append(evs, fmt.Sprintf("%v %v tip=%d rec=%d", e.Kind, e.Outcome.Kind, e.Tip, e.Records))
		evMu.Unlock()
		if userEv != nil {
			userEv(e)
		}
	}
	c, err := NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, app.deliver) }()
	app.diag = func() string {
		evMu.Lock()
		defer evMu.Unlock()
		return fmt.Sprintf("consumer %+v; events %v; sent %d", c.Stats(), evs, r.sent.Load())
	}
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			runErr = <-done
		})
		return runErr
	}
	t.Cleanup(func() { stop() })
	return c, stop
}

// spoofed is a consumer's path that also receives the datagrams sent on
// inject, as if they came from from (the producer's address), and that
// reads nothing while held.
type spoofed struct {
	*mem.End
	from   netip.AddrPort
	inject chan []byte
	held   atomic.Bool
}

func (s *spoofed) Recv(v *batch.Vec) (int, error) {
	if s.held.Load() {
		v.Reset()
		return 0, nil
	}
	n, err := s.End.Recv(v)
	if err != nil || v.Full() {
		return n, err
	}
	select {
	case d := <-s.inject:
		v.Append(d, s.from)
		return v.Len(), nil
	default:
		return n, nil
	}
}
