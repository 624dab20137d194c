// Package unix is the wal package's one door to the operating system's
// file calls, so that wal builds on every GOOS (the model is cilium/ebpf's
// internal/unix). On Unix-like systems it is golang.org/x/sys/unix under
// the same names. On Windows it implements the same few calls over
// Windows file handles: positioned reads and writes, truncate, flush,
// size, an exclusive lock, and mmap as a plain read of the (immutable,
// sealed) index file. It holds nothing else.
package unix
