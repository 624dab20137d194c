package cast

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/replay"
	"github.com/walcast/walcast/wire"
)

// countData reads end until it is empty and returns the data records it
// held (coalesced datagrams included), checking that their seqs run
// from 1 without a hole.
func countData(t testing.TB, end *mem.End) int {
	t.Helper()
	v := batch.New(64, 65536)
	n := 0
	for {
		k, err := end.Recv(v)
		if err != nil {
			t.Fatal(err)
		}
		if k == 0 {
			return n
		}
		for i := 0; i < k; i++ {
			d, _ := v.Msg(i)
			for len(d) > 0 {
				h, p, size, err := wire.DecodeFrame(d)
				if err != nil {
					t.Fatal(err)
				}
				if h.Type == 100 {
					n++
					if s := wire.Seq(p); s != uint64(n) {
						t.Fatalf("record %d carries seq %d", n, s)
					}
				}
				d = d[size:]
			}
		}
	}
}

// TestProducerCloseDrains publishes a random number of records and
// closes at once, 1,000 times: every record Publish accepted has been
// sent when Close returns (the loop must not stop with records queued).
func TestProducerCloseDrains(t *testing.T) {
	cycles := closeCycles()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range cycles {
		pair := mem.NewPair(1)
		p, err := NewProducer(ProducerConfig{To: mem.AddrB, Path: pair.A, Idle: quiet, Advanced: ProducerAdvanced{PublishSlots: 64, Sender: smallRing}})
		if err != nil {
			t.Fatal(err)
		}
		n := 1 + rng.IntN(300) // up to ~5 publish queues' worth
		publishN(t, p, n)
		if err := p.Close(); err != nil {
			t.Fatalf("cycle %d: Close: %v", i, err)
		}
		if s := p.Stats(); s.Published != uint64(n) || s.Sent != uint64(n) || s.Sender.Sent != uint64(n) {
			t.Fatalf("cycle %d: published %d, stats %+v", i, n, s)
		}
		if got := countData(t, pair.B); got != n {
			t.Fatalf("cycle %d: %d of %d records reached the network", i, got, n)
		}
	}
}

// publishN publishes n 64-byte records of type 100, failing t on an
// error.
func publishN(t testing.TB, p *Producer, n int) {
	t.Helper()
	payload := make([]byte, 64)
	for range n {
		if err := p.Publish(context.Background(), 100, payload); err != nil {
			t.Fatal(err)
		}
	}
}

// closeCycles is how many times the Close tests publish and close:
// 1,000, fewer under -race (TestLarge* and
// stress-test run them at full count without it) and with -short.
func closeCycles() int {
	switch {
	case testing.Short():
		return 100
	case raceSlowdown > 1:
		return 1000 / raceSlowdown
	}
	return 1000
}

// smallRing is a Sender with a 512-slot hot ring: a Close cycle's
// records fit, and it is quicker to make than the default 4096 slots.
var smallRing = SenderTuning{RingSlots: 512}

// TestProducerCloseDrainsWAL: the same with a WAL over a real socket, a
// smaller number of times: every accepted record was sent and is durable.
func TestProducerCloseDrainsWAL(t *testing.T) {
	dir := t.TempDir()
	var last uint64
	for i := range 50 {
		c, err := NewConsumer(ConsumerConfig{Local: loopback, NoCatchUp: true})
		if err != nil {
			t.Fatal(err)
		}
		p, err := NewProducer(ProducerConfig{To: c.Addr(), Dir: dir, Idle: quiet})
		if err != nil {
			t.Fatal(err)
		}
		n := 1 + i*37%500
		publishN(t, p, n)
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		s := p.Stats()
		if s.Sent != uint64(n) || s.LastSeq != last+uint64(n) || s.Durable < s.LastSeq {
			t.Fatalf("cycle %d: %d published, stats %+v (last seq before %d)", i, n, s, last)
		}
		last = s.LastSeq
		c.Close()
	}
}

var loopback = netip.MustParseAddrPort("127.0.0.1:0")

// TestProducerRefusesBadRecords: Publish returns the error at once for a
// record the stream would drop later, and ErrClosed after Close.
func TestProducerRefusesBadRecords(t *testing.T) {
	pair := mem.NewPair(1)
	p, err := NewProducer(ProducerConfig{To: mem.AddrB, Path: pair.A, Idle: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		typ  uint16
		n    int
	}{
		{"NAK type", wire.TypeNak, 64},
		{"heartbeat type", wire.TypeHeartbeat, 64},
		{"Status type", wire.TypeStatus, 64},
		{"4-byte payload", 100, 4},
		{"empty payload", 100, 0},
		{"payload beyond the frame", 100, protocol.DefaultMaxFrame},
	} {
		if err := p.Publish(ctx, tc.typ, make([]byte, tc.n)); !errors.Is(err, ErrRecord) {
			t.Errorf("%s: Publish = %v, want ErrRecord", tc.name, err)
		}
		if err := p.TryPublish(tc.typ, make([]byte, tc.n)); !errors.Is(err, ErrRecord) {
			t.Errorf("%s: TryPublish = %v, want ErrRecord", tc.name, err)
		}
	}
	if err := p.Publish(ctx, 100, make([]byte, protocol.DefaultMaxFrame-wire.HeaderSize)); err != nil {
		t.Fatalf("largest record refused: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); s.Loop.PublishErrs != 0 || s.Sent != 1 {
		t.Fatalf("%+v", s)
	}
	if err := p.Publish(ctx, 100, make([]byte, 64)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Publish after Close = %v", err)
	}
}

// TestLoopPublishRefusesBadRecords: the Loop's own Publish checks too.
func TestLoopPublishRefusesBadRecords(t *testing.T) {
	pair := mem.NewPair(1)
	snd, _ := protocol.NewSender(protocol.SenderConfig{}, nil)
	l, err := NewLoop(LoopConfig{Path: pair.A, Sender: snd, SendRing: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, tc := range []struct {
		typ  uint16
		n    int
		want error
	}{
		{wire.TypeNak, 64, protocol.ErrControlType},
		{100, 4, protocol.ErrPayloadShort},
		{100, 4000, protocol.ErrFrameTooLarge},
	} {
		if err := l.Publish(tc.typ, make([]byte, tc.n)); err != tc.want {
			t.Errorf("type %#x, %d bytes: %v, want %v", tc.typ, tc.n, err, tc.want)
		}
	}
}

// TestProducerConfigMisuse: each misuse fails in NewProducer, with
// ErrConfig and the field named.
func TestProducerConfigMisuse(t *testing.T) {
	pki, err := replay.NewDevPKI(nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	srvTLS, _ := pki.ServerTLS(false)
	dir := t.TempDir()
	for _, tc := range []struct {
		name, field string
		cfg         ProducerConfig
	}{
		{"no destination", "To", ProducerConfig{}},
		{"replay without a WAL", "Replay", ProducerConfig{To: mem.AddrB, Replay: true, Plaintext: true}},
		{"replay without TLS", "Advanced.ReplayServer", ProducerConfig{To: mem.AddrB, Dir: dir, Replay: true}},
		{"replay TLS and plaintext", "Advanced.ReplayServer", ProducerConfig{To: mem.AddrB, Dir: dir, Replay: true, TLS: srvTLS, Plaintext: true}},
		{"ring not a power of two", "Advanced.Sender", ProducerConfig{To: mem.AddrB, Advanced: ProducerAdvanced{Sender: SenderTuning{RingSlots: 1000}}}},
		{"bad segment size", "Advanced.WAL", ProducerConfig{To: mem.AddrB, Dir: dir, Advanced: ProducerAdvanced{WAL: WALTuning{SegmentSize: 10}}}},
		{"negative queue", "Advanced.PublishSlots", ProducerConfig{To: mem.AddrB, Advanced: ProducerAdvanced{PublishSlots: -1}}},
		{"CPU without Pin", "Thread", ProducerConfig{To: mem.AddrB, Thread: affinity.Config{Pin: false, CPU: 3}}},
		{"pinned to a CPU that does not exist", "", ProducerConfig{To: mem.AddrB, Thread: affinity.OnCPU(100000)}},
	} {
		_, err := NewProducer(tc.cfg)
		if !errors.Is(err, ErrConfig) || !containsField(err, tc.field) {
			t.Errorf("%s: %v, want ErrConfig naming %s", tc.name, err, tc.field)
		}
	}
}

// containsField: err names field (any err when field is empty).
func containsField(err error, field string) bool {
	return err != nil && (field == "" || strings.Contains(err.Error(), "invalid configuration: "+field))
}

// TestGOMAXPROCS: by default a spinning loop leaves GOMAXPROCS alone;
// with RaiseGOMAXPROCS it raises it and the value comes back when it
// stops; a failed Start undoes it.
func TestGOMAXPROCS(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	start := func(raise bool, thread affinity.Config) (*Loop, error) {
		pair := mem.NewPair(1)
		snd, _ := protocol.NewSender(protocol.SenderConfig{}, nil)
		return StartLoop(LoopConfig{Path: pair.A, Sender: snd, RaiseGOMAXPROCS: raise, Thread: thread})
	}
	l, err := start(false, affinity.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Errorf("default: GOMAXPROCS %d, want 1 (left alone)", n)
	}
	l.Close()
	if l, err = start(true, affinity.Config{}); err != nil {
		t.Fatal(err)
	}
	if n := runtime.GOMAXPROCS(0); n != 3 {
		t.Errorf("RaiseGOMAXPROCS: GOMAXPROCS %d with one spinning loop, want 3", n)
	}
	l.Close()
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Errorf("GOMAXPROCS %d after the loop stopped, want 1 back", n)
	}
	if runtime.GOOS == "linux" {
		// A CPU that does not exist: the thread cannot be placed.
		if _, err := start(true, affinity.OnCPU(1000)); err == nil {
			t.Fatal("placed on CPU 1000")
		}
		if n := runtime.GOMAXPROCS(0); n != 1 {
			t.Errorf("GOMAXPROCS %d after a failed Start, want 1", n)
		}
	}
}
