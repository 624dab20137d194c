// Package pressure holds the one backpressure sentinel that the WAL and
// the protocol core share, so that cast/protocol need not import wal to
// make its flow-control error match the WAL's: wal.ErrBackpressure is
// [Err], and protocol.ErrBackpressure matches it through errors.Is.
// It imports nothing of walcast's and must never grow more than sentinels.
package pressure

import "errors"

// Err is "try again later": nothing was taken.
var Err = errors.New("wal: backpressure")
