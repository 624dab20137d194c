package cast

import (
	"crypto/tls"
	"time"

	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/replay"
	"github.com/walcast/walcast/wal"
)

// The tuning types below are the configs of the packages a Producer and
// a Consumer assemble (cast/protocol, wal, replay), without the fields
// the cast config sets itself: a setting has one place, so nothing can
// disagree with ProducerConfig.To, Dir, Stream, TLS or Plaintext, or
// with ConsumerConfig.From, Replay, Stream, TLS, Plaintext, TipPath or
// Advanced.StartTip, StartNow and Control. Each field means what the
// field of the same name means in the package's config (documented
// there); zero is its default. TestTuningMirrors keeps them complete.

// SenderTuning tunes a Producer's protocol sender: the fields of
// [protocol.SenderConfig] but Dest, NakSource and AcceptAnyNakSource.
// The Producer sends to ProducerConfig.To and serves the NAKs of the
// consumer there (of any member, when To is a multicast group); a
// connected Path sends to its peer, and the kernel filters what it hears.
type SenderTuning struct {
	MaxFrame          int                 // largest frame, header included, bytes: the payload limit is 16 less (50 less with Keys)
	RingSlots         int                 // records kept in the hot ring for retransmission (a power of two)
	HeartbeatInterval time.Duration       // idle time after which a heartbeat goes out
	RetxDedupWindow   time.Duration       // a ring slot is retransmitted at most once per window (negative: no dedup)
	MaxColdInFlight   int                 // reads of the WAL running at once
	MaxColdQueued     int                 // NAKed cold runs waiting for a read (negative: none)
	MaxColdRecords    int                 // records of one read of the WAL
	ColdRate          int64               // records/s served from the WAL at most
	ColdBurst         int64               // records served from the WAL at once at most
	Coalesce          bool                // pack consecutive frames into datagrams of up to MaxFrame
	NoFlowControl     bool                // ignore the consumers' Status frames (the reference's behaviour)
	ReceiverTimeout   time.Duration       // a consumer silent this long no longer holds the producer back
	MaxReceivers      int                 // size of the flow-control table
	FlowPolicy        protocol.FlowPolicy // how several consumers' windows combine (FlowMin by default)
	Tagged            []uint64            // the consumer ids FlowTagged waits for
	ProbeFloor        time.Duration       // shortest tail-loss probe timeout
	RTTProbeInterval  time.Duration       // an RTT probe at least this often while data flows
	ID                uint64              // sender id carried in probes (0: random)
	InitialWindow     int                 // records sent before any Status is heard (negative: no bound)
	InitialWait       time.Duration       // longest InitialWindow holds
}

// Config is the protocol sender config t describes, with Dest, NakSource
// and AcceptAnyNakSource zero: for a Sender built by hand (a Loop of
// one's own), tuned as a Producer's would be.
func (t SenderTuning) Config() protocol.SenderConfig {
	return protocol.SenderConfig{
		MaxFrame: t.MaxFrame, RingSlots: t.RingSlots, HeartbeatInterval: t.HeartbeatInterval,
		RetxDedupWindow: t.RetxDedupWindow, MaxColdInFlight: t.MaxColdInFlight, MaxColdQueued: t.MaxColdQueued,
		MaxColdRecords: t.MaxColdRecords, ColdRate: t.ColdRate, ColdBurst: t.ColdBurst, Coalesce: t.Coalesce,
		NoFlowControl: t.NoFlowControl, ReceiverTimeout: t.ReceiverTimeout, MaxReceivers: t.MaxReceivers,
		FlowPolicy: t.FlowPolicy, Tagged: t.Tagged, ProbeFloor: t.ProbeFloor, RTTProbeInterval: t.RTTProbeInterval,
		ID: t.ID, InitialWindow: t.InitialWindow, InitialWait: t.InitialWait,
	}
}

// ReceiverTuning tunes a Consumer's protocol receiver: the fields of
// [protocol.ReceiverConfig] but Sender, Start and StartNow. NAKs go to
// the producer (ConsumerConfig.From, or the address learnt), or to
// ConsumerAdvanced.Control; delivery starts after the tip
// (ConsumerConfig.TipPath, ConsumerAdvanced.StartTip: seq 1 without one)
// or, with ConsumerAdvanced.StartNow, at the first record heard.
type ReceiverTuning struct {
	MaxFrame          int           // largest frame, header included, bytes (at least the producer's)
	ReorderSlots      int           // reorder window in records (a power of two): the producer runs at most this far ahead
	NakDebounce       time.Duration // longest time between two NAKs of one gap (negative: every pump)
	MaxNakRetries     int           // NAKs of one gap before Faulted (negative: none, the first re-NAK faults)
	HeartbeatInterval time.Duration // the producer's heartbeat interval, in which silence is measured
	SilenceIntervals  int           // heartbeat intervals of silence: Faulted with a gap open, else EventPeerSilent
	MaxNakRunsPerPump int           // NAKs one pump sends at most
	NoStatus          bool          // send no Status frames: the reference's bytes, no flow control
	ID                uint64        // receiver id carried in Status (0: random)
	StatusInterval    time.Duration // shortest time between two Status frames that are not urgent
	NakFloor          time.Duration // shortest adaptive re-NAK delay (negative: none)
	NakBackoff        int           // bound of a multicast member's NAK back-off, % of the smoothed RTT (negative: none)
	OverrunEvidence   int           // datagrams beyond the window, arriving back to back, that raise Reconnect
}

// Config is the protocol receiver config t describes, with Sender, Start
// and StartNow zero: for a Receiver built by hand (a Loop of one's own),
// tuned as a Consumer's would be.
func (t ReceiverTuning) Config() protocol.ReceiverConfig {
	return protocol.ReceiverConfig{
		MaxFrame: t.MaxFrame, ReorderSlots: t.ReorderSlots, NakDebounce: t.NakDebounce, MaxNakRetries: t.MaxNakRetries,
		HeartbeatInterval: t.HeartbeatInterval, SilenceIntervals: t.SilenceIntervals, MaxNakRunsPerPump: t.MaxNakRunsPerPump,
		NoStatus: t.NoStatus, ID: t.ID, StatusInterval: t.StatusInterval, NakFloor: t.NakFloor, NakBackoff: t.NakBackoff,
		OverrunEvidence: t.OverrunEvidence,
	}
}

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
