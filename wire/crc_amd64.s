#include "go_asm.h"
#include "textflag.h"

// func crc3way(crc uint32, p []byte, k *[crcBlockWords + 1][2]uint64) uint32
TEXT ·crc3way(SB), NOSPLIT, $0-44
	MOVL crc+0(FP), AX
	MOVQ p_base+8(FP), SI
	MOVQ p_len+16(FP), CX
	MOVQ k+32(FP), R11

	CMPB ·crcWide(SB), $0
	JEQ  ymm
	CMPQ CX, $const_crcFoldMin
	JB   block
	JMP  ·crcFold(SB)

ymm:
	CMPB ·crcYMM(SB), $0
	JEQ  block
	CMPQ CX, $const_crcFoldYMin
	JB   block
	JMP  ·crcFoldY(SB)

block:
	// A block needs three streams of at least 3 words.
	CMPQ CX, $72
	JB   tail

	// R8 = words per stream: min(len/24, 64) (len/24 for len < 1536 is
	// (len/8)·171 >> 9, exact below 512 words).
	MOVQ  $64, R8
	CMPQ  CX, $1536
	JAE   streamsize
	MOVQ  CX, R8
	SHRQ  $3, R8
	IMULQ $171, R8
	SHRQ  $9, R8

streamsize:
	SHLQ $3, R8         // bytes per stream
	LEAQ (SI)(R8*1), DI // stream B
	LEAQ (DI)(R8*1), R9 // stream C
	XORL DX, DX         // B's state
	XORL R10, R10       // C's state
	XORL BX, BX         // offset in each stream

streams:
	CRC32Q (SI)(BX*1), AX
	CRC32Q (DI)(BX*1), DX
	CRC32Q (R9)(BX*1), R10
	ADDQ   $8, BX
	CMPQ   BX, R8
	JB     streams

	// state = crc32q(0, clmul(A, k[n][1]) ^ clmul(B, k[n][0])) ^ C:
	// A moved past B and C, B past C.
	LEAQ      (R11)(R8*2), R12 // &k[n]: 16 bytes per n
	MOVQ      AX, X0
	MOVQ      8(R12), X1
	PCLMULQDQ $0x00, X1, X0
	MOVQ      DX, X2
	MOVQ      0(R12), X3
	PCLMULQDQ $0x00, X3, X2
	PXOR      X2, X0
	MOVQ      X0, R13
	XORL      AX, AX
	CRC32Q    R13, AX
	XORL      R10, AX

	LEAQ (R8)(R8*2), R12 // the block's bytes
	ADDQ R12, SI
	SUBQ R12, CX
	JMP  block

tail:
	CMPQ   CX, $8
	JB     tail4
	CRC32Q (SI), AX
	ADDQ   $8, SI
	SUBQ   $8, CX
	JMP    tail

tail4:
	BTQ    $2, CX
	JNC    tail2
	CRC32L (SI), AX
	ADDQ   $4, SI

tail2:
	BTQ    $1, CX
	JNC    tail1
	CRC32W (SI), AX
	ADDQ   $2, SI

tail1:
	BTQ    $0, CX
	JNC    done
	CRC32B (SI), AX

done:
	MOVL AX, ret+40(FP)
	RET

// func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL eaxArg+0(FP), AX
	MOVL ecxArg+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET
