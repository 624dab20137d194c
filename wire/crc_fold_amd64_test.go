package wire

import (
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/klauspost/crc32"
	"golang.org/x/sys/cpu"
)

// TestCRCFold: the VPCLMULQDQ fold (four registers at a time from 512
// bytes, one below, then 16-byte lanes and a tail) gives klauspost/crc32's CRC-32C for
// every length 64..2100 at every start offset 0..7 and from a state
// other than the initial one.
func TestCRCFold(t *testing.T) {
	if !crcWide {
		t.Skip("no AVX-512 VPCLMULQDQ: the fold is not used")
	}
	checkFold(t, crcFold, 64, 1)
}

func BenchmarkCRCFold(b *testing.B) {
	if !crcWide {
		b.Skip("no AVX-512 VPCLMULQDQ")
	}
	benchFold(b, crcFold, []int{128, 256, 512, 1427})
}

// benchFold times fold against the three CRC streams at each size.
func benchFold(b *testing.B, fold func(uint32, []byte, *[crcBlockWords + 1][2]uint64) uint32, sizes []int) {
	for _, n := range sizes {
		p := make([]byte, n)
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				fold(0, p, nil)
			}
		})
		b.Run(strconv.Itoa(n)+"-3way", func(b *testing.B) {
			// The folds off: crc3way would jump to them.
			defer func(w, y bool) { crcWide, crcYMM = w, y }(crcWide, crcYMM)
			crcWide, crcYMM = false, false
			b.SetBytes(int64(n))
			for b.Loop() {
				crc3way(0, p, &crcShift)
			}
		})
	}
}

// checkFold checks fold against klauspost/crc32's CRC-32C for every
// length from min to 2100 at every start offset 0..7, from the initial
// state and from another one.
func checkFold(t *testing.T, fold func(uint32, []byte, *[crcBlockWords + 1][2]uint64) uint32, min int, seed uint64) {
	t.Helper()
	tab := crc32.MakeTable(crc32.Castagnoli)
	rng := rand.New(rand.NewPCG(seed, seed+1))
	buf := make([]byte, 2200)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	for n := min; n <= 2100; n++ {
		for off := range 8 {
			p := buf[off : off+n]
			if got, want := ^fold(^uint32(0), p, nil), crc32.Checksum(p, tab); got != want {
				t.Fatalf("len %d offset %d: %#x, want %#x", n, off, got, want)
			}
			if got, want := ^fold(^uint32(0x12345678), p, nil), crc32.Update(0x12345678, tab, p); got != want {
				t.Fatalf("len %d offset %d from a state: %#x, want %#x", n, off, got, want)
			}
		}
	}
}

// ymmMissing names what the CPU lacks for crcFoldY.
func ymmMissing() string {
	switch {
	case !crcFast:
		return "no SSE4.2 or PCLMULQDQ"
	case !cpu.X86.HasAVX2:
		return "no AVX2 (or the OS does not save YMM registers)"
	case !hasVPCLMULQDQ():
		return "no VPCLMULQDQ (CPUID leaf 7, ECX bit 10)"
	}
	return "crcYMM turned off"
}

// TestCRCFoldY: the YMM fold (four registers at a time from 128 bytes,
// the tree, 32-byte steps, the lanes, one 16-byte step and a tail) gives
// klauspost/crc32's CRC-32C for every length 32..2100 at every start
// offset 0..7 and from a state other than the initial one.
func TestCRCFoldY(t *testing.T) {
	if !crcYMM {
		t.Skip("the YMM fold is not used: " + ymmMissing())
	}
	checkFold(t, crcFoldY, 32, 5)
}

// TestCRCFoldYDispatch: with crcWide off (as on a CPU without AVX-512),
// CRC goes through crcFoldY around crcFoldYMin and beyond and is right.
func TestCRCFoldYDispatch(t *testing.T) {
	if !crcYMM {
		t.Skip("the YMM fold is not used: " + ymmMissing())
	}
	defer func(w bool) { crcWide = w }(crcWide)
	crcWide = false
	tab := crc32.MakeTable(crc32.Castagnoli)
	rng := rand.New(rand.NewPCG(7, 8))
	buf := make([]byte, 2108)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	for n := crcFoldYMin - 8; n <= 2100; n++ {
		p := buf[n%8 : n%8+n]
		if got, want := CRC(p), crc32.Checksum(p, tab); got != want {
			t.Fatalf("len %d: CRC %#x, want %#x", n, got, want)
		}
	}
}

// BenchmarkCRCFoldY: the YMM fold against the three CRC streams (the
// sizes around crcFoldYMin and the 1427-byte frame).
func BenchmarkCRCFoldY(b *testing.B) {
	if !crcYMM {
		b.Skip("the YMM fold is not used: " + ymmMissing())
	}
	benchFold(b, crcFoldY, []int{32, 48, 64, 96, 128, 256, 512, 1427})
}

// TestCRCFoldConstants: every fold constant in crc_fold_amd64.s is what
// the polynomial gives: for a move of D bits, refl33(x^(D+32) mod P) in
// the low qword of each 128-bit lane and refl33(x^(D−32) mod P) in the
// high qword, where refl33 reverses 33 bits (the carry-less product of
// two reflected values comes out one bit short, hence 33, not 32).
func TestCRCFoldConstants(t *testing.T) {
	src, err := os.ReadFile("crc_fold_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	refl33 := func(e int) uint64 { return uint64(reflect32(mulXPow(1, e))) << 1 }
	data := map[int]map[int]uint64{} // D -> offset -> value
	for _, m := range regexp.MustCompile(`(?m)^DATA fold(\d+)<>\+(\d+)\(SB\)/8, \$(0x[0-9a-f]+)$`).FindAllStringSubmatch(string(src), -1) {
		d, _ := strconv.Atoi(m[1])
		off, _ := strconv.Atoi(m[2])
		v, err := strconv.ParseUint(m[3], 0, 64)
		if err != nil {
			t.Fatal(err)
		}
		if data[d] == nil {
			data[d] = map[int]uint64{}
		}
		data[d][off] = v
	}
	sizes := map[int]int{}
	for _, m := range regexp.MustCompile(`(?m)^GLOBL fold(\d+)<>\(SB\), RODATA, \$(\d+)$`).FindAllStringSubmatch(string(src), -1) {
		d, _ := strconv.Atoi(m[1])
		sizes[d], _ = strconv.Atoi(m[2])
	}
	for _, d := range []int{128, 256, 512, 1024, 2048} {
		if data[d] == nil || sizes[d] == 0 {
			t.Errorf("fold%d: no DATA or GLOBL", d)
			continue
		}
		if len(data[d])*8 != sizes[d] {
			t.Errorf("fold%d: %d DATA qwords for %d bytes", d, len(data[d]), sizes[d])
		}
		for off := 0; off < sizes[d]; off += 8 {
			want := refl33(d + 32)
			if off%16 == 8 {
				want = refl33(d - 32)
			}
			if got, ok := data[d][off]; !ok || got != want {
				t.Errorf("fold%d+%d: %#x, want %#x", d, off, got, want)
			}
		}
	}
	if len(data) != 5 {
		t.Errorf("%d fold tables, want the five checked here", len(data))
	}
}

// TestCRC3wayLong: with the folds turned off, the three-stream path still
// gives the right CRC for the long inputs the folds take otherwise.
func TestCRC3wayLong(t *testing.T) {
	if !crcFast {
		t.Skip("no SSE4.2 and PCLMULQDQ: CRC uses klauspost/crc32")
	}
	defer func(w, y bool) { crcWide, crcYMM = w, y }(crcWide, crcYMM)
	crcWide, crcYMM = false, false
	tab := crc32.MakeTable(crc32.Castagnoli)
	rng := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, 2108)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	for n := min(crcFoldMin, crcFoldYMin) - 8; n <= 2100; n++ {
		p := buf[n%8 : n%8+n]
		if got, want := CRC(p), crc32.Checksum(p, tab); got != want {
			t.Fatalf("len %d: CRC %#x, want %#x", n, got, want)
		}
	}
}
