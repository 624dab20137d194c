package wire

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/klauspost/crc32"
)

// TestCRCFold: the VPCLMULQDQ fold (four registers at a time from 512
// bytes, one below, then 16-byte lanes and a tail) gives klauspost/crc32's CRC-32C for
// every length 64..2100 at every start offset 0..7 and from a state
// other than the initial one.
func TestCRCFold(t *testing.T) {
	if !crcWide {
		t.Skip("no AVX-512 VPCLMULQDQ: the fold is not used")
	}
	tab := crc32.MakeTable(crc32.Castagnoli)
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 2200)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	for n := 64; n <= 2100; n++ {
		for off := range 8 {
			p := buf[off : off+n]
			if got, want := ^crcFold(^uint32(0), p, nil), crc32.Checksum(p, tab); got != want {
				t.Fatalf("len %d offset %d: %#x, want %#x", n, off, got, want)
			}
			if got, want := ^crcFold(^uint32(0x12345678), p, nil), crc32.Update(0x12345678, tab, p); got != want {
				t.Fatalf("len %d offset %d from a state: %#x, want %#x", n, off, got, want)
			}
		}
	}
}

func BenchmarkCRCFold(b *testing.B) {
	if !crcWide {
		b.Skip("no AVX-512 VPCLMULQDQ")
	}
	for _, n := range []int{128, 256, 512, 1427} {
		p := make([]byte, n)
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				crcFold(0, p, nil)
			}
		})
		b.Run(strconv.Itoa(n)+"-3way", func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				crc3way(0, p, &crcShift)
			}
		})
	}
}

// TestCRC3wayLong: with the fold turned off, the three-stream path still
// gives the right CRC for the long inputs the fold takes otherwise.
func TestCRC3wayLong(t *testing.T) {
	if !crcFast {
		t.Skip("no SSE4.2 and PCLMULQDQ: CRC uses klauspost/crc32")
	}
	defer func(w bool) { crcWide = w }(crcWide)
	crcWide = false
	tab := crc32.MakeTable(crc32.Castagnoli)
	rng := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, 2108)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	for n := crcFoldMin - 8; n <= 2100; n++ {
		p := buf[n%8 : n%8+n]
		if got, want := CRC(p), crc32.Checksum(p, tab); got != want {
			t.Fatalf("len %d: CRC %#x, want %#x", n, got, want)
		}
	}
}
