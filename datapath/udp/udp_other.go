//go:build !linux

package udp

import (
	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath/internal/sock"
)

type unsupported = sock.Unsupported

// Path is unavailable on this platform.
type Path struct{ unsupported }

// New reports that raw UDP sockets are Linux-only.
func New(Config) (*Path, error) {
	return nil, &batch.UnsupportedError{Feature: "datapath/udp", Reason: "not Linux"}
}

// Stats returns zero counters.
func (*Path) Stats() Stats { return Stats{} }
