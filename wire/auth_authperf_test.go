package wire

import (
	"fmt"
	"testing"
)

// BenchmarkAuthCost splits what one datagram's trailer costs, at the
// frame sizes of cast bench throughput (144 B, and 1438 B: the largest
// keyed frame within a 1500-byte MTU):
//
//   - gmac: crypto/cipher's GCM alone (seal: tag the frames and the
//     trailer head; open: verify that tag), on one datagram that stays in
//     the cache: the floor of this construction on this CPU;
//   - seal: Sealer.Seal (the trailer written, the counter, the tag), on
//     one datagram in the cache as a loop's out batch has it;
//   - open/hot: Opener.Open (trailer parsed, key and replay window found,
//     tag verified, window advanced) over 64 datagrams sealed just before
//     (in the cache, as a receiver has them right after recvmmsg);
//   - open/cold: the same over 1024 datagrams (1.5 MB at 1438 B: out of
//     the L2 cache, which is what BenchmarkAuth's open row measures).
func BenchmarkAuthCost(b *testing.B) {
	for _, size := range []int{144, 1438} {
		f := authFrame(1, size-HeaderSize)
		b.Run(fmt.Sprintf("gmac-seal/%dB", size), func(b *testing.B) {
			a, err := newAEAD(authKey1)
			if err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, len(f)+TrailerSize)
			copy(buf, f)
			n := len(f)
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				a.Seal(buf[n+authHeadSize:n+authHeadSize], buf[n:n+nonceSize], nil, buf[:n+authHeadSize])
			}
		})
		b.Run(fmt.Sprintf("gmac-open/%dB", size), func(b *testing.B) {
			a, err := newAEAD(authKey1)
			if err != nil {
				b.Fatal(err)
			}
			buf := sealed(b, mustSealer(b, authKey1, 3), f)
			n := len(f)
			var pt [tagSize]byte
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.Open(pt[:0], buf[n:n+nonceSize], buf[n+authHeadSize:], buf[:n+authHeadSize]); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("seal/%dB", size), func(b *testing.B) {
			s := mustSealer(b, authKey1, 3)
			buf := make([]byte, len(f)+TrailerSize)
			copy(buf, f)
			b.SetBytes(int64(len(f)))
			b.ReportAllocs()
			for b.Loop() {
				s.Seal(buf, len(f))
			}
		})
		for _, depth := range []int{64, 1024} {
			name := "hot"
			if depth > 64 {
				name = "cold"
			}
			b.Run(fmt.Sprintf("open/%s/%dB", name, size), func(b *testing.B) {
				s, o := mustSealer(b, authKey1, 3), mustOpener(b, authKey1)
				ds := make([][]byte, depth)
				for i := range ds {
					ds[i] = make([]byte, len(f)+TrailerSize)
					copy(ds[i], f)
				}
				reseal := func() {
					for _, d := range ds {
						s.Seal(d, len(f))
					}
				}
				reseal()
				b.SetBytes(int64(len(f)))
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if i == len(ds) { // a fresh round of counters
						b.StopTimer()
						reseal()
						i = 0
						b.StartTimer()
					}
					if _, err := o.Open(ds[i], srcA); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		}
	}
}
