//go:build !linux

package benchkit

import "fmt"

// Cost needs per-thread CPU times and the floors' sockets: Linux only.
func Cost(name string, c ThroughputConfig) (CostRow, error) {
	return CostRow{}, fmt.Errorf("benchkit: cost breakdown: %w", ErrUnsupported)
}
