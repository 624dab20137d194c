package wire

import "golang.org/x/sys/cpu"

// crcFast: the CRC instruction (SSE4.2) and carry-less multiply are
// there, so crc3way runs.
var crcFast = cpu.X86.HasSSE42 && cpu.X86.HasPCLMULQDQ

// crc3way updates the reflected, non-inverted CRC-32C state crc with p.
// Runs of 72 bytes or more go through three interleaved streams of up
// to crcBlockWords 8-byte words (the CRC instruction's latency is three
// times its issue interval, so three independent chains keep it busy),
// combined with one carry-less multiply each (constants k); the rest
// goes 8, 4, 2, 1 bytes at a time.
//
//go:noescape
func crc3way(crc uint32, p []byte, k *[crcBlockWords + 1][2]uint64) uint32
