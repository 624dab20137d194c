//go:build !linux

package wal

import (
	"errors"

	"github.com/walcast/walcast/internal/feature"
	"github.com/walcast/walcast/wal/internal/unix"
)

var errDioUnknown = errors.New("statx STATX_DIOALIGN not available")

func openDirect(path string, flag int) (int, error) { return -1, feature.OnOS("O_DIRECT") }

func dioAlign(fd int) (mem, off uint32, err error) { return 0, 0, ErrNotSupported }

func preallocate(fd int, size int64) error { return unix.Ftruncate(fd, size) }

func datasync(fd int) error { return unix.Fsync(fd) }

func isDirectEINVAL(err error) bool { return err == unix.EINVAL }
