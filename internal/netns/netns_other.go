//go:build !linux

package netns

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/walcast/walcast/bpf"
)

// ErrNotSupported is returned on platforms without network namespaces.
var ErrNotSupported = errors.New("netns: network namespaces need Linux")

// New skips tb: network namespaces need Linux.
func New(tb testing.TB, c Config) *Pair {
	tb.Helper()
	tb.Skip(ErrNotSupported.Error())
	return nil
}

// Require skips tb: network namespaces need Linux.
func Require(tb testing.TB) { tb.Helper(); tb.Skip(ErrNotSupported.Error()) }

// Create returns ErrNotSupported.
func Create(Config) (*Pair, error) { return nil, ErrNotSupported }

// Close does nothing.
func (p *Pair) Close() error { return nil }

// Exec returns ErrNotSupported.
func (h Host) Exec(string, ...string) ([]byte, error) { return nil, ErrNotSupported }

// Do returns ErrNotSupported.
func (h Host) Do(func() error) error { return ErrNotSupported }

// AttachImpair returns ErrNotSupported.
func (h Host) AttachImpair(bpf.ImpairConfig) (*bpf.Impair, bpf.Mode, error) {
	return nil, 0, ErrNotSupported
}

// Ping returns ErrNotSupported.
func (h Host) Ping(netip.Addr, time.Duration) error { return ErrNotSupported }

// NewBridge skips tb: network namespaces need Linux.
func NewBridge(tb testing.TB, c BridgeConfig) *Bridge {
	tb.Helper()
	tb.Skip(ErrNotSupported.Error())
	return nil
}

// CreateBridge returns ErrNotSupported.
func CreateBridge(BridgeConfig) (*Bridge, error) { return nil, ErrNotSupported }

// Close does nothing.
func (b *Bridge) Close() error { return nil }

// NewLAN skips tb: network namespaces need Linux.
func NewLAN(tb testing.TB, c LANConfig) *LAN {
	tb.Helper()
	tb.Skip(ErrNotSupported.Error())
	return nil
}

// CreateLAN returns ErrNotSupported.
func CreateLAN(LANConfig) (*LAN, error) { return nil, ErrNotSupported }

// Close does nothing.
func (l *LAN) Close() error { return nil }

// AttachTCImpair returns ErrNotSupported.
func (h Host) AttachTCImpair(bpf.ImpairConfig, bpf.Direction, bpf.TCMode) (*bpf.TCImpair, bpf.TCMode, error) {
	return nil, 0, ErrNotSupported
}
