package cast

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/replay"
	"github.com/walcast/walcast/wire"
)

// TestConsumerLearnsSender: a consumer told nothing about its producer
// ignores a corrupt datagram from a stranger, learns the producer from its
// first valid frame, and from then on drops a stranger's data.
func TestConsumerLearnsSender(t *testing.T) {
	n := mem.NewNetwork(monoClock{time.Now()})
	stranger := netip.MustParseAddrPort("10.0.0.9:9")
	inj, _ := n.Listen(stranger, mem.AddrB)
	bad := make([]byte, 80)
	wire.Header{Type: 100, Len: 64}.Put(bad) // a data frame whose CRC is wrong
	v := batch.New(1, 128)
	v.Append(bad, mem.AddrB)
	endB, _ := n.Listen(mem.AddrB, netip.AddrPort{})
	inj.Send(v)

	var found []netip.AddrPort
	c, err := NewConsumer(ConsumerConfig{Path: endB, NoCatchUp: true, Idle: quiet, OnEvent: func(e Event) {
		if e.Kind == EventSenderFound {
			found = append(found, e.Sender)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	got, done := runUntil(ctx, c, 20)
	endA, _ := n.Listen(mem.AddrA, mem.AddrB)
	p, err := NewProducer(ProducerConfig{To: mem.AddrB, Path: endA, Idle: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	publishN(t, p, 10)
	p.Flush(ctx)
	// A stranger's valid frame: seq 11, meant to take the producer's place.
	frame := make([]byte, 16+64)
	wire.Seal(frame, 100)
	frame[16] = 11
	wire.Seal(frame, 100)
	v.Reset()
	v.Append(frame, mem.AddrB)
	for deadline := time.Now().Add(10 * time.Second); c.Stats().UDPRecords < 10; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v", c.Stats())
		}
	}
	inj.Send(v)
	for deadline := time.Now().Add(10 * time.Second); c.Stats().Loop.Foreign == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stranger's frame was not seen")
		}
	}
	for range 10 {
		p.Publish(ctx, 100, make([]byte, 64))
	}
	waitRun(t, c, done)
	cancel()
	if len(found) != 1 || found[0] != mem.AddrA {
		t.Fatalf("sender found %v, want [%v]", found, mem.AddrA)
	}
	if len(*got) != 20 || (*got)[0] != 1 || (*got)[19] != 20 {
		t.Fatalf("delivered %v", *got)
	}
}

// TestConsumerKeepsFirstBatch: a consumer told nothing about its producer
// keeps every datagram of the read that taught it the producer, not only
// the first: records the producer sent before Run are all delivered
// without a NAK (records 2..16 of every stream were lost and repaired).
func TestConsumerKeepsFirstBatch(t *testing.T) {
	n := mem.NewNetwork(monoClock{time.Now()})
	endB, _ := n.Listen(mem.AddrB, netip.AddrPort{})
	endA, _ := n.Listen(mem.AddrA, mem.AddrB)
	p, err := NewProducer(ProducerConfig{To: mem.AddrB, Path: endA, Idle: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	publishN(t, p, 40)
	p.Flush(ctx)
	for deadline := time.Now().Add(10 * time.Second); p.Stats().Sender.Sent < 40; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("producer %+v", p.Stats())
		}
	}
	c, err := NewConsumer(ConsumerConfig{Path: endB, NoCatchUp: true, Idle: quiet})
	if err != nil {
		t.Fatal(err)
	}
	got, done := runUntil(ctx, c, 40)
	waitRun(t, c, done)
	if len(*got) != 40 || (*got)[0] != 1 || (*got)[39] != 40 {
		t.Fatalf("delivered %v", *got)
	}
	if st := c.Stats().Receiver; st.NaksSent != 0 {
		t.Fatalf("%d NAKs for %d seqs: records sent before Run were dropped", st.NaksSent, st.NakSeqs)
	}
}

// TestConsumerStopsOnCancel: cancelling Run's context stops it promptly
// with ctx's error, the socket is closed, and the stats are exact: what
// the receiver delivered is what the callback got.
func TestConsumerStopsOnCancel(t *testing.T) {
	net := mem.NewNetwork(monoClock{time.Now()})
	a, _ := net.Listen(mem.AddrA, mem.AddrB)
	b, _ := net.Listen(mem.AddrB, mem.AddrA)
	c, err := NewConsumer(ConsumerConfig{Path: b, From: mem.AddrA, NoCatchUp: true, Idle: quiet})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewProducer(ProducerConfig{To: mem.AddrB, Path: a, Idle: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var n uint64
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, func(Record) error { n++; return nil }) }()
	stop := make(chan struct{})
	go func() { // keep publishing while the consumer is cancelled
		for {
			select {
			case <-stop:
				return
			default:
				p.Publish(context.Background(), 100, make([]byte, 64))
			}
		}
	}()
	defer close(stop)
	for deadline := time.Now().Add(10 * time.Second); c.Stats().UDPRecords < 1000; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v", c.Stats())
		}
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop on cancel")
	}
	s := c.Stats()
	if s.UDPRecords != n || s.Receiver.Delivered != n || s.Loop.Delivered != n || s.Tip != n {
		t.Fatalf("callback got %d; stats %+v", n, s)
	}
	if err := c.Run(context.Background(), func(Record) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Run = %v", err)
	}
}

// failingSend is a path whose sends fail with EPERM (a firewall rule,
// say): a NAK that cannot be sent must not go unnoticed.
type failingSend struct{ *mem.End }

func (failingSend) Send(*batch.Vec) (int, error) { return 0, syscall.EPERM }

// TestConsumerNakSendError: a gap makes the receiver NAK; the send fails;
// Run returns that error instead of ignoring it.
func TestConsumerNakSendError(t *testing.T) {
	n := mem.NewNetwork(monoClock{time.Now()})
	a, _ := n.Listen(mem.AddrA, mem.AddrB)
	b, _ := n.Listen(mem.AddrB, mem.AddrA)
	c, err := NewConsumer(ConsumerConfig{Path: failingSend{b}, From: mem.AddrA, NoCatchUp: true, Idle: quiet})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background(), func(Record) error { return nil }) }()
	// Records 1 and 3 (2 is lost): the receiver NAKs 2.
	v := batch.New(2, 128)
	for _, seq := range []byte{1, 3} {
		f := make([]byte, 16+64)
		f[16] = seq
		wire.Seal(f, 100)
		v.Append(f, mem.AddrB)
	}
	a.Send(v)
	select {
	case err := <-done:
		if !errors.Is(err, syscall.EPERM) {
			t.Fatalf("Run = %v, want EPERM", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not report the failed NAK")
	}
}

// TestConsumerConfigMisuse: each misuse fails in NewConsumer with
// ErrConfig naming the field.
func TestConsumerConfigMisuse(t *testing.T) {
	pair := mem.NewPair(1)
	for _, tc := range []struct {
		name, field string
		cfg         ConsumerConfig
	}{
		{"catch-up without TLS", "TLS", ConsumerConfig{Path: pair.B}},
		{"no catch-up with endpoints", "NoCatchUp", ConsumerConfig{Path: pair.B, NoCatchUp: true, Replay: []string{"x:1"}}},
		{"tip file and start tip", "Advanced.StartTip", ConsumerConfig{Path: pair.B, Plaintext: true, TipPath: "t", Advanced: ConsumerAdvanced{StartTip: 5}}},
		{"reorder ring not a power of two", "Advanced.Receiver", ConsumerConfig{Path: pair.B, NoCatchUp: true, Advanced: ConsumerAdvanced{Receiver: ReceiverTuning{ReorderSlots: 3000}}}},
		{"start now and a start tip", "Advanced.StartNow", ConsumerConfig{Path: pair.B, NoCatchUp: true, Advanced: ConsumerAdvanced{StartNow: true, StartTip: 5}}},
		{"negative verify wait", "Advanced.VerifyWait", ConsumerConfig{Path: pair.B, Plaintext: true, Advanced: ConsumerAdvanced{VerifyWait: -1}}},
		{"bad jitter", "Advanced.ReplayClient", ConsumerConfig{Path: pair.B, Plaintext: true, Advanced: ConsumerAdvanced{ReplayClient: ReplayClientTuning{Jitter: 2}}}},
	} {
		_, err := NewConsumer(tc.cfg)
		if !errors.Is(err, ErrConfig) || !containsField(err, tc.field) {
			t.Errorf("%s: %v, want ErrConfig naming %s", tc.name, err, tc.field)
		}
	}
	// A nested error also matches its own package's sentinel.
	_, err := NewConsumer(ConsumerConfig{Path: pair.B, Plaintext: true, Advanced: ConsumerAdvanced{ReplayClient: ReplayClientTuning{Jitter: 2}}})
	if !errors.Is(err, replay.ErrConfig) || strings.Contains(err.Error(), "replay: invalid") {
		t.Errorf("nested error %v: want replay.ErrConfig matched, prefix not repeated", err)
	}
}

// TestConsumerStopDuringCatchUp: deliver returning ErrStop during the
// catch-up before going live ends Run there: nil error, the tip file at
// the stopping record, no Live event and no NAK (a loop started anyway
// would NAK the whole stream).
func TestConsumerStopDuringCatchUp(t *testing.T) {
	dir := t.TempDir()
	c, err := NewConsumer(ConsumerConfig{Local: loopback, NoCatchUp: true})
	if err != nil {
		t.Fatal(err)
	}
	to := c.Addr()
	c.Close() // nobody listens: everything is caught up over TCP
	p, err := NewProducer(ProducerConfig{To: to, Dir: dir, Replay: true, Plaintext: true, Idle: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	publishN(t, p, 500)
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	tipPath := dir + "/tip"
	var events []EventKind
	c, err = NewConsumer(ConsumerConfig{Local: to, From: p.Addr(), Plaintext: true, TipPath: tipPath, Idle: quiet,
		OnEvent: func(e Event) { events = append(events, e.Kind) }})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Run(ctx, func(r Record) error {
		if r.Seq == 300 {
			return ErrStop
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s := c.Stats()
	if s.Tip != 300 || s.TCPRecords != 300 || s.UDPRecords != 0 || s.Receiver.NaksSent != 0 {
		t.Errorf("stats %+v", s)
	}
	if len(events) != 1 || events[0] != EventCatchingUp {
		t.Errorf("events %v, want [catching_up]", events)
	}
	if tip, err := replay.ReadTip(tipPath); err != nil || tip != 300 {
		t.Errorf("tip file %d, %v", tip, err)
	}
}

// runUntil runs c until it delivers seq stop (its callback returns
// ErrStop there); got holds the delivered seqs, valid once done yields
// Run's result.
func runUntil(ctx context.Context, c *Consumer, stop uint64) (got *[]uint64, done <-chan error) {
	got = new([]uint64)
	ch := make(chan error, 1)
	go func() {
		ch <- c.Run(ctx, func(r Record) error {
			*got = append(*got, r.Seq)
			if r.Seq == stop {
				return ErrStop
			}
			return nil
		})
	}()
	return got, ch
}

// waitRun waits for runUntil's Run to end, without an error.
func waitRun(t *testing.T, c *Consumer, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("Run did not end: %+v", c.Stats())
	}
}
