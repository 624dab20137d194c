// Package wal owns the casting record: the 16-byte header, the control
// record payloads, CRC32C, and the write-ahead log that stores records on
// disk in exactly the bytes that travel on the wire and on the TCP replay
// stream.
//
// A frame is a 16-byte [Header] followed by its payload. Data records carry
// their sequence number in the first 8 bytes of the payload. All integers
// are little-endian. The CRC covers the payload only.
//
// The codec functions in this package ([ParseHeader], [DecodeFrame],
// [Seal], the Put/Parse functions of the control records) never allocate
// and never panic on input from the network or the disk: bad input is
// reported with one of the sentinel errors that match [ErrCorrupt].
//
// Package wal imports nothing else from walcast.
package wal
