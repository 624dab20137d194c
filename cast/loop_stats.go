package cast

import (
	"sync"

	"github.com/walcast/walcast/cast/protocol"
)

// LoopStats are the loop's own counters.
type LoopStats struct {
	Iterations uint64 // loop iterations
	IdlePolls  uint64 // iterations that found nothing to do
	Datagrams  uint64 // datagrams received
	Delivered  uint64 // records delivered in order
	Flushes    uint64 // Path.Send calls
	Backlogged uint64 // datagrams the path could not take at once (EAGAIN), sent later
	RingStalls uint64 // times delivery waited for the application to drain RecvRing
	ColdReads  uint64 // cold reads served by the I/O goroutine
	ColdErrors uint64 // cold reads that failed
	// ColdTooLarge counts records read from the log for a retransmit
	// that were larger than the loop's datagrams and were skipped (see
	// EventColdTooLarge).
	ColdTooLarge uint64
	Published    uint64 // records taken from SendRing and sent
	PublishErrs  uint64 // records from SendRing the Sender refused (dropped; see SendErr)
	IOYields     uint64 // idle iterations that gave the core to the WAL's I/O (see LoopConfig.Cold)
	Foreign      uint64 // datagrams dropped for coming from another address than Source
	// EarlyTicks counts core ticks run at a core's Deadline, before the
	// next TickInterval.
	EarlyTicks uint64
	// FullTicks counts ticks that found the batch full after the cores'
	// Tick (records sent this iteration took it) and flushed to tick
	// again, so their Status, probes and heartbeats still went out.
	FullTicks uint64
}

// statsSnapshot is what the loop thread last published for other
// goroutines (every tick and at Close), under mu.
type statsSnapshot struct {
	mu        sync.Mutex
	loop      LoopStats
	sender    protocol.SenderStats
	receiver  protocol.ReceiverStats
	receivers []protocol.ReceiverInfo // the Sender's flow-control table
	n         int                     // receivers in use
}

func (l *Loop) snapshot() {
	if l.snd == nil && l.rcv == nil {
		return
	}
	l.snap.mu.Lock()
	l.snap.loop = l.ls
	if l.snd != nil {
		l.snap.sender = l.snd.Stats()
		l.snap.n = l.snd.Receivers(l.snap.receivers)
	}
	if l.rcv != nil {
		l.snap.receiver = l.rcv.Stats()
	}
	if l.auth != nil {
		l.authPub = l.auth.stats
	}
	l.snap.mu.Unlock()
	l.publishCounters()
}

// SenderStats is a snapshot of the Sender's counters, at most one
// TickInterval old (exact after Close).
func (l *Loop) SenderStats() protocol.SenderStats {
	l.snap.mu.Lock()
	defer l.snap.mu.Unlock()
	return l.snap.sender
}

// Receivers is a snapshot of the Sender's flow-control table (the
// receivers heard from and not dropped: their delivered seq, window,
// state, RTT), at most one TickInterval old; at most 16 are reported.
// It allocates the returned slice.
func (l *Loop) Receivers() []protocol.ReceiverInfo {
	l.snap.mu.Lock()
	defer l.snap.mu.Unlock()
	return append([]protocol.ReceiverInfo(nil), l.snap.receivers[:l.snap.n]...)
}

// ReceiverStats is a snapshot of the Receiver's counters, at most one
// TickInterval old (exact after Close).
func (l *Loop) ReceiverStats() protocol.ReceiverStats {
	l.snap.mu.Lock()
	defer l.snap.mu.Unlock()
	return l.snap.receiver
}

// Stats returns the loop's counters, at most one TickInterval old
// (exact after Close).
func (l *Loop) Stats() LoopStats {
	l.snap.mu.Lock()
	defer l.snap.mu.Unlock()
	return l.snap.loop
}
