package cast

import (
	"time"

	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/replay"
)

// ConsumerStats are a [Consumer]'s counters. Exact once Run has returned.
type ConsumerStats struct {
	Tip         uint64 // last seq delivered
	UDPRecords  uint64 // records delivered from the UDP receiver
	TCPRecords  uint64 // records delivered by TCP catch-ups
	Escalations uint64 // sticky outcomes handled
	Faults      uint64 // of which Faulted
	Reconnects  uint64 // of which Reconnect
	CatchUps    uint64 // TCP catch-ups completed (bootstrap included)
	Skips       uint64 // Skip markers applied
	// LostSeqs counts seqs this consumer delivered that a Skip marker then
	// declared without a record (each reported by an EventSkip).
	LostSeqs uint64
	// StaleRestarts counts SenderRestarted outcomes dismissed because the
	// producer still holds the tip record: a heartbeat from before a
	// catch-up, read after the reset.
	StaleRestarts uint64
	LastRecovery  time.Duration
	Receiver      protocol.ReceiverStats // at most a tick old while Run runs
	Loop          LoopStats
	Replay        replay.ClientStats
	Auth          AuthStats // with Keys: datagrams sealed, opened and refused by authentication, refusals while waiting for the producer included (docs/auth.md)
}
