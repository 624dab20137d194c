//go:build !linux

package replay

// mapMem allocates Go memory; the garbage collector returns it.
func mapMem(n int) ([]byte, error) { return make([]byte, n), nil }

func unmapMem([]byte) {}
