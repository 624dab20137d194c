package benchkit

// Row is one line of a benchmark report: one protocol or path under one
// workload, measured in the same run as its floor.
type Row struct {
	Workload  string  `json:"workload"`          // rtt, oneway, throughput, wal, ...
	Name      string  `json:"name"`              // casting-udp, raw-udp, kcp, ...
	Path      string  `json:"path,omitempty"`    // udp, mmsg, xdp, mem, tcp
	Mode      string  `json:"mode,omitempty"`    // spin, netpoll, ...
	Latency   Summary `json:"latency,omitzero"`  // per-operation latency, ns
	Records   int64   `json:"records,omitempty"` // records moved
	Seconds   float64 `json:"seconds,omitempty"` // wall time of the measured phase
	RecPerS   float64 `json:"rec_per_s,omitempty"`
	Gbps      float64 `json:"gbps,omitempty"`      // payload+header bits per second / 1e9
	Floor     string  `json:"floor,omitempty"`     // Name of the row this one is compared with
	RatioP50  float64 `json:"ratio_p50,omitempty"` // Latency.P50 / floor's P50
	RatioP99  float64 `json:"ratio_p99,omitempty"`
	RatioTput float64 `json:"ratio_tput,omitempty"` // RecPerS / floor's RecPerS
	Note      string  `json:"note,omitempty"`
	Run       int     `json:"run,omitempty"`   // which of several interleaved runs (1-based; 0: single run)
	Bytes     int     `json:"bytes,omitempty"` // frame bytes of a throughput row
}

// CompareTo fills the ratio fields of r against floor (same run).
func (r *Row) CompareTo(floor Row) {
	r.Floor = floor.Name
	if r.Latency.N > 0 && floor.Latency.N > 0 {
		r.RatioP50 = Ratio(float64(r.Latency.P50), float64(floor.Latency.P50))
		r.RatioP99 = Ratio(float64(r.Latency.P99), float64(floor.Latency.P99))
	}
	if r.RecPerS > 0 && floor.RecPerS > 0 {
		r.RatioTput = r.RecPerS / floor.RecPerS
	}
}
