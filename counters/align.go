package counters

import "unsafe"

// unsafeBytes views words as size bytes (8-byte aligned, for atomics).
func unsafeBytes(words []uint64, size int) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), size)
}

// addrOf is the address of b's first byte.
func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
