//go:build !linux

package benchkit

// OneWayPaced is Linux-only (pinned loops on raw sockets).
func OneWayPaced(OneWayConfig, float64) (Row, error) { return Row{}, errNotLinux }

// OneWayBursts is Linux-only.
func OneWayBursts(OneWayConfig, LossMode) (Row, error) { return Row{}, errNotLinux }
