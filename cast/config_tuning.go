package cast

import (
	"crypto/tls"
	"time"

	"github.com/walcast/walcast/replay"
	"github.com/walcast/walcast/wal"
)

// The tuning types below are the configs of the packages a Producer and
// a Consumer assemble (wal, replay), without the fields the cast config
// sets itself: a setting has one place, so nothing can disagree with
// ProducerConfig.Dir, Stream, TLS or Plaintext, or with
// ConsumerConfig.Replay, Stream, TLS, Plaintext or TipPath. Each field
// means what the field of the same name means in the package's config
// (documented there); zero is its default. TestTuningMirrors keeps them
// complete.

// WALTuning tunes a Producer's write-ahead log: the fields of
// [wal.Config] but Dir and Stream (ProducerConfig's).
type WALTuning struct {
	SegmentSize         int64         // bytes at which a segment is sealed
	BufferSize          int           // in-memory record buffer, bytes
	FlushInterval       time.Duration // longest a record waits before its write starts
	FlushRecords        int           // pending records that start a flush
	FlushBytes          int           // pending bytes that start a flush
	MaxFlushLag         time.Duration // flush lag above which Append applies backpressure
	BlockOnBackpressure bool          // Append waits for room instead of ErrBackpressure
	Retention           time.Duration // age after which a sealed segment is deleted (negative: keep all)
	SeqReserve          int           // seqs reserved durably ahead of the appender
	VerifySealed        bool          // Open reads and checks every sealed segment
	Repair              bool          // Open repairs a damaged log instead of refusing it
	DisableDirectIO     bool          // buffered writes + fdatasync even where O_DIRECT works
}

func (t WALTuning) config(dir string, stream uint32) wal.Config {
	return wal.Config{
		Dir: dir, Stream: stream,
		SegmentSize: t.SegmentSize, BufferSize: t.BufferSize, FlushInterval: t.FlushInterval,
		FlushRecords: t.FlushRecords, FlushBytes: t.FlushBytes, MaxFlushLag: t.MaxFlushLag,
		BlockOnBackpressure: t.BlockOnBackpressure, Retention: t.Retention, SeqReserve: t.SeqReserve,
		VerifySealed: t.VerifySealed, Repair: t.Repair, DisableDirectIO: t.DisableDirectIO,
	}
}

// ReplayServerTuning tunes a Producer's replay server: the fields of
// [replay.ServerConfig] but TLS and Plaintext (ProducerConfig's).
type ReplayServerTuning struct {
	AnyClient         bool          // serve TLS clients without a certificate (no mutual TLS)
	HandshakeTimeout  time.Duration // TLS handshake + reading the request
	WriteTimeout      time.Duration // longest one write may block before the consumer is dropped
	BufferBytes       int           // per-connection write buffer
	ReadBufferBytes   int           // per-connection WAL read buffer
	KeepaliveInterval time.Duration // CaughtUp repeat in a quiet live tail
	MaxConns          int           // concurrent connections (negative: no cap)
	OnDisconnect      func(replay.ConnReport)
}

func (t ReplayServerTuning) config(tc *tls.Config, plaintext bool) replay.ServerConfig {
	return replay.ServerConfig{
		TLS: tc, Plaintext: plaintext,
		AnyClient: t.AnyClient, HandshakeTimeout: t.HandshakeTimeout, WriteTimeout: t.WriteTimeout,
		BufferBytes: t.BufferBytes, ReadBufferBytes: t.ReadBufferBytes, KeepaliveInterval: t.KeepaliveInterval,
		MaxConns: t.MaxConns, OnDisconnect: t.OnDisconnect,
	}
}

// ReplayClientTuning tunes a Consumer's catch-up client: the fields of
// [replay.ClientConfig] but Endpoints, Stream, TLS, Plaintext, TipPath
// and StartTip (ConsumerConfig's).
type ReplayClientTuning struct {
	TipInterval    time.Duration   // longest a delivered record waits for the tip file
	ConnectTimeout time.Duration   // TCP connect + TLS handshake + request
	ReadTimeout    time.Duration   // silence tolerated before CaughtUp
	IdleTimeout    time.Duration   // silence tolerated after CaughtUp
	KeepAlive      time.Duration   // TCP keepalive (negative: off)
	Backoff        []time.Duration // delay before retry n, the last repeating
	Jitter         float64         // Backoff's random factor (negative: none)
	RetryBudget    int             // consecutive failed connections before ErrBlocked (negative: no retry)
	BufferBytes    int             // read buffer per connection
	OnEvent        func(replay.Event)
}

func (t ReplayClientTuning) config() replay.ClientConfig {
	return replay.ClientConfig{
		TipInterval: t.TipInterval, ConnectTimeout: t.ConnectTimeout, ReadTimeout: t.ReadTimeout,
		IdleTimeout: t.IdleTimeout, KeepAlive: t.KeepAlive, Backoff: t.Backoff, Jitter: t.Jitter,
		RetryBudget: t.RetryBudget, BufferBytes: t.BufferBytes, OnEvent: t.OnEvent,
	}
}
