package wire

import "golang.org/x/sys/cpu"

// crcFast: the CRC instruction (SSE4.2) and carry-less multiply are
// there, so crc3way runs.
var crcFast = cpu.X86.HasSSE42 && cpu.X86.HasPCLMULQDQ

// crc3way updates the reflected, non-inverted CRC-32C state crc with p
// (inputs of crcFoldMin bytes or more go to crcFold when crcWide is set;
// otherwise inputs of crcFoldYMin bytes or more go to crcFoldY when
// crcYMM is set).
// Runs of 72 bytes or more go through three interleaved streams of up
// to crcBlockWords 8-byte words (the CRC instruction's latency is three
// times its issue interval, so three independent chains keep it busy),
// combined with one carry-less multiply each (constants k); the rest
// goes 8, 4, 2, 1 bytes at a time.
//
//go:noescape
func crc3way(crc uint32, p []byte, k *[crcBlockWords + 1][2]uint64) uint32

// crcWide: AVX-512 with carry-less multiply on 512-bit registers
// (VPCLMULQDQ) is there, so frames of crcFoldMin bytes or more fold four
// 128-bit lanes at a time (crcFold) instead of running three CRC
// instruction streams: the CRC instruction retires 8 bytes a cycle at
// best, the folds several times that.
var crcWide = crcFast && cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VPCLMULQDQ

// crcFoldMin is the shortest input crc3way hands to crcFold (below it
// the three CRC streams are as fast on this VM's AMD EPYC).
const crcFoldMin = 256

// crcFold updates the reflected, non-inverted CRC-32C state crc with p,
// len(p) >= 64, folding with VPCLMULQDQ (crc_fold_amd64.s); k is not
// used: crc3way jumps to it with its own frame when crcWide is set and
// len(p) >= crcFoldMin.
//
//go:noescape
func crcFold(crc uint32, p []byte, k *[crcBlockWords + 1][2]uint64) uint32

// crcYMM: carry-less multiply on 256-bit registers (VEX-encoded
// VPCLMULQDQ) and AVX2 are there, so inputs of crcFoldYMin bytes or more
// fold two 128-bit lanes at a time (crcFoldY). This is for CPUs with
// VPCLMULQDQ but not AVX-512, such as AMD Zen 3; where crcWide is set,
// crcFold runs instead. On this VM's AMD EPYC (Zen 3) a 256-bit multiply
// issues only about every other cycle, so on long inputs the fold is
// barely faster than the three CRC streams (both near 8 bytes a cycle);
// it gains more on short and mid-sized ones, where crc3way runs its CRC
// instructions one after another (below 72 bytes) or pays for the
// combine. The CRC instruction and the multiplier run side by side, so a
// loop that feeds both (CRC streams over part of the input, folds over
// the rest) could go further.
//
// golang.org/x/sys/cpu reports VPCLMULQDQ only with AVX-512, so its CPUID
// bit (leaf 7, ECX bit 10) is read here; HasAVX2 implies leaf 7 exists
// and that the OS saves the YMM registers.
var crcYMM = crcFast && cpu.X86.HasAVX2 && hasVPCLMULQDQ()

func hasVPCLMULQDQ() bool {
	_, _, ecx, _ := cpuid(7, 0)
	return ecx&(1<<10) != 0
}

// cpuid runs the CPUID instruction with EAX = eaxArg, ECX = ecxArg.
func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)

// crcFoldYMin is the shortest input crc3way hands to crcFoldY: the
// fold's own minimum (it starts with a 32-byte register), since from
// there on it is at least as fast as crc3way on this VM's AMD EPYC.
const crcFoldYMin = 32

// crcFoldY updates the reflected, non-inverted CRC-32C state crc with p,
// len(p) >= 32, folding with VPCLMULQDQ on YMM registers
// (crc_fold_amd64.s); k is not used: crc3way jumps to it with its own
// frame when crcYMM is set, crcWide is not and len(p) >= crcFoldYMin.
//
//go:noescape
func crcFoldY(crc uint32, p []byte, k *[crcBlockWords + 1][2]uint64) uint32

// crcFoldFin is the finish crcFold and crcFoldY jump to with their frame
// (crc_fold_amd64.s); it reads its state from registers, not from its
// arguments, so it is not to be called from Go.
//
//lint:ignore U1000 only assembly jumps to it
//go:noescape
func crcFoldFin(crc uint32, p []byte, k *[crcBlockWords + 1][2]uint64) uint32
