package wire

import "github.com/klauspost/crc32"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC returns the CRC-32C (Castagnoli) of p. (Seal and DecodeFrame, which
// run on every record, have its two lines inline: one call less.)
func CRC(p []byte) uint32 {
	if crcFast {
		return ^crc3way(^uint32(0), p, &crcShift)
	}
	return crcTable(p)
}

// crcTable is the CRC on machines without the fast path (kept out of
// line so that CRC stays small enough to inline).
//
//go:noinline
func crcTable(p []byte) uint32 { return crc32.Update(0, castagnoli, p) }

// crcBlockWords is the longest stream crc3way runs in one block, in
// 8-byte words: a frame of up to 3 × 8 × crcBlockWords bytes (1536) is
// one block and a tail.
const crcBlockWords = 64

// crcShift[n] holds, for a block of three n-word streams, the constants
// that move a stream's CRC past the n and 2n words that follow it:
// x^(64n−33) and x^(128n−33) mod P, bit-reflected (see init).
var crcShift [crcBlockWords + 1][2]uint64

// The Castagnoli polynomial without its x^32 term, in normal bit order
// (bit i is the coefficient of x^i).
const castagnoliNormal = 0x1EDC6F41

// mulXPow returns v·x^e mod P, in normal bit order.
func mulXPow(v uint32, e int) uint32 {
	for range e {
		carry := v&(1<<31) != 0
		v <<= 1
		if carry {
			v ^= castagnoliNormal
		}
	}
	return v
}

// reflect32 reverses the bits of v: the CRC instruction's order, where
// bit 0 is the coefficient of x^31.
func reflect32(v uint32) uint32 {
	var r uint32
	for i := range 32 {
		if v&(1<<i) != 0 {
			r |= 1 << (31 - i)
		}
	}
	return r
}

// The shift constants: K such that crc32q(0, clmul(c, K)) = c·x^(8·b)
// mod P for a reflected CRC state c moved past b bytes. The carry-less
// product of two reflected 32-bit values is their product times x, and
// the CRC instruction multiplies by x^32 more, so K = x^(8b − 33).
// crcShift[n] is for b = 8n and b = 16n, built by stepping n.
func init() {
	k1, k2 := mulXPow(1, 64-33), mulXPow(1, 128-33)
	for n := 1; n <= crcBlockWords; n++ {
		crcShift[n] = [2]uint64{uint64(reflect32(k1)), uint64(reflect32(k2))}
		k1, k2 = mulXPow(k1, 64), mulXPow(k2, 128)
	}
}
