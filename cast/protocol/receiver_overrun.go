package protocol

// overrunDetector tells a sender that outran the reorder window from a
// stray datagram. It counts datagrams that carried data beyond the
// window (one per datagram: counted is reset per Handle) and reports an
// overrun once need (OverrunEvidence) such datagrams arrived with no
// pause longer than span (NakDebounce), either over at least span or —
// while the sender speaks probes, so it honoured the window and has now
// moved on without this receiver (it released it) — all at least two
// windows ahead. A burst before the sender heard the first Status is
// repaired by NAK instead.
//
// Invariant: far ≤ n; while n > 0 the run's datagrams came at since …
// last with no pause longer than span between two of them; counted says
// whether the Handle call under way already counted (each resets it).
type overrunDetector struct {
	n, far      int   // datagrams in the current run; of those, two windows ahead
	since, last int64 // first and last of the run
	counted     bool  // the datagram being handled already counted
	span        int64
	need        int
}

// see counts a datagram whose data lay ahead seqs past the next
// expected one (ahead ≥ window) and reports whether the evidence is
// complete.
func (o *overrunDetector) see(ahead, window uint64, probes bool, now int64) bool {
	if o.counted {
		return false
	}
	o.counted = true
	if o.n == 0 || now-o.last > o.span {
		o.since, o.n, o.far = now, 0, 0
	}
	o.n++
	if probes && ahead >= 2*window {
		o.far++
	}
	o.last = now
	return o.n >= o.need && (now-o.since >= o.span || o.far >= o.need)
}
