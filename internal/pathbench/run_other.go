//go:build !linux

package pathbench

import (
	"context"
	"errors"
)

// ErrNeedRoot is returned by Run when not root.
var ErrNeedRoot = errors.New("pathbench: needs root")

// Run returns an error: the paths need Linux.
func Run(context.Context, Config) (*Report, error) {
	return nil, errors.New("pathbench: needs Linux (network namespaces, BPF, AF_XDP)")
}
