package replay

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/walcast/walcast/wire"
)

// FuzzClientStream feeds arbitrary bytes to the client as a server's
// stream: it must never panic, and every record it delivers must be the
// next seq after its tip.
func FuzzClientStream(f *testing.F) {
	var seed []byte
	for seq := uint64(1); seq <= 3; seq++ {
		seed = append(seed, dataFrame(seq, 64)...)
	}
	var cu [wire.CaughtUpFrameSize]byte
	wire.PutCaughtUpFrame(cu[:], wire.CaughtUp{Stream: 1, LiveSeq: 3})
	f.Add(append(seed, cu[:]...))
	var na [wire.ControlFrameSize]byte
	wire.PutNotAvailableFrame(na[:], wire.NotAvailable{Requested: 1, Oldest: 5, Highest: 9, Stream: 1})
	f.Add(na[:])
	f.Add(seed[:40])
	f.Fuzz(func(t *testing.T, stream []byte) {
		cfg := DefaultClientConfig()
		cfg.Endpoints = []string{"fuzz"}
		cfg.Plaintext = true
		cfg.ReadTimeout = 50 * time.Millisecond
		cfg.BufferBytes = 4096
		cl, err := NewClient(cfg)
		if err != nil {
			t.Fatal(err)
		}
		a, b := net.Pipe()
		go func() { b.Write(stream); b.Close() }()
		_, _ = cl.session(context.Background(), a, a, "fuzz", func(h wire.Header, p []byte) error {
			if wire.Seq(p) != cl.Tip()+1 {
				t.Fatalf("delivered seq %d after tip %d", wire.Seq(p), cl.Tip())
			}
			return nil
		}, nil)
	})
}

// FuzzServerRequest feeds arbitrary bytes to the server as a request:
// readRequest must never panic and only accept a verified request frame.
func FuzzServerRequest(f *testing.F) {
	var req [wire.ControlFrameSize]byte
	wire.PutReplicationRequestFrame(req[:], wire.ReplicationRequest{Stream: 1, From: 2})
	f.Add(req[:])
	f.Add(req[:20])
	f.Fuzz(func(t *testing.T, in []byte) {
		a, b := net.Pipe()
		go func() { b.Write(in); b.Close() }()
		_ = a.SetDeadline(time.Now().Add(time.Second))
		r, err := readRequest(a)
		a.Close()
		if err == nil {
			if _, p, _, derr := wire.DecodeFrame(in); derr != nil || len(p) < wire.ControlPayloadSize {
				t.Fatalf("accepted %x as request %+v", in, r)
			}
		}
	})
}
