//go:build !linux

package mmsg

import (
	"net/netip"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath"
)

// Path is unavailable on this platform.
type Path struct{}

// New reports that sendmmsg/recvmmsg are Linux-only.
func New(Config) (*Path, error) {
	return nil, &batch.UnsupportedError{Feature: "datapath/mmsg", Reason: "not Linux"}
}

func (*Path) Send(*batch.Vec) (int, error)                { return 0, datapath.ErrClosed }
func (*Path) Recv(*batch.Vec) (int, error)                { return 0, datapath.ErrClosed }
func (*Path) RecvWait(*batch.Vec, time.Time) (int, error) { return 0, datapath.ErrClosed }
func (*Path) LocalAddr() netip.AddrPort                   { return netip.AddrPort{} }
func (*Path) Close() error                                { return nil }
func (*Path) Stats() Stats                                { return Stats{} }
func (*Path) Features() Features                          { return Features{} }
func (*Path) NAPIID() int                                 { return 0 }
func (*Path) DisableGSO()                                 {}
