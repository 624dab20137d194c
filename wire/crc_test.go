package wire

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/klauspost/crc32"
)

// TestCRCKnownVector: CRC-32C of "123456789" is 0xE3069283 (RFC 3720 B.4).
func TestCRCKnownVector(t *testing.T) {
	if got := CRC([]byte("123456789")); got != 0xE3069283 {
		t.Fatalf("CRC(123456789) = %#x, want 0xe3069283", got)
	}
	if got := CRC(nil); got != 0 {
		t.Fatalf("CRC(nil) = %#x, want 0", got)
	}
}

// TestCRCMatchesKlauspost checks CRC against klauspost/crc32's CRC-32C for
// every length up to three blocks and more, at every alignment of the
// first byte, on random bytes: the three-stream path, its block sizes,
// its carry-less combine and every tail length.
func TestCRCMatchesKlauspost(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 5000+8)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	tab := crc32.MakeTable(crc32.Castagnoli)
	for n := 0; n <= 5000; n++ {
		for off := range 8 {
			if n > 1700 && off > 0 && n%97 != 0 {
				continue // long ones at one alignment, and a sample of the rest
			}
			p := buf[off : off+n]
			if got, want := CRC(p), crc32.Checksum(p, tab); got != want {
				t.Fatalf("len %d offset %d: CRC %#x, want %#x", n, off, got, want)
			}
		}
	}
}

// TestCRCSingleBit: a one-bit change anywhere in a 1427-byte payload
// changes the CRC (the combine loses no stream).
func TestCRCSingleBit(t *testing.T) {
	p := make([]byte, 1427)
	base := CRC(p)
	for i := range p {
		p[i] ^= 0x10
		if CRC(p) == base {
			t.Fatalf("flipping a bit of byte %d left the CRC unchanged", i)
		}
		p[i] ^= 0x10
	}
}

func FuzzCRC(f *testing.F) {
	f.Add([]byte("123456789"), uint8(0))
	f.Add(make([]byte, 1427), uint8(3))
	tab := crc32.MakeTable(crc32.Castagnoli)
	f.Fuzz(func(t *testing.T, p []byte, off uint8) {
		p = p[min(int(off%8), len(p)):]
		if got, want := CRC(p), crc32.Checksum(p, tab); got != want {
			t.Fatalf("len %d: CRC %#x, want %#x", len(p), got, want)
		}
	})
}

func BenchmarkCRC(b *testing.B) {
	tab := crc32.MakeTable(crc32.Castagnoli)
	for _, n := range []int{128, 1427} {
		p := make([]byte, n)
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				CRC(p)
			}
		})
		b.Run(strconv.Itoa(n)+"-klauspost", func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				crc32.Checksum(p, tab)
			}
		})
	}
}

// TestCRCFastPath: on amd64 with SSE4.2 and PCLMULQDQ the three-stream
// path is the one in use (the other tests would pass on the fallback).
func TestCRCFastPath(t *testing.T) {
	if !crcFast {
		t.Skip("no SSE4.2 and PCLMULQDQ (or not amd64): CRC uses klauspost/crc32")
	}
	p := []byte("123456789")
	if got := ^crc3way(^uint32(0), p, &crcShift); got != 0xE3069283 {
		t.Fatalf("crc3way = %#x", got)
	}
}
