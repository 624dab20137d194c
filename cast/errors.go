package cast

import (
	"errors"

	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/internal/cfgerr"
	"github.com/walcast/walcast/wal"
)

// ErrConfig matches every configuration error of this package (a
// Producer's, a Consumer's, a Loop's), including those of the
// configurations they hold (protocol, wal, replay, affinity), which then
// match those packages' ErrConfig too. The message names the field:
// "cast: invalid configuration: Sender.RingSlots: …".
var ErrConfig = cfgerr.Sentinel("cast")

// Errors of a Producer and a Consumer.
var (
	// ErrClosed is returned by Publish and Flush after Close, and by Run
	// on a Consumer that already ran.
	ErrClosed = errors.New("cast: closed")
	// ErrEnded is returned by Publish and TryPublish after
	// Producer.End: the stream is closed at its last seq. It is
	// protocol.ErrEnded.
	ErrEnded = protocol.ErrEnded
	// ErrBackpressure is returned by TryPublish when the publish queue is
	// full (the loop, the WAL or the network is behind). It is
	// wal.ErrBackpressure, so one errors.Is covers the WAL's own.
	ErrBackpressure = wal.ErrBackpressure
	// ErrRecord is returned by Publish for a record the stream cannot
	// carry: a type the protocol reserves (the error then matches
	// wire.ErrReserved too, which Loop.Publish and protocol.Sender.Send
	// return for the same types), or a payload outside 8..MaxPayload
	// bytes. The producer stays healthy.
	ErrRecord = errors.New("cast: record refused")
	// ErrStop, returned by a Consumer's deliver callback, applies the
	// record and ends Run with a nil error.
	ErrStop = errors.New("cast: stop")
	// ErrSenderBehind: the producer announced a highest seq below the
	// consumer's tip, and its WAL no longer holds the consumer's last
	// record: it restarted and lost records this consumer had already
	// delivered (sent before they were durable). Run returns it (wrapping
	// protocol.ErrSenderRestarted); the application decides.
	ErrSenderBehind = errors.New("cast: sender restarted behind the consumer's tip")
)

// errEnded stops a Consumer whose producer ended the stream.
var errEnded = errors.New("cast: stream ended")

// errOrder means a record reached the consumer out of order: a bug in a
// lower layer, never the network's doing.
var errOrder = errors.New("cast: consumer got a record out of order")
