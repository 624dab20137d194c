//go:build !linux

package netns

import (
	"net/netip"
	"testing"
	"time"

	"github.com/walcast/walcast/bpf"
	"github.com/walcast/walcast/internal/feature"
)

// ErrNotSupported is returned on platforms without network namespaces.
var ErrNotSupported = feature.OnOS("network namespaces")

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
