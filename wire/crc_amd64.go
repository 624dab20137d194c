package wire

import "golang.org/x/sys/cpu"

// crcFast: the CRC instruction (SSE4.2) and carry-less multiply are
// there, so crc3way runs.
var crcFast = cpu.X86.HasSSE42 && cpu.X86.HasPCLMULQDQ

// crc3way updates the reflected, non-inverted CRC-32C state crc with p
// (inputs of crcFoldMin bytes or more go to crcFold when crcWide is set).
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
