#include "textflag.h"

// Fold constants of CRC-32C in the bit-reflected domain, 33 bits each:
// refl33(x^e mod P) for e = D+32 (the low qword of a lane, the earlier
// bytes) and e = D−32 (the high qword), to move a 128-bit lane D bits on.
// D = 2048 (four ZMM registers, 256 bytes, onto the next 256) and
// D = 512 (a ZMM register's four lanes onto the next 64 bytes), each
// repeated for the four lanes; D = 128 (a lane onto the next). crcFoldY
// (YMM registers, two lanes) uses the first 32 bytes of fold512 and
// fold1024 and fold256 below. TestCRCFoldConstants derives every value
// from the polynomial.
DATA fold512<>+0(SB)/8, $0x740eef02
DATA fold512<>+8(SB)/8, $0x9e4addf8
DATA fold512<>+16(SB)/8, $0x740eef02
DATA fold512<>+24(SB)/8, $0x9e4addf8
DATA fold512<>+32(SB)/8, $0x740eef02
DATA fold512<>+40(SB)/8, $0x9e4addf8
DATA fold512<>+48(SB)/8, $0x740eef02
DATA fold512<>+56(SB)/8, $0x9e4addf8
GLOBL fold512<>(SB), RODATA, $64

DATA fold2048<>+0(SB)/8, $0xdcb17aa4
DATA fold2048<>+8(SB)/8, $0xb9e02b86
DATA fold2048<>+16(SB)/8, $0xdcb17aa4
DATA fold2048<>+24(SB)/8, $0xb9e02b86
DATA fold2048<>+32(SB)/8, $0xdcb17aa4
DATA fold2048<>+40(SB)/8, $0xb9e02b86
DATA fold2048<>+48(SB)/8, $0xdcb17aa4
DATA fold2048<>+56(SB)/8, $0xb9e02b86
GLOBL fold2048<>(SB), RODATA, $64

DATA fold128<>+0(SB)/8, $0xf20c0dfe
DATA fold128<>+8(SB)/8, $0x14cd00bd6
GLOBL fold128<>(SB), RODATA, $16

// D = 1024 (four YMM registers, 128 bytes, onto the next 128) and D = 256
// (a YMM register's two lanes onto the next 32 bytes), each repeated for
// the two lanes.
DATA fold1024<>+0(SB)/8, $0x6992cea2
DATA fold1024<>+8(SB)/8, $0x0d3b6092
DATA fold1024<>+16(SB)/8, $0x6992cea2
DATA fold1024<>+24(SB)/8, $0x0d3b6092
GLOBL fold1024<>(SB), RODATA, $32

DATA fold256<>+0(SB)/8, $0x1384aa63a
DATA fold256<>+8(SB)/8, $0xba4fc28e
DATA fold256<>+16(SB)/8, $0x1384aa63a
DATA fold256<>+24(SB)/8, $0xba4fc28e
GLOBL fold256<>(SB), RODATA, $32

// func crcFold(crc uint32, p []byte, k *[crcBlockWords + 1][2]uint64) uint32
//
// len(p) >= 64; k is not used (the frame is crc3way's, which jumps here
// for long inputs when crcWide is set). The state is XORed into the first 4 bytes; each 64-byte
// block is folded onto the next with carry-less multiplies (VPCLMULQDQ,
// four 128-bit lanes at once), the four lanes onto each other, then
// every whole 16 bytes left onto the lane. The 16 bytes that remain are
// congruent to everything folded (same position, same CRC), so the CRC
// instruction over them, from state 0, is the state after them; the
// last 0–15 bytes go through it too.
TEXT ·crcFold(SB), NOSPLIT, $0-44
	MOVL crc+0(FP), AX
	MOVQ p_base+8(FP), SI
	MOVQ p_len+16(FP), CX

	VPXORQ    Z10, Z10, Z10
	VMOVD     AX, X10
	VMOVDQU64 (SI), Z1
	VPXORQ    Z10, Z1, Z1
	ADDQ      $64, SI
	SUBQ      $64, CX

	// Four registers of 64 bytes each, folded 256 bytes on at a time:
	// four independent chains keep the multiplier busy.
	CMPQ      CX, $448
	JB        one
	VMOVDQU64 (SI), Z2
	VMOVDQU64 64(SI), Z3
	VMOVDQU64 128(SI), Z4
	ADDQ      $192, SI
	SUBQ      $192, CX
	VMOVDQU64 fold2048<>+0(SB), Z0

loop256:
	VMOVDQU64  (SI), Z11
	VMOVDQU64  64(SI), Z12
	VMOVDQU64  128(SI), Z13
	VMOVDQU64  192(SI), Z14
	VPCLMULQDQ $0x11, Z0, Z1, Z5
	VPCLMULQDQ $0x00, Z0, Z1, Z1
	VPCLMULQDQ $0x11, Z0, Z2, Z6
	VPCLMULQDQ $0x00, Z0, Z2, Z2
	VPCLMULQDQ $0x11, Z0, Z3, Z7
	VPCLMULQDQ $0x00, Z0, Z3, Z3
	VPCLMULQDQ $0x11, Z0, Z4, Z8
	VPCLMULQDQ $0x00, Z0, Z4, Z4
	VPTERNLOGD $0x96, Z11, Z5, Z1
	VPTERNLOGD $0x96, Z12, Z6, Z2
	VPTERNLOGD $0x96, Z13, Z7, Z3
	VPTERNLOGD $0x96, Z14, Z8, Z4
	ADDQ       $256, SI
	SUBQ       $256, CX
	CMPQ       CX, $256
	JAE        loop256

	// The four registers onto each other, 64 bytes apart.
	VMOVDQU64  fold512<>+0(SB), Z0
	VPCLMULQDQ $0x11, Z0, Z1, Z5
	VPCLMULQDQ $0x00, Z0, Z1, Z1
	VPTERNLOGD $0x96, Z2, Z5, Z1
	VPCLMULQDQ $0x11, Z0, Z1, Z5
	VPCLMULQDQ $0x00, Z0, Z1, Z1
	VPTERNLOGD $0x96, Z3, Z5, Z1
	VPCLMULQDQ $0x11, Z0, Z1, Z5
	VPCLMULQDQ $0x00, Z0, Z1, Z1
	VPTERNLOGD $0x96, Z4, Z5, Z1

one:
	VMOVDQU64 fold512<>+0(SB), Z0
	CMPQ      CX, $64
	JB        lanes

loop64:
	VMOVDQU64  (SI), Z11
	VPCLMULQDQ $0x11, Z0, Z1, Z5
	VPCLMULQDQ $0x00, Z0, Z1, Z1
	VPTERNLOGD $0x96, Z11, Z5, Z1
	ADDQ       $64, SI
	SUBQ       $64, CX
	CMPQ       CX, $64
	JAE        loop64

lanes:
	VEXTRACTF32X4 $1, Z1, X2
	VEXTRACTF32X4 $2, Z1, X3
	VEXTRACTF32X4 $3, Z1, X4
	VZEROUPPER
	MOVOU     fold128<>+0(SB), X0

	MOVOA     X1, X5
	PCLMULQDQ $0x00, X0, X1
	PCLMULQDQ $0x11, X0, X5
	PXOR      X5, X1
	PXOR      X2, X1

	MOVOA     X1, X5
	PCLMULQDQ $0x00, X0, X1
	PCLMULQDQ $0x11, X0, X5
	PXOR      X5, X1
	PXOR      X3, X1

	MOVOA     X1, X5
	PCLMULQDQ $0x00, X0, X1
	PCLMULQDQ $0x11, X0, X5
	PXOR      X5, X1
	PXOR      X4, X1

rem16:
	CMPQ      CX, $16
	JB        fin
	MOVOU     (SI), X10
	MOVOA     X1, X5
	PCLMULQDQ $0x00, X0, X1
	PCLMULQDQ $0x11, X0, X5
	PXOR      X5, X1
	PXOR      X10, X1
	ADDQ      $16, SI
	SUBQ      $16, CX
	JMP       rem16

fin:
	JMP ·crcFoldFin(SB)

// func crcFoldFin(crc uint32, p []byte, k *[crcBlockWords + 1][2]uint64) uint32
//
// The finish of crcFold and crcFoldY, which jump here with their own
// frame (the arguments are not read): X1 holds the 128-bit lane, SI
// points at the 0–15 bytes left and CX counts them. The lane is congruent
// to everything folded (same position, same CRC), so the CRC instruction
// over it from state 0 is the state after it; then the last bytes.
TEXT ·crcFoldFin(SB), NOSPLIT, $0-44
	XORL   AX, AX
	MOVQ   X1, DX
	CRC32Q DX, AX
	PEXTRQ $1, X1, DX
	CRC32Q DX, AX

	CMPQ   CX, $8
	JB     tail4
	CRC32Q (SI), AX
	ADDQ   $8, SI
	SUBQ   $8, CX

tail4:
	CMPQ   CX, $4
	JB     tail2
	CRC32L (SI), AX
	ADDQ   $4, SI
	SUBQ   $4, CX

tail2:
	CMPQ   CX, $2
	JB     tail1
	CRC32W (SI), AX
	ADDQ   $2, SI
	SUBQ   $2, CX

tail1:
	CMPQ   CX, $1
	JB     done
	CRC32B (SI), AX

done:
	MOVL AX, ret+40(FP)
	RET

// FOLDY moves each 128-bit lane of acc on by the distance whose
// constants are in Y0 and adds src (a register or 32 bytes in memory):
// dst = clmul(acc.lo, K.lo) ^ clmul(acc.hi, K.hi) ^ src per lane. acc
// and tmp are clobbered (dst may be acc). AVX2 has no three-way XOR
// (VPTERNLOGD), so two VPXORs.
#define FOLDY(acc, src, dst, tmp) \
	VPCLMULQDQ $0x11, Y0, acc, tmp \
	VPCLMULQDQ $0x00, Y0, acc, acc \
	VPXOR      src, tmp, tmp       \
	VPXOR      tmp, acc, dst

// func crcFoldY(crc uint32, p []byte, k *[crcBlockWords + 1][2]uint64) uint32
//
// crcFold on 256-bit registers, for CPUs with VPCLMULQDQ (VEX) and AVX2
// but no AVX-512. len(p) >= 32; k is not used (the frame is crc3way's,
// which jumps here when crcYMM is set and crcWide is not). The state is
// XORed into the first 4 bytes. From 128 bytes on, four registers of 32
// bytes are folded 128 bytes on at a time (four independent chains: the
// multiplier's throughput, not its latency, bounds the loop), then onto
// each other as a tree (64 bytes apart, then 32); what is left goes on
// 32 bytes at a time, then the two lanes onto each other, at most one
// more 16 bytes, and the same finish as crcFold: the CRC instruction
// over the lane from state 0, then the last 0–15 bytes.
TEXT ·crcFoldY(SB), NOSPLIT, $0-44
	MOVL crc+0(FP), AX
	MOVQ p_base+8(FP), SI
	MOVQ p_len+16(FP), CX

	VMOVD AX, X10 // VEX: bits 32–255 of Y10 are zeroed
	VPXOR (SI), Y10, Y1
	ADDQ  $32, SI
	SUBQ  $32, CX

	CMPQ    CX, $96
	JB      one
	VMOVDQU (SI), Y2
	VMOVDQU 32(SI), Y3
	VMOVDQU 64(SI), Y4
	ADDQ    $96, SI
	SUBQ    $96, CX
	CMPQ    CX, $128
	JB      tree
	VMOVDQU fold1024<>+0(SB), Y0

loop128:
	FOLDY(Y1, (SI), Y1, Y9)
	FOLDY(Y2, 32(SI), Y2, Y10)
	FOLDY(Y3, 64(SI), Y3, Y11)
	FOLDY(Y4, 96(SI), Y4, Y12)
	ADDQ $128, SI
	SUBQ $128, CX
	CMPQ CX, $128
	JAE  loop128

tree:
	// Y1 onto Y3 and Y2 onto Y4 (64 bytes on), then Y3 onto Y4.
	VMOVDQU fold512<>+0(SB), Y0
	FOLDY(Y1, Y3, Y3, Y9)
	FOLDY(Y2, Y4, Y4, Y10)
	VMOVDQU fold256<>+0(SB), Y0
	FOLDY(Y3, Y4, Y1, Y9)
	JMP     more

one:
	VMOVDQU fold256<>+0(SB), Y0

more:
	CMPQ CX, $32
	JB   lanes

loop32:
	FOLDY(Y1, (SI), Y1, Y9)
	ADDQ $32, SI
	SUBQ $32, CX
	CMPQ CX, $32
	JAE  loop32

lanes:
	// The upper lane is 16 bytes on from the lower. The rest is 128-bit
	// (VEX-encoded, so the upper halves stay clean after VZEROUPPER).
	VEXTRACTI128 $1, Y1, X2
	VZEROUPPER
	VMOVDQU      fold128<>+0(SB), X0
	VPCLMULQDQ   $0x11, X0, X1, X5
	VPCLMULQDQ   $0x00, X0, X1, X1
	VPXOR        X2, X5, X5
	VPXOR        X5, X1, X1

	CMPQ       CX, $16
	JB         fin
	VPCLMULQDQ $0x11, X0, X1, X5
	VPCLMULQDQ $0x00, X0, X1, X1
	VPXOR      (SI), X5, X5
	VPXOR      X5, X1, X1
	ADDQ       $16, SI
	SUBQ       $16, CX

fin:
	JMP ·crcFoldFin(SB)
