package wal

import (
	"slices"
	"time"

	"github.com/walcast/walcast/wire"
)

type ioStats struct {
	flushes, flushErrs, rotations, pruned uint64
	lat                                   [1024]int64
	latN                                  uint64
	latMax                                int64
	lastErr                               string
	recovery                              Recovery
}

// Recovery describes what Open found and repaired.
type Recovery struct {
	Segments     int    // sealed segments found
	Records      uint64 // records in the log after recovery
	TornAt       int64  // byte offset in the active segment where a torn tail was cut (-1: none)
	TornReason   string // what was wrong with the first bad record
	IndexRebuilt int    // sidecar indexes rebuilt (missing or stale)
	ScannedBytes int64  // bytes of the active segment read and checked
	// Damage lists every damaged place found (Open then failed with the
	// first, unless Config.Repair repaired them: see Repaired).
	Damage []DamageError
	// Repaired is what Config.Repair did (nil when it did not run).
	Repaired *RepairReport
	// Skip is the marker Open wrote because the log had not been closed
	// cleanly (nil when it did not write one): seqs Skip.From … Skip.Seq−1
	// were reserved and may have been sent, but never became durable.
	Skip *wire.Skip
	// Unknown lists *.wal files in the stream directory that are not
	// segments of this stream (ignored, reported).
	Unknown []string
	// OrphanIndexes lists sidecars without a segment (a kill during
	// pruning); Open removed them.
	OrphanIndexes []string
}

// Stats is a snapshot of the Writer's counters.
type Stats struct {
	Direct       bool   // writes use O_DIRECT (false: buffered + fdatasync)
	DirectNote   string // why O_DIRECT is off, or the alignment source
	Align        int    // I/O block size in bytes
	NextSeq      uint64
	Durable      uint64
	Oldest       uint64
	Segments     int
	Flushes      uint64 // successful write+sync rounds
	FlushErrors  uint64
	FlushP50     time.Duration // over the last 1024 flushes
	FlushP99     time.Duration
	FlushMax     time.Duration // since Open
	Backpressure uint64        // Appends refused (or made to wait)
	Rotations    uint64
	Pruned       uint64 // sealed segments deleted by retention
	ColdReads    uint64 // ReadAt/ReadRange served from disk
	BufferReads  uint64 // ReadAt/ReadRange served from the unflushed buffer
	LastError    string // last flush error ("" after a success)
	Recovery     Recovery
}

// Stats returns a snapshot of the counters.
func (w *Writer) Stats() Stats {
	w.mu.RLock()
	nseg := len(w.segs)
	direct, note := w.direct, w.dirNote
	w.mu.RUnlock()
	w.statsMu.Lock()
	st := w.st
	w.statsMu.Unlock()
	s := Stats{
		Direct: direct, DirectNote: note, Align: int(w.align),
		NextSeq: w.NextSeq(), Durable: w.Durable(), Segments: nseg,
		Flushes: st.flushes, FlushErrors: st.flushErrs, FlushMax: time.Duration(st.latMax),
		Backpressure: w.bpCount.Load(), Rotations: st.rotations, Pruned: st.pruned,
		ColdReads: w.coldReads.Load(), BufferReads: w.bufReads.Load(),
		LastError: st.lastErr, Recovery: st.recovery,
	}
	s.Oldest, _ = w.Bounds()
	n := min(st.latN, uint64(len(st.lat)))
	if n > 0 {
		v := slices.Clone(st.lat[:n])
		slices.Sort(v)
		s.FlushP50 = time.Duration(v[(n-1)/2])
		s.FlushP99 = time.Duration(v[min(n-1, (n*99+99)/100-1)])
	}
	return s
}
