//go:build !linux

package benchkit

import (
	"errors"
	"time"

	"github.com/walcast/walcast/datapath/mmsg"
	"github.com/walcast/walcast/datapath/udp"
)

// errNotLinux: the runners drive raw Linux sockets and pinned threads.
var errNotLinux = errors.New("benchkit: the RTT and throughput runners are Linux-only")

// RTTRawUDP is Linux-only.
func RTTRawUDP(RTTConfig) (Row, error) { return Row{}, errNotLinux }

// RTTGoNet is Linux-only here (it shares the Linux run's pinning).
func RTTGoNet(RTTConfig) (Row, error) { return Row{}, errNotLinux }

// ThroughputRaw is Linux-only.
func ThroughputRaw(ThroughputConfig) (Row, error) { return Row{}, errNotLinux }

// RTTCasting is Linux-only.
func RTTCasting(RTTConfig) (Row, error) { return Row{}, errNotLinux }

// ThroughputCasting is Linux-only.
func ThroughputCasting(ThroughputConfig, bool, bool) (Row, error) { return Row{}, errNotLinux }

// ConnectedUDP is Linux-only.
func ConnectedUDP() (a, b *udp.Path, err error) { return nil, nil, errNotLinux }

// ConnectedMmsg is Linux-only.
func ConnectedMmsg(gso, gro bool, batch int) (a, b *mmsg.Path, err error) {
	return nil, nil, errNotLinux
}

// RTTFloor is Linux-only.
func RTTFloor(RTTConfig) (Row, error) { return Row{}, errNotLinux }

// ThroughputFloor is Linux-only.
func ThroughputFloor(ThroughputConfig) (Row, error) { return Row{}, errNotLinux }

// ThroughputFloorFrame is Linux-only.
func ThroughputFloorFrame(ThroughputConfig) (Row, error) { return Row{}, errNotLinux }

// DiskFloor is Linux-only.
func DiskFloor(string, int, time.Duration) (Row, error) { return Row{}, errNotLinux }

// WALAlone is Linux-only here (it shares the Linux run's disk floor).
func WALAlone(ThroughputConfig) (Row, error) { return Row{}, errNotLinux }

// RTTCastingMmsg is Linux-only.
func RTTCastingMmsg(RTTConfig) (Row, error) { return Row{}, errNotLinux }
