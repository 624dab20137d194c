// Package wire is the one home of casting's bytes: the 16-byte frame
// [Header] and its CRC-32C, the record type numbers, and the codec of
// every record the protocol defines, with its golden bytes in the tests
// (docs/protocol.md shows the same bytes).
//
// A frame is a 16-byte header followed by its payload. It is the same on
// UDP, on disk in the WAL and on the TCP replay stream: nothing is
// re-encoded in between. All integers are little-endian; the CRC covers
// the payload only.
//
//   - Data records: any type that is not [Reserved] (the CLI and the
//     examples use 1 and 100). The payload starts with the record's u64
//     seq ([Seq]); [Seal] turns header room plus payload into a frame.
//   - 6 [CaughtUp]: TCP server → client.
//   - 0x10 [Status] (walcast): receiver → sender acknowledgement and flow
//     control.
//   - 0x11 [Nak]: receiver → sender, "send From … From+Count−1 again".
//   - 0x12 [Heartbeat] (the reference) and [Probe] (walcast's extended
//     form of the same frame): sender → receiver.
//   - 0x13 [ReplicationRequest] and 0x15 [NotAvailable]: the TCP replay
//     stream's request and refusal.
//   - 0x14 [TypeBitmapNak]: reserved, no codec yet.
//   - 0x16 [SessionEnd] (walcast): the stream is done.
//   - 0x17 [Skip] (walcast): a log record standing for seqs that have no
//     record.
//
// Two predicates say what a type is, and they are different questions:
// [Reserved] (0x10–0x17) is what no application may publish — every
// entry point that accepts a record refuses those types with
// [ErrReserved]; [UDPControl] is the subset a UDP receiver takes for
// control frames and never delivers.
//
// What it must not do: import anything of walcast's (it is the leaf every
// other package builds on), allocate in any codec function, panic on
// bytes from the network or the disk (bad input is one of the sentinel
// errors that match [ErrCorrupt], or [ErrStatus] / [ErrSessionEnd]),
// or change a byte of an existing layout: a new layout is a new record
// type, negotiated, with golden bytes.
package wire
