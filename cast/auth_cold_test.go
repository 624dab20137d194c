package cast

import (
	"context"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/wire"
)

// Turning keys on over a log written without them keeps serving repairs:
// a keyed producer retransmits a record the unkeyed run wrote at the full
// MaxFrame (its datagram, with the trailer, is larger than MaxFrame), and
// a record larger than even that is skipped and counted, not retried
// forever: the loop goes on and Close returns.
func TestProducerKeysOverUnkeyedLog(t *testing.T) {
	const n, size = 1000, protocol.DefaultMaxFrame - wire.HeaderSize // 1456-byte payloads
	dir := t.TempDir()
	nfc := ProducerAdvanced{Sender: SenderTuning{NoFlowControl: true}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pair := mem.NewPair(1)
	p, err := NewProducer(ProducerConfig{Dir: dir, To: mem.AddrB, Path: pair.A, Idle: quiet, Advanced: nfc})
	if err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, size)
	for range n {
		if err := p.Publish(ctx, 100, payload); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name     string
		maxFrame int
		served   bool
	}{
		{name: "default MaxFrame", served: true},
		{name: "MaxFrame below the log's frames", maxFrame: 1200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pair := mem.NewPair(1)
			adv := nfc
			adv.Sender.MaxFrame = tc.maxFrame
			p, err := NewProducer(ProducerConfig{Dir: dir, To: mem.AddrB, Path: pair.A, Idle: quiet, Keys: testKeys, Advanced: adv})
			if err != nil {
				t.Fatal(err)
			}
			closed := make(chan error, 1)
			defer func() {
				go func() { closed <- p.Close() }()
				select {
				case err := <-closed:
					if err != nil {
						t.Fatal(err)
					}
				case <-time.After(30 * time.Second):
					t.Fatal("Close did not return: the loop thread is stuck")
				}
			}()
			// A receiver's sealed NAK for seq 5, which only the log holds.
			s, err := wire.NewSealer(testKeys.Send, NewEpoch())
			if err != nil {
				t.Fatal(err)
			}
			v := batch.New(1, protocol.MaxDatagram)
			b := v.Next()
			v.Commit(s.Seal(b, wire.PutNakFrame(b, wire.Nak{From: 5, Count: 1})), mem.AddrA)
			if _, err := pair.B.Send(v); err != nil {
				t.Fatal(err)
			}
			op, err := wire.NewOpener(testKeys.all()...)
			if err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(20 * time.Second)
			for time.Now().Before(deadline) {
				if tc.served && retransmitted(t, pair.B, op, 5) == size {
					return
				}
				if !tc.served && p.Stats().Loop.ColdTooLarge == 1 {
					if st := p.Stats(); st.Sender.RetxCold != 0 {
						t.Fatalf("a record too large for the datagrams was sent: %+v", st.Sender)
					}
					return
				}
				time.Sleep(time.Millisecond)
			}
			t.Fatalf("no outcome for the NAK: %+v", p.Stats().Loop)
		})
	}
}

// retransmitted reads end once and returns the payload size of data
// record seq in an authenticated datagram (0: none).
func retransmitted(t *testing.T, end *mem.End, op *wire.Opener, seq uint64) int {
	t.Helper()
	v := batch.New(64, protocol.MaxDatagram)
	k, err := end.Recv(v)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < k; i++ {
		d, from := v.Msg(i)
		n, err := op.Open(d, from)
		if err != nil {
			t.Fatalf("a datagram of %d bytes from %v does not verify: %v", len(d), from, err)
		}
		for d = d[:n]; len(d) > 0; {
			h, p, size, err := wire.DecodeFrame(d)
			if err != nil {
				t.Fatal(err)
			}
			if h.Type == 100 && wire.Seq(p) == seq {
				return len(p)
			}
			d = d[size:]
		}
	}
	return 0
}
