package protocol

import "math"

// RTT is a round-trip-time estimator in the style of RFC 6298 §2: the
// first sample R sets SRTT = R and RTTVar = R/2; each later sample sets
// RTTVar = ¾·RTTVar + ¼·|SRTT − R| and then SRTT = ⅞·SRTT + ⅛·R. All
// values are ns. The zero value has no sample. Sample allocates nothing.
//
// Invariant: srtt > 0 exactly once a sample or a seed was taken (Valid);
// rttvar ≥ 0; samples counts the samples taken, not seeds.
type RTT struct {
	srtt, rttvar int64
	samples      uint64
}

// Sample folds one measured round trip (ns) into the estimate. Samples ≤ 0
// (clock skew between two readings, a stale echo) are ignored.
func (e *RTT) Sample(r int64) {
	if r <= 0 {
		return
	}
	if e.samples == 0 {
		e.srtt, e.rttvar = r, r/2
	} else {
		d := e.srtt - r
		if d < 0 {
			d = -d
		}
		e.rttvar += (d - e.rttvar) / 4
		e.srtt += (r - e.srtt) / 8
	}
	e.samples++
}

// Seed sets the estimate from a peer's figures when this side has no
// sample of its own yet (a receiver before its first repair).
func (e *RTT) Seed(srtt, rttvar int64) {
	if e.samples == 0 && srtt > 0 {
		e.srtt, e.rttvar = srtt, max(rttvar, 0)
	}
}

// SRTT is the smoothed RTT in ns (0 before any sample or seed).
func (e RTT) SRTT() int64 { return e.srtt }

// RTTVar is the RTT variation in ns.
func (e RTT) RTTVar() int64 { return e.rttvar }

// Samples is the number of samples taken.
func (e RTT) Samples() uint64 { return e.samples }

// Valid reports whether the estimate has a sample or a seed.
func (e RTT) Valid() bool { return e.srtt > 0 }

// Timeout is clamp(SRTT + 4·RTTVar, floor, ceil) in ns (RFC 6298's RTO
// with this stream's bounds); ceil when the estimate is not valid.
func (e RTT) Timeout(floor, ceil int64) int64 {
	if !e.Valid() {
		return ceil
	}
	return clamp(e.srtt+4*e.rttvar, floor, ceil)
}

func clamp(v, lo, hi int64) int64 {
	if v < lo {
		v = lo
	}
	if v > hi {
		v = hi
	}
	return v
}

// sat32 clamps a non-negative ns value to a u32 field.
func sat32(v int64) uint32 {
	switch {
	case v <= 0:
		return 0
	case v > math.MaxUint32:
		return math.MaxUint32
	}
	return uint32(v)
}
