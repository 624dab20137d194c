package cast

import (
	"github.com/walcast/walcast/cast/protocol"
)

// LoopStats are the loop's own counters.
type LoopStats struct {
	Iterations  uint64 // loop iterations
	IdlePolls   uint64 // iterations that found nothing to do
	Datagrams   uint64 // datagrams received
	Delivered   uint64 // records delivered in order
	Flushes     uint64 // Path.Send calls
	Backlogged  uint64 // datagrams the path could not take at once (EAGAIN), sent later
	RingStalls  uint64 // times delivery waited for the application to drain RecvRing
	ColdReads   uint64 // cold reads served by the I/O goroutine
	ColdErrors  uint64 // cold reads that failed
	Published   uint64 // records taken from SendRing and sent
	PublishErrs uint64 // records from SendRing the Sender refused (dropped; see SendErr)
	IOYields    uint64 // idle iterations that gave the core to the WAL's I/O (see LoopConfig.Cold)
	Foreign     uint64 // datagrams dropped for coming from another address than Source
	// EarlyTicks counts core ticks run at a core's Deadline, before the
	// next TickInterval.
	EarlyTicks uint64
	// FullTicks counts ticks that found the batch full after the cores'
	// Tick (records sent this iteration took it) and flushed to tick
	// again, so their Status, probes and heartbeats still went out.
	FullTicks uint64
}

func (l *Loop) snapshot() {
	if l.snd == nil && l.rcv == nil {
		return
	}
	l.statsMu.Lock()
	l.lsPub = l.ls
	if l.snd != nil {
		l.sStats = l.snd.Stats()
		l.rcvN = l.snd.Receivers(l.rcvInfo)
	}
	if l.rcv != nil {
		l.rStats = l.rcv.Stats()
	}
	if l.auth != nil {
		l.authPub = l.auth.stats
	}
	l.statsMu.Unlock()
	l.publishCounters()
}

// SenderStats is a snapshot of the Sender's counters, at most one
// TickInterval old (exact after Close).
func (l *Loop) SenderStats() protocol.SenderStats {
	l.statsMu.Lock()
	defer l.statsMu.Unlock()
	return l.sStats
}

// Receivers is a snapshot of the Sender's flow-control table (the
// receivers heard from and not dropped: their delivered seq, window,
// state, RTT), at most one TickInterval old; at most 16 are reported.
// It allocates the returned slice.
func (l *Loop) Receivers() []protocol.ReceiverInfo {
	l.statsMu.Lock()
	defer l.statsMu.Unlock()
	return append([]protocol.ReceiverInfo(nil), l.rcvInfo[:l.rcvN]...)
}

// ReceiverStats is a snapshot of the Receiver's counters, at most one
// TickInterval old (exact after Close).
func (l *Loop) ReceiverStats() protocol.ReceiverStats {
	l.statsMu.Lock()
	defer l.statsMu.Unlock()
	return l.rStats
}

// Stats returns the loop's counters, at most one TickInterval old
// (exact after Close).
func (l *Loop) Stats() LoopStats {
	l.statsMu.Lock()
	defer l.statsMu.Unlock()
	return l.lsPub
}
