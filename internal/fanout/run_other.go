//go:build !linux

package fanout

import (
	"context"
	"errors"
)

// ErrNotSupported: the fan-out runner needs Linux (namespaces, BPF).
var ErrNotSupported = errors.New("fanout: needs Linux (network namespaces, BPF)")

// Run returns ErrNotSupported.
func Run(context.Context, Config) (Result, error) { return Result{}, ErrNotSupported }
