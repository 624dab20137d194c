package protocol

import (
	"fmt"
	"testing"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/wire"
)

// layout describes out's messages as their seqs, a message per group:
// "[1 2] [3]" is two datagrams, the first holding frames 1 and 2.
func layout(t *testing.T, out *batch.Vec) string {
	t.Helper()
	s := ""
	for i := range out.Len() {
		m, to := out.Msg(i)
		if to != mem.AddrB {
			t.Fatalf("message %d to %v", i, to)
		}
		var seqs []uint64
		for len(m) > 0 {
			h, p, n, err := wire.DecodeFrame(m)
			if err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
			if wire.UDPControl(h.Type) {
				seqs = append(seqs, 0)
			} else {
				seqs = append(seqs, wire.Seq(p))
			}
			m = m[n:]
		}
		if s != "" {
			s += " "
		}
		s += fmt.Sprint(seqs)
	}
	return s
}

// TestEmitter: without Coalesce every frame is a datagram; with it,
// consecutive seqs share a datagram up to MaxFrame bytes, and anything
// else (a gap, a reset batch, a foreign message in its place, a full
// slot) starts a new one.
func TestEmitter(t *testing.T) {
	type emit struct {
		seq   uint64
		reset bool // out.Reset() first
		nak   bool // append a NAK (another sender of frames) first
	}
	for _, c := range []struct {
		name     string
		coalesce bool
		maxFrame int
		emits    []emit
		want     string
	}{
		{"plain", false, 1472, []emit{{seq: 1}, {seq: 2}, {seq: 3}}, "[1] [2] [3]"},
		{"consecutive seqs join", true, 1472, []emit{{seq: 1}, {seq: 2}, {seq: 3}}, "[1 2 3]"},
		{"a gap starts a datagram", true, 1472, []emit{{seq: 1}, {seq: 2}, {seq: 4}, {seq: 5}}, "[1 2] [4 5]"},
		{"MaxFrame bounds a datagram", true, 250, []emit{{seq: 1}, {seq: 2}, {seq: 3}, {seq: 4}}, "[1 2] [3 4]"},
		{"a reset batch starts over", true, 1472, []emit{{seq: 1}, {seq: 2, reset: true}, {seq: 3}}, "[2 3]"},
		{"a foreign message in its place", true, 1472, []emit{{seq: 1}, {seq: 2, reset: true, nak: true}, {seq: 3}}, "[0] [2 3]"},
		{"a NAK after it ends it", true, 1472, []emit{{seq: 1}, {seq: 2, nak: true}}, "[1] [0] [2]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := emitter{dest: mem.AddrB, coalesce: c.coalesce, maxFrame: c.maxFrame}
			out := batch.New(8, 2048)
			for _, m := range c.emits {
				if m.reset {
					out.Reset()
				}
				if m.nak {
					out.Append(nakFrame(1, 1), mem.AddrB)
				}
				if !e.emit(frame(m.seq, 100), m.seq, out) {
					t.Fatalf("emit %d: no room", m.seq)
				}
			}
			if got := layout(t, out); got != c.want {
				t.Fatalf("datagrams %s, want %s", got, c.want)
			}
		})
	}
	e := emitter{dest: mem.AddrB}
	out := batch.New(1, 2048)
	if !e.emit(frame(1, 8), 1, out) || e.emit(frame(2, 8), 2, out) {
		t.Fatal("a full batch took a frame")
	}
}
