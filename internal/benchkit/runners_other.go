//go:build !linux

package benchkit

import "errors"

// errNotLinux: the runners drive raw Linux sockets and pinned threads.
var errNotLinux = errors.New("benchkit: the RTT and throughput runners are Linux-only")

// RTTRawUDP is Linux-only.
func RTTRawUDP(RTTConfig) (Row, error) { return Row{}, errNotLinux }

// RTTGoNet is Linux-only here (it shares the Linux run's pinning).
func RTTGoNet(RTTConfig) (Row, error) { return Row{}, errNotLinux }

// ThroughputRaw is Linux-only.
func ThroughputRaw(ThroughputConfig) (Row, error) { return Row{}, errNotLinux }
