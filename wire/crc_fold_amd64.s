#include "textflag.h"

// Fold constants of CRC-32C in the bit-reflected domain, 33 bits each:
// refl33(x^e mod P) for e = D+32 (the low qword of a lane, the earlier
// bytes) and e = D−32 (the high qword), to move a 128-bit lane D bits on.
// D = 2048 (four ZMM registers, 256 bytes, onto the next 256) and
// D = 512 (a ZMM register's four lanes onto the next 64 bytes), each
// repeated for the four lanes; D = 128 (a lane onto the next).
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
