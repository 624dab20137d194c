//go:build !linux

package benchkit

import "fmt"

func unsupported(string) (string, error) {
	return "", fmt.Errorf("Linux only: %w", ErrUnsupported)
}

var (
	probeGSO      = unsupported
	probeGRO      = unsupported
	probeBusyPoll = unsupported
	probeODirect  = unsupported
	probeXDP      = unsupported
	probePerf     = unsupported
)
