package benchkit

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/wire"
)

// Every cost row moves records and accounts for both threads: CPU time
// at least the idle part, every record sent delivered on the lossless
// rows (no timing is asserted).
func TestCostRows(t *testing.T) {
	c := DefaultThroughputConfig()
	c.Duration, c.CPUs, c.Dir = 30*time.Millisecond, [2]int{-1, -1}, t.TempDir()
	for _, size := range []int{144, 1443} {
		c.Size = size
		for _, name := range CostRows {
			r, err := Cost(name, c)
			if err != nil {
				t.Fatalf("%s %d B: %v", name, size, err)
			}
			if r.Sent == 0 || r.Delivered == 0 || r.Seconds <= 0 {
				t.Fatalf("%s %d B moved nothing: %+v", name, size, r)
			}
			if r.Send.CPU <= 0 || r.Send.IdleCPU > r.Send.CPU || r.Send.Idle > r.Send.Iters {
				t.Fatalf("%s %d B: sender account %+v", name, size, r.Send)
			}
			if name != "wal-alone" && (r.Recv.CPU <= 0 || r.Recv.IdleCPU > r.Recv.CPU) {
				t.Fatalf("%s %d B: receiver account %+v", name, size, r.Recv)
			}
			raw := name == "floor-gso-gro" || name == "floor+frame" || name == "datapath" || name == "+framing/crc" || name == "+ring-copy"
			if !raw && r.Delivered != r.Sent {
				t.Fatalf("%s %d B: %d sent, %d delivered", name, size, r.Sent, r.Delivered)
			}
			if r.Note != "" && (name == "+framing/crc" || name == "+ring-copy") || strings.Contains(r.Note, "bad") {
				t.Fatalf("%s %d B: %s", name, size, r.Note)
			}
		}
	}
	if _, err := Cost("nope", c); err == nil {
		t.Fatal("an unknown row ran")
	}
}

// TestFloorBatchFramed: floor+frame's batches are sealed frames with
// consecutive seqs from 1, back to back in a ring of whole batches at
// least as large as the hot ring, that wraps to its start; checkFrames
// takes them and refuses a flipped bit.
func TestFloorBatchFramed(t *testing.T) {
	c := DefaultThroughputConfig()
	c.Size = 1443
	f := newFloorBatch(c, true)
	if f.per != 45 || len(f.ring)%(f.per*c.Size) != 0 || len(f.ring)/c.Size < protocol.DefaultSendRingSlots {
		t.Fatalf("per %d, ring of %d frames", f.per, len(f.ring)/c.Size)
	}
	batches := len(f.ring) / len(f.out)
	seq := uint64(1)
	for i := 0; i <= batches; i++ {
		b := f.next()
		if i == batches && &b[0] != &f.ring[0] {
			t.Fatal("the ring did not wrap to its start")
		}
		if !checkFrames(b) {
			t.Fatalf("batch %d: a frame does not check", i)
		}
		for j := 0; j < f.per; j++ {
			fr := b[j*c.Size : (j+1)*c.Size]
			if got := binary.LittleEndian.Uint64(fr[wire.HeaderSize:]); got != seq {
				t.Fatalf("batch %d frame %d: seq %d, want %d", i, j, got, seq)
			}
			seq++
		}
		f.sent()
	}
	b := f.next()
	b[len(b)-1] ^= 1
	if checkFrames(b) {
		t.Fatal("a flipped bit passed the check")
	}
}

// TestRingSend: +ring-copy's batches are views of consecutive slots of a
// ring of whole batches at least as large as the hot ring, sealed with
// the seqs asked for; a partly sent batch's next one starts after what
// went out, and a batch that would not fit starts over at the ring's
// start.
func TestRingSend(t *testing.T) {
	c := DefaultThroughputConfig()
	c.Size = 144
	v, _ := sendViews(c)
	r := newRingSend(c, v)
	if len(r.ring)%(r.per*c.Size) != 0 || len(r.ring)/c.Size < protocol.DefaultSendRingSlots {
		t.Fatalf("ring of %d frames, %d a batch", len(r.ring)/c.Size, r.per)
	}
	slot := func(i int) int { // the ring offset of message i
		m, _ := v.Msg(i)
		return int(uintptr(unsafe.Pointer(&m[0])) - uintptr(unsafe.Pointer(&r.ring[0])))
	}
	seq, want := uint64(1), 0
	for b := 0; b < 3*len(r.ring)/(r.per*c.Size); b++ {
		if err := r.fill(seq); err != nil {
			t.Fatal(err)
		}
		if want+r.per*c.Size > len(r.ring) {
			want = 0
		}
		if v.Len() != r.per {
			t.Fatalf("batch %d: %d messages", b, v.Len())
		}
		for i := 0; i < v.Len(); i++ {
			m, _ := v.Msg(i)
			if v.Owned(i) || slot(i) != want+i*c.Size {
				t.Fatalf("batch %d, message %d: at ring offset %d, want a view at %d", b, i, slot(i), want+i*c.Size)
			}
			if _, p, n, err := wire.DecodeFrame(m); err != nil || n != c.Size || binary.LittleEndian.Uint64(p) != seq+uint64(i) {
				t.Fatalf("batch %d, message %d: %v, %d bytes, seq %d (want %d)", b, i, err, n, binary.LittleEndian.Uint64(p), seq+uint64(i))
			}
		}
		n := r.per
		if b%5 == 2 {
			n = r.per / 3 // a partial send
		}
		r.sent(n)
		seq += uint64(n)
		want += n * c.Size
	}
}
