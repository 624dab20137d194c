package wal

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/walcast/walcast/internal/feature"
	"github.com/walcast/walcast/internal/pressure"
	"github.com/walcast/walcast/wire"
)

// Config configures a [Writer]. A zero field means its default
// (DefaultConfig shows them); only Dir is required. [Open] calls
// [Config.Validate].
type Config struct {
	// Dir is the WAL root. The stream's files live in Dir/<Stream>/ (the
	// reference layout, see [StreamDir]); Open creates it.
	Dir string
	// Stream is the stream id; it is the <sid> of every file name.
	Stream uint32
	// SegmentSize is the size in bytes at which the active segment is
	// sealed and a new one started (default 64 MiB). The active file is
	// preallocated to this size. A sealed segment never holds more than
	// SegmentSize bytes unless a single record is larger.
	SegmentSize int64
	// BufferSize is the in-memory record buffer in bytes (rounded up to a
	// power of two; default 8 MiB). Records wait here until they are
	// durable; when it is full Append applies backpressure.
	BufferSize int
	// FlushInterval is the longest time in ns a record waits before the I/O
	// goroutine starts writing it (default 10 ms).
	FlushInterval time.Duration
	// FlushRecords starts a flush once this many records are pending
	// (default 1000).
	FlushRecords int
	// FlushBytes starts a flush once this many bytes are pending
	// (default 64 KiB).
	FlushBytes int
	// MaxFlushLag is the flush lag above which Append applies backpressure
	// (default 10 ms). The lag is how long the I/O goroutine has been busy
	// with a write+sync that has not completed (or has been failing):
	// a slow or full disk, not the intentional FlushInterval batching.
	MaxFlushLag time.Duration
	// BlockOnBackpressure makes Append wait for room instead of returning
	// ErrBackpressure.
	BlockOnBackpressure bool
	// Retention is the age (file mtime) after which a sealed segment is
	// deleted; pruning runs at every rotation (default 4 h; negative:
	// keep everything).
	Retention time.Duration
	// SeqReserve is how many seqs the I/O goroutine reserves durably
	// ahead of the appender (default 65536; at least 64). Append never
	// assigns a seq beyond the reservation, so a crash can only leave
	// reserved seqs unused, never reissue one with other content: Open
	// continues after the reservation with a Skip marker. The cost is one
	// small write + fdatasync every SeqReserve/2 records, on the I/O
	// goroutine.
	SeqReserve int
	// VerifySealed makes Open read and check every record of every sealed
	// segment. By default a sealed segment whose sidecar index matches it
	// (size, first and last record) is trusted without reading the rest;
	// the active segment is always read whole. Damage a default Open does
	// not see is found when the record is read (ReadAt, replay) and by
	// Verify.
	VerifySealed bool
	// Repair makes Open repair a damaged or mislabelled log (see
	// [Repair]: mislabelled segments are renamed, damaged records are
	// moved to a quarantine directory and replaced by Skip markers)
	// instead of refusing it with a *DamageError or *MislabelError.
	Repair bool
	// DisableDirectIO forces buffered writes + fdatasync even where
	// O_DIRECT works (for comparison benchmarks).
	DisableDirectIO bool

	// sys replaces the syscall seam for this Writer (tests, fuzzing).
	sys *sysOps
}

// DefaultConfig returns the defaults of the reference: 64 MiB segments,
// flush every 10 ms or 1000 records or 64 KiB, 10 ms maximum flush lag,
// 4 h retention, stream 0.
func DefaultConfig(dir string) Config {
	return Config{
		Dir:           dir,
		SegmentSize:   64 << 20,
		BufferSize:    8 << 20,
		FlushInterval: 10 * time.Millisecond,
		FlushRecords:  1000,
		FlushBytes:    64 << 10,
		MaxFlushLag:   10 * time.Millisecond,
		Retention:     4 * time.Hour,
		SeqReserve:    1 << 16,
	}
}

// Limits checked by Validate.
const (
	MinSegmentSize = 8 << 10   // bytes
	MaxSegmentSize = 1 << 31   // bytes; index offsets are u32
	MinBufferSize  = 256 << 10 // bytes; holds several maximum-size frames
	MaxBufferSize  = 1 << 30   // bytes
	MinSeqReserve  = 64        // seqs
)

// Validate reports the first field that is out of range.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Dir == "":
		return fmt.Errorf("%w: Dir is empty", ErrConfig)
	case c.SegmentSize < MinSegmentSize || c.SegmentSize > MaxSegmentSize:
		return fmt.Errorf("%w: SegmentSize %d outside [%d, %d]", ErrConfig, c.SegmentSize, MinSegmentSize, int64(MaxSegmentSize))
	case c.BufferSize < MinBufferSize || c.BufferSize > MaxBufferSize:
		return fmt.Errorf("%w: BufferSize %d outside [%d, %d]", ErrConfig, c.BufferSize, MinBufferSize, MaxBufferSize)
	case c.FlushInterval <= 0:
		return fmt.Errorf("%w: FlushInterval %v must be positive", ErrConfig, c.FlushInterval)
	case c.FlushRecords <= 0:
		return fmt.Errorf("%w: FlushRecords %d must be positive", ErrConfig, c.FlushRecords)
	case c.FlushBytes <= 0:
		return fmt.Errorf("%w: FlushBytes %d must be positive", ErrConfig, c.FlushBytes)
	case c.MaxFlushLag <= 0:
		return fmt.Errorf("%w: MaxFlushLag %v must be positive", ErrConfig, c.MaxFlushLag)
	case c.SeqReserve < MinSeqReserve:
		return fmt.Errorf("%w: SeqReserve %d below %d", ErrConfig, c.SeqReserve, MinSeqReserve)
	case c.Retention < 0:
		return fmt.Errorf("%w: Retention %v is negative", ErrConfig, c.Retention)
	}
	return nil
}

// StreamDir returns the directory holding stream's files under the WAL
// root dir: dir/<stream>.
func StreamDir(dir string, stream uint32) string {
	return filepath.Join(dir, strconv.FormatUint(uint64(stream), 10))
}

// Errors returned by the Writer and Reader.
var (
	// ErrNotFound: the seq is not in the log (never written, pruned, or 0).
	ErrNotFound = errors.New("wal: record not found")
	// ErrBackpressure: Append cannot take the record now (buffer full or
	// flush lag above MaxFlushLag); nothing was appended. Retry later.
	// protocol.ErrBackpressure matches it too (both are pressure.Err).
	ErrBackpressure = pressure.Err
	// ErrClosed: the Writer or Reader is closed.
	ErrClosed = errors.New("wal: closed")
	// ErrPayloadSize: Append's payload is shorter than 8 bytes (no room
	// for the seq) or longer than MaxPayload.
	ErrPayloadSize = errors.New("wal: payload must be 8..65535 bytes")
	// ErrNotSupported: a kernel or platform feature is missing. It is
	// walcast's one "not supported" value (batch.ErrNotSupported,
	// affinity.ErrNotSupported, … are the same), and errors.Is(err,
	// errors.ErrUnsupported) holds for every error that matches it.
	ErrNotSupported = feature.ErrNotSupported
	// ErrStalled: a write+sync has not returned for StallTimeout (a disk
	// that stopped answering); see Writer.Err.
	ErrStalled = errors.New("wal: flush stalled: the disk has not completed a write for 5 s")
	// ErrLocked: another Writer holds the stream directory.
	ErrLocked = errors.New("wal: stream directory is locked by another writer")
)

// FrameError names a bad frame in a file: the file, its byte offset and
// what is wrong (Err is one of the codec's sentinels; errors.Is(err,
// wire.ErrCorrupt) holds).
type FrameError struct {
	File string
	Off  int64
	Seq  uint64 // the seq expected at Off (0 when unknown)
	Err  error
}

func (e *FrameError) Error() string {
	return fmt.Sprintf("%s: offset %d (expected seq %d): %v", e.File, e.Off, e.Seq, e.Err)
}

func (e *FrameError) Unwrap() error { return e.Err }

// errSeq: a frame decodes but carries the wrong seq.
var errSeq error = seqError{}

// seqError is errSeq's type: it matches wire.ErrCorrupt like every other
// bad-frame error.
type seqError struct{}

func (seqError) Error() string        { return "wal: record carries an unexpected seq" }
func (seqError) Is(target error) bool { return target == wire.ErrCorrupt }

// ErrSeq is returned (wrapped in FrameError) when a frame is intact but its
// seq is not the one its position requires.
var ErrSeq = errSeq

// ioError is a failed flush; Append returns it in place of
// ErrBackpressure while the I/O goroutine keeps failing.
type ioError struct{ err error }

func (e *ioError) Error() string { return "wal: flush failed: " + e.err.Error() }
func (e *ioError) Unwrap() error { return e.err }
func (e *ioError) Is(target error) bool {
	return target == ErrBackpressure
}
