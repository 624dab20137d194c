package cast

import (
	"encoding/binary"
	"errors"
	"sync"
	"testing"

	"github.com/walcast/walcast/cast/protocol"
)

func TestRingSequential(t *testing.T) {
	r := NewRing(3, 16) // rounds up to 4
	if r.Cap() != 4 {
		t.Fatalf("cap %d", r.Cap())
	}
	for i := 0; i < 4; i++ {
		if err := r.Push(uint16(i), uint64(i), []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Push(9, 9, []byte{9}); !errors.Is(err, ErrRingFull) {
		t.Fatalf("push on full: %v", err)
	}
	if err := r.Push(9, 9, make([]byte, 17)); !errors.Is(err, protocol.ErrFrameTooLarge) {
		t.Fatalf("oversize: %v", err)
	}
	for i := 0; i < 4; i++ {
		typ, seq, p, ok := r.Peek()
		if !ok || typ != uint16(i) || seq != uint64(i) || len(p) != 1 || p[0] != byte(i) {
			t.Fatalf("%d: %v %v %v %v", i, typ, seq, p, ok)
		}
		r.Pop()
	}
	if _, _, _, ok := r.Peek(); ok {
		t.Fatal("empty ring peeked a record")
	}
}

// TestRingConcurrent runs a producer and a consumer goroutine; under
// -race it also checks the slot hand-off is properly ordered.
func TestRingConcurrent(t *testing.T) {
	const n = 50_000
	r := NewRing(64, 8)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var b [8]byte
		for i := uint64(1); i <= n; {
			binary.LittleEndian.PutUint64(b[:], i)
			if r.Push(1, i, b[:]) == nil {
				i++
			}
		}
	}()
	for want := uint64(1); want <= n; {
		_, seq, p, ok := r.Peek()
		if !ok {
			continue
		}
		if seq != want || binary.LittleEndian.Uint64(p) != want {
			t.Fatalf("got %d/%d want %d", seq, binary.LittleEndian.Uint64(p), want)
		}
		r.Pop()
		want++
	}
	wg.Wait()
}

func TestRingAllocs(t *testing.T) {
	r := NewRing(8, 64)
	p := make([]byte, 64)
	if a := testing.AllocsPerRun(100, func() {
		_ = r.Push(1, 1, p)
		r.Peek()
		r.Pop()
	}); a != 0 {
		t.Fatalf("%v allocs", a)
	}
}

// TestRingPeekRun: peekRun hands the oldest records of the oldest one's
// type, in order, at most as many as asked, across the wrap, without
// removing them; popN removes them.
func TestRingPeekRun(t *testing.T) {
	r := NewRing(4, 16)
	dst := make([][]byte, 8)
	if n, _ := r.peekRun(dst); n != 0 {
		t.Fatalf("empty ring: %d", n)
	}
	push := func(typ uint16, b byte) {
		t.Helper()
		if err := r.Push(typ, 0, []byte{b, b}); err != nil {
			t.Fatal(err)
		}
	}
	push(1, 'a')
	push(1, 'b')
	push(2, 'c')
	push(1, 'd')
	n, typ := r.peekRun(dst)
	if n != 2 || typ != 1 || string(dst[0]) != "aa" || string(dst[1]) != "bb" || r.Len() != 4 {
		t.Fatalf("run %d of type %d: %q %q, %d queued", n, typ, dst[0], dst[1], r.Len())
	}
	if n, _ := r.peekRun(dst[:1]); n != 1 {
		t.Fatalf("at most len(dst): %d", n)
	}
	r.popN(2)
	push(2, 'e') // wraps
	if n, typ := r.peekRun(dst); n != 1 || typ != 2 || string(dst[0]) != "cc" {
		t.Fatalf("after the pop: %d of type %d %q", n, typ, dst[0])
	}
	r.popN(1)
	if n, typ := r.peekRun(dst); n != 1 || typ != 1 || string(dst[0]) != "dd" {
		t.Fatalf("then: %d of type %d %q", n, typ, dst[0])
	}
	r.popN(1)
	if n, typ := r.peekRun(dst); n != 1 || typ != 2 || string(dst[0]) != "ee" || r.Len() != 1 {
		t.Fatalf("across the wrap: %d of type %d %q", n, typ, dst[0])
	}
}
