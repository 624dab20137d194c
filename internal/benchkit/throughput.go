package benchkit

import (
	"fmt"
	"github.com/walcast/walcast/cast"
	"time"
)

// ThroughputConfig configures a one-way blast.
type ThroughputConfig struct {
	Size     int           // frame bytes (default 144; 1443 is the other standard size)
	Duration time.Duration // sending time (default 2 s)
	Batch    int           // datagrams per sendmmsg/recvmmsg (default 64)
	GSO, GRO bool          // use UDP GSO on send and GRO on receive where the kernel has them
	CPUs     [2]int        // sender and receiver CPUs; -1 = unpinned (default 0, 1)
	// Window caps the records in flight (sent, not yet received): the
	// sender waits for the in-process receiver, standing in for the flow
	// control UDP lacks, so rows measure lossless throughput rather than
	// how much an overrun receiver drops (default 4096, the Sender's hot
	// ring; 0 = unpaced).
	Window int
	// Dir is where WAL-on rows and the disk floors write (default: the
	// system's temporary directory).
	Dir string
	// Keys, when set, authenticate every datagram of the casting rows
	// (docs/auth.md); their rows are named with "+auth". The cores then
	// write the same datagrams as without keys and the trailer makes
	// each 34 bytes longer (loopback's MTU has the room).
	Keys *cast.Keys
	// NoCounters runs the casting rows' loops without counters
	// (cast.Counters.Off; docs/operate.md); their rows are named with
	// "+nocounters".
	NoCounters bool
}

// DefaultThroughputConfig is 2 s of 144-byte frames, batches of 64, GSO and GRO on, pinned to CPUs 0 and 1.
func DefaultThroughputConfig() ThroughputConfig {
	return ThroughputConfig{Size: 144, Duration: 2 * time.Second, Batch: 64, GSO: true, GRO: true, CPUs: [2]int{0, 1}, Window: 4096}
}

// Validate reports a config that cannot run.
func (c ThroughputConfig) Validate() error {
	if c.Size < 16 || c.Size > 1472 {
		return fmt.Errorf("benchkit: throughput size %d outside 16..1472", c.Size)
	}
	if c.Duration <= 0 || c.Batch < 1 || c.Batch > 1024 {
		return fmt.Errorf("benchkit: throughput needs Duration > 0 and Batch in 1..1024")
	}
	return nil
}

// PerSend is the records a sender hands the kernel per send call in
// every throughput and cost row: Batch, but with GSO never more than one
// UDP_SEGMENT send holds (65000 bytes: 45 frames of 1443 bytes), the
// floor's own unit. A batch of 64 such frames would be a GSO send of 45
// and one of 19, two sends' kernel overhead for 1.4 sends' worth of
// records, that the floor row never pays.
func (c ThroughputConfig) PerSend() int {
	if !c.GSO {
		return c.Batch
	}
	return c.gsoPerSend()
}

// gsoPerSend is PerSend with GSO: what the floor rows, which always
// send with UDP_SEGMENT, put in each sendto.
func (c ThroughputConfig) gsoPerSend() int { return max(1, min(c.Batch, 65000/c.Size)) }

// fill sets Gbps and RecPerS from records delivered in seconds.
func (r *Row) fill(records int64, size int, seconds float64) {
	r.Records, r.Seconds, r.Bytes = records, seconds, size
	if seconds > 0 {
		r.RecPerS = float64(records) / seconds
		r.Gbps = float64(records) * float64(size) * 8 / seconds / 1e9
	}
}
