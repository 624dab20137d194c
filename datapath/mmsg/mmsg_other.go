//go:build !linux

package mmsg

import (
	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath/internal/sock"
)

type unsupported = sock.Unsupported

// Path is unavailable on this platform.
type Path struct{ unsupported }

// New reports that sendmmsg/recvmmsg are Linux-only.
func New(Config) (*Path, error) {
	return nil, &batch.UnsupportedError{Feature: "datapath/mmsg", Reason: "not Linux"}
}

// Stats returns zero counters.
func (*Path) Stats() Stats { return Stats{} }

// Features reports no offloads.
func (*Path) Features() Features { return Features{} }

// DisableGSO does nothing.
func (*Path) DisableGSO() {}
