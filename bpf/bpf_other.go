//go:build !linux

package bpf

import "github.com/walcast/walcast/internal/feature"

var errOS = feature.OnOS("XDP programs")

// Impair is the loss-injection program; on this platform it cannot load.
type Impair struct{}

// NewImpair returns an error wrapping ErrNotSupported on this platform.
func NewImpair(ImpairConfig) (*Impair, error) { return nil, errOS }

// Set returns an error wrapping ErrNotSupported on this platform.
func (*Impair) Set(ImpairConfig) error { return errOS }

// Counters returns an error wrapping ErrNotSupported on this platform.
func (*Impair) Counters() (ImpairCounters, error) { return ImpairCounters{}, errOS }

// Attach returns an error wrapping ErrNotSupported on this platform.
func (*Impair) Attach(int, Mode) (Mode, error) { return 0, errOS }

// Mode is always ModeAuto on this platform.
func (*Impair) Mode() Mode { return ModeAuto }

// Run returns an error wrapping ErrNotSupported on this platform.
func (*Impair) Run([]byte) (uint32, error) { return 0, errOS }

// Close does nothing on this platform.
func (*Impair) Close() error { return nil }

// Redirect is the AF_XDP redirect program; on this platform it cannot load.
type Redirect struct{}

// NewRedirect returns an error wrapping ErrNotSupported on this platform.
func NewRedirect(RedirectConfig) (*Redirect, error) { return nil, errOS }

// Register returns an error wrapping ErrNotSupported on this platform.
func (*Redirect) Register(int, int) error { return errOS }

// Unregister returns an error wrapping ErrNotSupported on this platform.
func (*Redirect) Unregister(int) error { return errOS }

// RegisterPort returns an error wrapping ErrNotSupported on this platform.
func (*Redirect) RegisterPort(uint16, int, int) error { return errOS }

// UnregisterPort returns an error wrapping ErrNotSupported on this platform.
func (*Redirect) UnregisterPort(uint16, int) error { return errOS }

// Attach returns an error wrapping ErrNotSupported on this platform.
func (*Redirect) Attach(int, Mode) (Mode, error) { return 0, errOS }

// Mode is always ModeAuto on this platform.
func (*Redirect) Mode() Mode { return ModeAuto }

// Run returns an error wrapping ErrNotSupported on this platform.
func (*Redirect) Run([]byte) (uint32, error) { return 0, errOS }

// Close does nothing on this platform.
func (*Redirect) Close() error { return nil }

// TCImpair is the tc loss-injection program; on this platform it cannot
// load.
type TCImpair struct{}

// NewTCImpair returns ErrNotSupported on this platform.
func NewTCImpair(ImpairConfig) (*TCImpair, error) { return nil, ErrNotSupported }

// Set returns ErrNotSupported on this platform.
func (*TCImpair) Set(ImpairConfig) error { return ErrNotSupported }

// Counters returns ErrNotSupported on this platform.
func (*TCImpair) Counters() (ImpairCounters, error) { return ImpairCounters{}, ErrNotSupported }

// Attach returns ErrNotSupported on this platform.
func (*TCImpair) Attach(int, Direction, TCMode) (TCMode, error) { return 0, ErrNotSupported }

// Mode is always TCAuto on this platform.
func (*TCImpair) Mode() TCMode { return TCAuto }

// Run returns ErrNotSupported on this platform.
func (*TCImpair) Run([]byte) (uint32, error) { return 0, ErrNotSupported }

// Detach does nothing on this platform.
func (*TCImpair) Detach() error { return nil }

// Close does nothing on this platform.
func (*TCImpair) Close() error { return nil }

// SyscallCounter counts threads' system calls; on this platform it cannot
// load.
type SyscallCounter struct{}

// NewSyscallCounter returns ErrNotSupported on this platform.
func NewSyscallCounter(int) (*SyscallCounter, error) { return nil, ErrNotSupported }

// Watch returns ErrNotSupported on this platform.
func (*SyscallCounter) Watch(int) error { return ErrNotSupported }

// Unwatch returns ErrNotSupported on this platform.
func (*SyscallCounter) Unwatch(int) error { return ErrNotSupported }

// Count returns ErrNotSupported on this platform.
func (*SyscallCounter) Count(int) (uint64, error) { return 0, ErrNotSupported }

// Close does nothing on this platform.
func (*SyscallCounter) Close() error { return nil }
