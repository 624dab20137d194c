// Package replay carries a stream's history and live tail over TCP (the
// reference's "DXS" path): a [Server] that serves one or more streams from
// their write-ahead logs, a [Client] that catches up from a persisted tip
// and follows the live tail, the tip file, and TLS helpers (including a
// development PKI, [NewDevPKI]).
//
// The bytes on the TCP stream are the WAL's bytes: each record is its
// 16-byte header plus payload exactly as appended, so nothing is
// re-encoded between disk, UDP and TCP.
//
// What it owns: the replication protocol (ReplicationRequest →
// NotAvailable, or history from from_seq, CaughtUp, live tail), per
// connection buffering and slow-consumer disconnects, endpoint federation,
// reconnect backoff, timeouts, and tip persistence.
//
// What it must not do: write to a WAL, read a stream from a segment's
// start (a [Source] seeks by seq), poll for new records when the source
// can notify, or stall a producer — a connection only ever reads durable
// records, never holds a writer's lock, and is dropped when its peer
// stops draining. Library code here never logs; it returns errors and
// counts events ([ServerStats], [ClientStats]).
package replay
