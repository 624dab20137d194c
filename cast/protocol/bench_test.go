package protocol

import (
	"net/netip"
	"testing"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/wire"
)

// The benchmarks time the core without I/O: the cost per record that a
// datapath adds its syscalls to. Compare with the reference's figures
// (spec §10).

func BenchmarkCRC128(b *testing.B) {
	p := make([]byte, 128)
	b.SetBytes(128)
	b.ReportAllocs()
	var x uint32
	for b.Loop() {
		x += wire.CRC(p)
	}
	_ = x
}

// BenchmarkSend frames 128-byte payloads, with Send one record an op and
// with SendBatch 64 records a call (a 144-byte frame's batch; ns/record
// is then per record).
func BenchmarkSend(b *testing.B) {
	for _, tc := range []struct {
		name string
		log  Log
	}{
		{"WAL-less", nil},
		{"in-memory log", &preLog{next: 1, buf: make([]byte, 4096)}},
	} {
		for _, batched := range []bool{false, true} {
			name := tc.name
			if batched {
				name += "/SendBatch"
			}
			b.Run(name, func(b *testing.B) {
				s, err := NewSender(senderCfg(), tc.log)
				if err != nil {
					b.Fatal(err)
				}
				out := batch.New(64, 2048)
				p := make([]byte, 128)
				ps := make([][]byte, 64)
				for i := range ps {
					ps[i] = p
				}
				b.ReportAllocs()
				for b.Loop() {
					if batched {
						out.Reset()
						_, _ = s.SendBatch(100, ps, 0, out)
						continue
					}
					if out.Full() {
						out.Reset()
					}
					_, _ = s.Send(100, p, 0, out)
				}
				if batched {
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ps)), "ns/record")
				}
			})
		}
	}
}

// frames returns n data frames with seqs 1..n and 128-byte payloads.
func frames(n int) [][]byte {
	fs := make([][]byte, n)
	for i := range fs {
		fs[i] = frame(uint64(i+1), 128)
	}
	return fs
}

func BenchmarkReceiverHandle(b *testing.B) {
	fs := frames(1 << 16)
	var sink int
	deliver := func(_ wire.Header, p []byte) { sink += len(p) }
	b.Run("in order", func(b *testing.B) {
		r, _ := NewReceiver(DefaultReceiverConfig())
		out := batch.New(64, 2048)
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			if i == len(fs) {
				r.Resync()
				i = 0
			}
			r.Handle(fs[i], 0, out, deliver)
			i++
		}
	})
	b.Run("in order, HandleRun of 64", func(b *testing.B) {
		// The batch a loop reads, in one call: ns/op is per batch.
		r, _ := NewReceiver(DefaultReceiverConfig())
		out, in := batch.New(64, 2048), batch.New(64, 2048)
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			if i == len(fs) {
				r.Resync()
				i = 0
			}
			in.Reset()
			for _, f := range fs[i : i+64] {
				in.AppendView(f, netip.AddrPort{})
			}
			r.HoldStatus()
			r.HandleRun(in, 0, 64, 0, out, deliver)
			r.ReleaseStatus(0, out)
			out.Reset()
			i += 64
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*64), "ns/record")
	})
	b.Run("pairs swapped", func(b *testing.B) {
		// Every second record arrives one position early: buffered, one
		// NAK-free drain (the gap is filled before any pump is due).
		cfg := DefaultReceiverConfig()
		r, _ := NewReceiver(cfg)
		out := batch.New(1024, 2048)
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			if i == len(fs) {
				r.Resync()
				i = 0
			}
			j := i ^ 1
			r.Handle(fs[j], 0, out, deliver)
			i++
			if out.Full() {
				out.Reset()
			}
		}
	})
}

func BenchmarkNakEncode(b *testing.B) {
	buf := make([]byte, wire.ControlFrameSize)
	b.ReportAllocs()
	for b.Loop() {
		wire.PutNakFrame(buf, wire.Nak{From: 12345, Count: 3})
	}
}

func BenchmarkNakDecode(b *testing.B) {
	f := nakFrame(12345, 3)
	b.ReportAllocs()
	var sum uint64
	for b.Loop() {
		_, p, _, err := wire.DecodeFrame(f)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := wire.ParseNak(p)
		sum += n.Count
	}
	_ = sum
}

func BenchmarkHeaderEncodeDecode(b *testing.B) {
	buf := make([]byte, wire.HeaderSize)
	h := wire.Header{Type: 100, Len: 128, CRC: 0xdeadbeef}
	b.Run("encode", func(b *testing.B) {
		for b.Loop() {
			h.Put(buf)
		}
	})
	b.Run("decode", func(b *testing.B) {
		h.Put(buf)
		for b.Loop() {
			_, _ = wire.ParseHeader(buf)
		}
	})
}

// BenchmarkNakServiceHot serves a NAK for one seq from the hot ring:
// verify (version, len, CRC, source), clamp, copy the frame into the batch.
func BenchmarkNakServiceHot(b *testing.B) {
	cfg := senderCfg()
	cfg.RetxDedupWindow = -1 // no dedup
	s, _ := NewSender(cfg, nil)
	out := batch.New(64, 2048)
	p := make([]byte, 128)
	for i := 0; i < 100; i++ {
		_, _ = s.Send(100, p, 0, out)
		out.Reset()
	}
	nak := nakFrame(50, 1)
	b.ReportAllocs()
	for b.Loop() {
		out.Reset()
		s.Handle(nak, mem.AddrB, 0, out)
	}
}

func BenchmarkHeartbeat(b *testing.B) {
	s, _ := NewSender(senderCfg(), nil)
	out := batch.New(64, 2048)
	r, _ := NewReceiver(DefaultReceiverConfig())
	r.ResetAfterReplay(0)
	hb := hbFrame(0)
	now := int64(0)
	b.Run("Sender.Tick", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out.Reset()
			now += int64(DefaultHeartbeatInterval)
			s.Tick(now, out)
		}
	})
	b.Run("Receiver.Handle", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r.Handle(hb, 0, out, nil)
		}
	})
}
