package replay

import (
	"context"
	"errors"
)

// Source is one stream's durable history as the server sees it. A WAL
// writer in the same process, or a WAL directory written by another
// process, is adapted to it; tests use an in-memory fake.
//
// All methods may be called concurrently from many connections.
type Source interface {
	// Stream is the stream id this source serves.
	Stream() uint32

	// Bounds returns the oldest seq held and the highest durable seq
	// (on disk and synced). Both are 0 when the source holds nothing.
	Bounds() (oldest, durable uint64)

	// Open returns a cursor positioned at the first record whose seq is
	// ≥ from (from = 0: the oldest record). It must seek (through an
	// index), not scan from a segment's start.
	Open(from uint64) (Cursor, error)

	// WaitDurable blocks until the durable seq exceeds after or ctx is
	// done, and returns the durable seq. It is a notification (woken by
	// the writer's flush), not a poll loop, where the source can notify.
	WaitDurable(ctx context.Context, after uint64) (uint64, error)
}

// BufferOpener is a [Source] whose cursors can read through a buffer the
// caller provides: the server gives each connection one of
// ServerConfig.ReadBufferBytes, so a connection's memory is bounded and
// returned when it ends. WriterSource and DirSource implement it.
type BufferOpener interface {
	// OpenBuffer is Open reading through buf (at least
	// wal.MinReaderBuffer bytes); frames returned by the cursor alias
	// buf, and buf is the caller's again after Close.
	OpenBuffer(from uint64, buf []byte) (Cursor, error)
}

// Cursor reads consecutive frames of one stream.
type Cursor interface {
	// Next returns the next frame (16-byte header plus payload). The slice
	// is owned by the cursor and valid until the next call to Next or
	// Close. At the current end of the stream it returns io.EOF; calling
	// Next again later continues with records written since.
	Next() (frame []byte, err error)

	// Close releases the cursor's files.
	Close() error
}

// Errors a Server or Client reports. They are wrapped with context; test
// with errors.Is.
var (
	// ErrNotAvailable: the endpoint does not hold from_seq (it answered
	// ReplicationNotAvailable). The client moves to the next endpoint.
	ErrNotAvailable = errors.New("replay: endpoint does not hold the requested seq")
	// ErrDamaged: the endpoint's log is damaged at the next seq the client
	// needs (it sent every record before it, then a NotAvailable naming
	// the seq). The client tries its other endpoints, then gives up
	// without retrying: a damaged log does not heal by waiting (repair it:
	// `cast wal repair`).
	ErrDamaged = errors.New("replay: endpoint's log is damaged")
	// ErrAllEndpoints: every endpoint refused or failed in one pass.
	ErrAllEndpoints = errors.New("replay: no endpoint could serve the request")
	// ErrBlocked: the client's retry budget is exhausted.
	ErrBlocked = errors.New("replay: retry budget exhausted (BLOCKED)")
	// ErrStop may be returned by a Handler to end Run without error.
	ErrStop = errors.New("replay: stopped by handler")
	// ErrGap: a record's seq is not the one after the last record
	// (a server or source fault); the connection is dropped.
	ErrGap = errors.New("replay: seq gap on the stream")
	// ErrProtocol: a frame of an unexpected type or shape.
	ErrProtocol = errors.New("replay: protocol violation")
	// ErrSlowConsumer: the peer did not drain the connection within the
	// write timeout; the server dropped it.
	ErrSlowConsumer = errors.New("replay: consumer too slow, disconnected")
	// ErrIdle: no frame arrived within the read or idle timeout.
	ErrIdle = errors.New("replay: peer silent past the timeout")
	// ErrConfig: an invalid configuration.
	ErrConfig = errors.New("replay: invalid configuration")
)
