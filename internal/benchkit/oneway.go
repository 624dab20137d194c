package benchkit

import (
	"errors"
	"fmt"
	"time"
)

// OneWayConfig configures the one-way latency runs: two
// casting loops on loopback, each a single pinned spinning thread, the
// producer running inside the sender's loop (OnPoll) and the consumer
// inside the receiver's (OnRecord), no rings between threads. Both sides
// stamp with one process's monotonic clock, so send→deliver is exact.
type OneWayConfig struct {
	Size   int    // record payload bytes, the 8-byte seq included (default 128)
	Rate   int    // paced rows: records/s offered (default 100 000)
	N      int    // paced rows: measured records (default 200 000)
	Warmup int    // paced rows: records before measuring (default 20 000)
	CPUs   [2]int // CPUs of the sender's and the receiver's loop; -1 = unpinned (default 0, 1)
	Path   string // datapath: "mmsg" (default: recvmmsg/sendmmsg, no GSO/GRO) or "udp" (one syscall per datagram)
	Batch  int    // datagrams per receive and flush of both loops (default 64)
	Seed   uint64 // seed of the random receive loss (0: a fixed one)
	// Burst is the records per burst of the lost-tail, burst-lossless
	// and single-gap rows (default 16); Bursts how many bursts, one measured record each
	// (default 1000); Pause the wait after a burst is delivered before
	// the next is sent (default 1 ms), so each lost tail is found by the
	// tail-loss probe, not by the next burst's data.
	Burst  int
	Bursts int
	Pause  time.Duration
	// Stall ends a row with an error when nothing was delivered for this
	// long (default 10 s): a budget, not a timing.
	Stall time.Duration
}

// DefaultOneWayConfig is 100 000 rec/s of 128 bytes, pinned to CPUs 0 and 1.
func DefaultOneWayConfig() OneWayConfig {
	return OneWayConfig{Size: 128, Rate: 100_000, N: 200_000, Warmup: 20_000, CPUs: [2]int{0, 1}, Path: "mmsg", Batch: 64,
		Burst: 16, Bursts: 1000, Pause: time.Millisecond, Stall: 10 * time.Second}
}

// Validate reports a config that cannot run.
func (c OneWayConfig) Validate() error {
	switch {
	case c.Size < 16 || c.Size > 1400:
		return fmt.Errorf("benchkit: oneway size %d outside 16..1400", c.Size)
	case c.Rate < 1 || c.Rate > 10_000_000:
		return fmt.Errorf("benchkit: oneway rate %d outside 1..10000000", c.Rate)
	case c.N < 1 || c.Warmup < 0:
		return errors.New("benchkit: oneway needs N >= 1 and Warmup >= 0")
	case c.Path != "udp" && c.Path != "mmsg":
		return fmt.Errorf("benchkit: oneway path %q: use udp or mmsg", c.Path)
	case c.Batch < 1 || c.Batch > 1024:
		return fmt.Errorf("benchkit: oneway batch %d outside 1..1024", c.Batch)
	case c.Burst < 2 || c.Burst > 1024 || c.Bursts < 1:
		return errors.New("benchkit: oneway needs Burst in 2..1024 and Bursts >= 1")
	case c.Pause < 0 || c.Stall <= 0:
		return errors.New("benchkit: oneway needs Pause >= 0 and Stall > 0")
	}
	return nil
}

// LossMode is what the receiver of a one-way run loses.
type LossMode uint8

const (
	// LossRandom loses a seeded random percentage of every datagram the
	// receiver gets (data, retransmits, heartbeats) via datapath/drop.
	LossRandom LossMode = iota
	// LossTail loses the first transmission of the last record of every
	// burst: the lost tail only the sender's tail-loss probe reveals.
	LossTail
	// LossGap loses the first transmission of the middle record of every
	// burst: a single gap the next record reveals.
	LossGap
	// LossNone runs the LossGap workload and times the same middle
	// record, losing nothing: what the burst's own transmission costs
	// that record, the baseline a single gap's repair is measured
	// against.
	LossNone
)

func (m LossMode) String() string {
	switch m {
	case LossTail:
		return "lost-tail"
	case LossGap:
		return "single-gap"
	case LossNone:
		return "burst-lossless"
	}
	return "random"
}
