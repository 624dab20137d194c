// Package wal is the write-ahead log that stores casting records on disk
// in exactly the bytes that travel on UDP and on the TCP replay stream.
//
// # Records
//
// A record is a frame of package wire: a 16-byte header (type, payload
// length, CRC-32C of the payload) followed by its payload, whose first 8
// bytes are the record's seq. The log stores exactly those bytes; wire
// owns their codec, the record types and the golden bytes. A frame that
// does not decode is reported with an error matching wire.ErrCorrupt,
// wrapped in a [*FrameError] naming file and offset.
//
// # Log
//
// A stream's log lives in Dir/<stream>/ ([StreamDir]) as segment files named
// like the reference: <sid>_active.wal while written, <sid>_<first>_<last>.wal
// once sealed (exactly first…last, no padding), each with a sidecar seq
// index <stem>.idx. [Writer.Append] only copies into memory (zero
// allocations); one I/O goroutine per Writer writes aligned blocks
// (O_DIRECT where the filesystem allows, else buffered + fdatasync,
// reported in [Stats]), syncs, publishes the durable seq and extends the
// index. Cold reads ([Writer.ReadAt], [Writer.ReadRange]) are one index
// lookup plus one aligned read. [Open] recovers a crashed log; [Reader]
// replays it from any seq.
//
// # Seqs and damage
//
// No seq is handed out before a durable reservation covers it, so after a
// crash Open continues past the reservation behind a Skip marker
// (wire.Skip, record type wire.TypeSkip) that stands for the seqs that
// never became durable: a seq never carries two contents. A seq hole lies only between segments,
// explained by the Skip that starts the next one. A damaged log (a
// durable record that does not read back, seqs no segment holds) is
// refused by Open with a [*DamageError] naming file, offset and seq, and
// changed in nothing; [Repair] quarantines the damage behind Skip markers.
// A log whose records are whole but whose sealed segment names are wrong
// (the reference writer's rotation leaves such names) is refused with a
// [*MislabelError], and Repair renames its segments. [Export] writes a
// copy for the reference's tools (no preallocated zeros).
// [Writer.Err] reports a failing disk at once.
//
// What it must not do: log, panic on bad bytes, allocate or touch the disk
// in Append, drop or reorder a record, hand out a seq twice, or extend a
// damaged log.
//
// Package wal imports nothing else from walcast but leaf packages of
// plumbing: the record codec (wire), its file-call shim (wal/internal/unix,
// so that it builds and runs on every GOOS: O_DIRECT and preallocation
// where Linux has them, plain writes and fsync elsewhere), the "not
// supported" error family, the shared backpressure sentinel, the
// configuration error builder and the zero-means-default rules.
package wal
