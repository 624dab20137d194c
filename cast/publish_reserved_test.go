package cast

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/wire"
)

// senderVerdicts returns, for every record type, whether protocol.Sender
// refuses it as data (nothing else can refuse an 8-byte record without
// flow control), checked against wire.Reserved: the rule every entry
// point must share.
func senderVerdicts(t *testing.T) []bool {
	t.Helper()
	snd, err := protocol.NewSender(protocol.SenderConfig{NoFlowControl: true, RingSlots: 64}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := batch.New(64, 2048)
	payload := make([]byte, 8)
	refused := make([]bool, 1<<16)
	for i := range refused {
		typ := uint16(i)
		_, err := snd.Send(typ, payload, 1, out)
		if err == protocol.ErrBatchFull {
			out.Reset()
			_, err = snd.Send(typ, payload, 1, out)
		}
		refused[i] = err != nil
		if refused[i] != wire.Reserved(typ) || (err != nil && !errors.Is(err, wire.ErrReserved)) {
			t.Errorf("Sender.Send(type %#x) = %v, wire.Reserved = %v", typ, err, wire.Reserved(typ))
		}
	}
	return refused
}

// TestPublishReservedTypes: Producer.Publish, Producer.TryPublish and
// Loop.Publish decide every record type 0x0000–0xFFFF as Sender.Send
// does, at once (a reserved type fails before the call returns, with an
// error matching wire.ErrReserved), and a refused record never faults
// them: good records published afterwards are sent and Flush succeeds.
// A producer that took a reserved type and refused it only on its loop
// thread would fail every later Publish and Flush.
func TestPublishReservedTypes(t *testing.T) {
	refused := senderVerdicts(t)
	payload := make([]byte, 64)

	t.Run("Producer", func(t *testing.T) {
		pair := mem.NewPair(1)
		p, err := NewProducer(ProducerConfig{To: mem.AddrB, Path: pair.A, Idle: quiet,
			Advanced: ProducerAdvanced{Sender: SenderTuning{NoFlowControl: true, RingSlots: 512}}})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		accepted, bad := 0, 0
		for i := range refused {
			typ := uint16(i)
			err := p.Publish(ctx, typ, payload)
			if got := err != nil; got != refused[i] || (got && !(errors.Is(err, ErrRecord) && errors.Is(err, wire.ErrReserved))) {
				t.Errorf("Publish(type %#x) = %v; the Sender refuses it: %v", typ, err, refused[i])
				if bad++; bad == 10 {
					t.FailNow()
				}
			}
			if err == nil {
				accepted++
			}
			if refused[i] {
				// TryPublish takes the same check.
				if err := p.TryPublish(typ, payload); !errors.Is(err, ErrRecord) || !errors.Is(err, wire.ErrReserved) {
					t.Errorf("TryPublish(type %#x) = %v", typ, err)
				}
			}
		}
		for range 3 {
			if err := p.Publish(ctx, 100, payload); err != nil {
				t.Fatalf("good record after the refused ones: %v", err)
			}
			accepted++
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatalf("Flush after refused records: %v", err)
		}
		if err := p.Err(); err != nil {
			t.Fatalf("producer faulted: %v", err)
		}
		if s := p.Stats(); s.Sent != uint64(accepted) || s.Loop.PublishErrs != 0 {
			t.Fatalf("accepted %d, stats %+v", accepted, s)
		}
	})

	t.Run("Loop", func(t *testing.T) {
		pair := mem.NewPair(1)
		snd, err := protocol.NewSender(protocol.SenderConfig{NoFlowControl: true, RingSlots: 64}, nil)
		if err != nil {
			t.Fatal(err)
		}
		l, err := NewLoop(LoopConfig{Path: pair.A, Sender: snd, SendRing: 8})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		// The loop is not started yet: an accepted record is taken back
		// off the ring at once, so only the verdict is checked here.
		for i := range refused {
			typ := uint16(i)
			err := l.Publish(typ, payload)
			if got := err != nil; got != refused[i] || (got && !errors.Is(err, wire.ErrReserved)) {
				t.Errorf("Loop.Publish(type %#x) = %v; the Sender refuses it: %v", typ, err, refused[i])
			}
			if err == nil {
				l.sendRing.Pop()
			}
		}
		if err := l.Start(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for range 3 {
			if err := l.PublishWait(ctx, 100, payload); err != nil {
				t.Fatalf("good record after the refused ones: %v", err)
			}
		}
		for l.SenderStats().Sent < 3 {
			if ctx.Err() != nil {
				t.Fatalf("records not sent: %+v", l.SenderStats())
			}
			time.Sleep(time.Millisecond)
		}
		if err := l.SendErr(); err != nil {
			t.Fatalf("loop refused a queued record: %v", err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if got := countData(t, pair.B); got != 3 {
			t.Fatalf("%d of 3 good records reached the network", got)
		}
	})
}

// TestPublishSizes: Loop.Publish and Producer.Publish refuse at once, with
// the Sender's own error, every record the loop thread would refuse for
// its size, and accept every other one, which is then sent: around each
// limit (the loop's Slot, the Sender's MaxFrame, the trailer with keys),
// keys on and off. A record Publish took and the loop thread refused
// would be lost with nothing but SendErr to say so.
func TestPublishSizes(t *testing.T) {
	sizes := func(limits ...int) []int {
		var s []int
		for _, l := range limits {
			if l > 8 {
				s = append(s, l-1, l, l+1)
			}
		}
		return s
	}
	for _, tc := range []struct {
		name  string
		slot  int   // 0: the default
		keys  *Keys // nil: off
		limit int   // the largest payload sent
	}{
		{name: "slot 4096, default sender", slot: 4096, limit: protocol.DefaultMaxFrame - wire.HeaderSize},
		{name: "slot 4096, default sender, keys", slot: 4096, keys: testKeys, limit: protocol.DefaultMaxFrame - wire.HeaderSize},
		{name: "default slot, keys", keys: testKeys, limit: protocol.DefaultMaxFrame - wire.TrailerSize - wire.HeaderSize},
		{name: "slot 1200", slot: 1200, limit: 1200 - wire.HeaderSize},
		{name: "slot 1200, keys", slot: 1200, keys: testKeys, limit: 1200 - wire.TrailerSize - wire.HeaderSize},
	} {
		t.Run("Loop/"+tc.name, func(t *testing.T) {
			pair := mem.NewPair(1)
			snd, err := protocol.NewSender(protocol.SenderConfig{NoFlowControl: true, RingSlots: 64}, nil)
			if err != nil {
				t.Fatal(err)
			}
			l, err := NewLoop(LoopConfig{Path: pair.A, Sender: snd, SendRing: 8, Slot: tc.slot, Keys: tc.keys})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if err := l.Start(); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			sent := uint64(0)
			for _, n := range sizes(tc.limit, tc.limit+wire.TrailerSize, protocol.DefaultMaxFrame-wire.HeaderSize, tc.slot-wire.HeaderSize) {
				err := l.Publish(100, make([]byte, n))
				if want := n <= tc.limit; (err == nil) != want || (err != nil && !errors.Is(err, protocol.ErrFrameTooLarge)) {
					t.Fatalf("Publish of %d bytes (limit %d) = %v", n, tc.limit, err)
				}
				if err != nil {
					continue
				}
				sent++
				for got, _ := l.Sent(); got < sent; got, _ = l.Sent() {
					if err := l.WaitProgress(ctx); err != nil {
						t.Fatalf("record of %d bytes not taken: %v", n, err)
					}
				}
				if err := l.SendErr(); err != nil {
					t.Fatalf("Publish took %d bytes, the loop refused them: %v", n, err)
				}
			}
		})
	}
	for _, keys := range []*Keys{nil, testKeys} {
		limit := protocol.DefaultMaxFrame - wire.HeaderSize
		if keys != nil {
			limit -= wire.TrailerSize
		}
		t.Run(fmt.Sprintf("Producer/keys=%v", keys != nil), func(t *testing.T) {
			pair := mem.NewPair(1)
			p, err := NewProducer(ProducerConfig{To: mem.AddrB, Path: pair.A, Idle: quiet, Keys: keys,
				Advanced: ProducerAdvanced{Sender: SenderTuning{NoFlowControl: true, RingSlots: 64}}})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for _, n := range sizes(limit, limit+wire.TrailerSize) {
				err := p.Publish(ctx, 100, make([]byte, n))
				if want := n <= limit; (err == nil) != want || (err != nil && !errors.Is(err, ErrRecord)) {
					t.Fatalf("Publish of %d bytes (limit %d) = %v", n, limit, err)
				}
				if err := p.TryPublish(100, make([]byte, n)); (err == nil) != (n <= limit) && err != ErrRingFull {
					t.Fatalf("TryPublish of %d bytes (limit %d) = %v", n, limit, err)
				}
			}
			if err := p.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if s := p.Stats(); s.Loop.PublishErrs != 0 || p.Err() != nil {
				t.Fatalf("the loop refused published records: %+v, %v", s.Loop, p.Err())
			}
		})
	}
}
