//go:build !linux

package xdp

import (
	"net/netip"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/bpf"
	"github.com/walcast/walcast/internal/feature"
)

var errOS = feature.OnOS("AF_XDP")

// Path is the AF_XDP datapath; on this platform it cannot open.
type Path struct{}

// Open returns an error wrapping ErrNotSupported on this platform.
func Open(Config) (*Path, error) { return nil, errOS }

// Send returns an error wrapping ErrNotSupported on this platform.
func (*Path) Send(*batch.Vec) (int, error) { return 0, errOS }

// Recv returns an error wrapping ErrNotSupported on this platform.
func (*Path) Recv(*batch.Vec) (int, error) { return 0, errOS }

// LocalAddr is the zero address on this platform.
func (*Path) LocalAddr() netip.AddrPort { return netip.AddrPort{} }

// Mode is ModeAuto on this platform.
func (*Path) Mode() bpf.Mode { return bpf.ModeAuto }

// ZeroCopy is false on this platform.
func (*Path) ZeroCopy() bool { return false }

// Share returns ErrNotSupported on this platform.
func (*Path) Share(netip.AddrPort, netip.AddrPort) (*Path, error) { return nil, ErrNotSupported }

// TxBudget is 0 on this platform.
func (*Path) TxBudget() int { return 0 }

// ZeroCopyErr is ErrNotSupported on this platform.
func (*Path) ZeroCopyErr() error { return ErrNotSupported }

// NAPIID is 0 on this platform.
func (*Path) NAPIID() int { return 0 }

// FD is -1 on this platform.
func (*Path) FD() int { return -1 }

// Stats is empty on this platform.
func (*Path) Stats() Stats { return Stats{} }

// Close does nothing on this platform.
func (*Path) Close() error { return nil }
