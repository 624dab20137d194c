package protocol

// SenderStats are the Sender's counters. All are totals since NewSender.
type SenderStats struct {
	Sent       uint64 // data records sent (first transmission)
	Heartbeats uint64 // heartbeats sent
	// HeartbeatsWithheld counts heartbeat intervals in which no heartbeat
	// was sent because the log reported an error (LogHealth).
	HeartbeatsWithheld uint64
	// SkipsSent counts first transmissions of the log's Skip marker (sent
	// before the first record after a restart); repeats for NAKs of
	// skipped seqs count as retransmits (RetxHot, RetxCold).
	SkipsSent uint64
	Naks      uint64 // NAK records accepted (version, len, CRC, source all good)
	Bad       BadCounts
	BadSource uint64 // NAK datagrams from a source other than the receiver
	Ignored   uint64 // valid frames of a type other than NAK
	// NakClamped counts NAKs whose count exceeded RingSlots.
	NakClamped uint64
	// NakNeverSent counts NAKs that asked for seqs not yet sent (or 0);
	// those seqs are ignored.
	NakNeverSent uint64
	RetxHot      uint64 // retransmits served from the hot ring
	RetxCold     uint64 // retransmits served from cold reads
	RetxDedup    uint64 // retransmits suppressed by the dedup window
	RetxDeferred uint64 // NAKed ranges continued on a later Tick (batch full)
	RetxDropped  uint64 // NAKed seqs dropped: too many ranges waiting for batch room
	ColdQueued   uint64 // cold requests queued
	// ColdDedup counts cold seqs not read again: covered by a queued or
	// running request, or served within RetxDedupWindow.
	ColdDedup uint64
	// ColdOverBudget counts cold seqs dropped because the ColdRate budget
	// was spent (the receiver asks again).
	ColdOverBudget uint64
	ColdRejected   uint64 // cold seqs dropped: every request slot busy, or no WAL
	ColdMissing    uint64 // requested cold seqs the WAL did not return
	ColdErrors     uint64 // cold reads reported failed by the loop

	// Flow control (walcast extension; all zero while no receiver has
	// sent a Status).
	Statuses       uint64 // valid Status frames accepted
	BadStatus      uint64 // Status frames whose payload is invalid
	StaleStatus    uint64 // Status older (by serial) than one already seen
	StatusRejected uint64 // Status from a new receiver while the table was full
	Backpressured  uint64 // Send/SendFrame calls refused with ErrBackpressure
	InitialHeld    uint64 // of which by the initial window (no Status heard yet)
	// InitialProbes counts heartbeats sent in place of the initial
	// window's last record, so that a receiver that sends no Status NAKs
	// it; InitialReleased is 1 once a NAK with no Status released the
	// initial window.
	InitialProbes   uint64
	InitialReleased uint64
	Probes          uint64 // heartbeats sent in the probe form (counted in Heartbeats too)
	TailProbes      uint64 // of which tail-loss probes
	RTTProbes       uint64 // of which periodic RTT probes
	SessionEnds     uint64 // session end markers sent (End, then every HeartbeatInterval)
	ReceiversJoined uint64 // ReceiverJoined and ReceiverRestarted events
	ReceiversLost   uint64 // receivers dropped for silence, or evicted (ReceiversEvicted)
	// ReceiversEvicted counts receivers that never echoed a probe, dropped
	// to make room in a full table for a new one (see SenderConfig.MaxReceivers).
	ReceiversEvicted uint64
	EventsDropped    uint64 // events not queued because 32 were unread
}
