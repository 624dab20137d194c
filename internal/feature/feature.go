// Package feature is the one family of "not supported" errors every
// walcast package returns: the kernel, the platform or the device lacks
// something. Each package exports it as its own ErrNotSupported (all the
// same value), and every error of the family matches both that value and
// the standard library's errors.ErrUnsupported, so one check covers a
// missing UDP GSO, AF_XDP, O_DIRECT or thread affinity alike:
//
//	if errors.Is(err, errors.ErrUnsupported) { // or batch.ErrNotSupported, wal.ErrNotSupported, …
//		t.Skip(err)
//	}
//
// The model is cilium/ebpf's internal ErrNotSupported and
// UnsupportedFeatureError. The package is a leaf: it imports only the
// standard library.
package feature

import (
	"errors"
	"runtime"
)

// ErrNotSupported is the root of the family. errors.Is(ErrNotSupported,
// errors.ErrUnsupported) holds.
var ErrNotSupported error = notSupported{}

type notSupported struct{}

func (notSupported) Error() string { return "not supported" }
func (notSupported) Unwrap() error { return errors.ErrUnsupported }

// Error says which feature is missing and why. errors.Is(err,
// ErrNotSupported) and errors.Is(err, errors.ErrUnsupported) hold; Err,
// when set, is the underlying cause (an errno, say).
type Error struct {
	Feature string // "UDP GSO", "AF_XDP", "O_DIRECT", ...
	Reason  string // what was seen, with the kernel version where it matters
	Err     error
}

func (e *Error) Error() string {
	s := e.Feature + " not supported"
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is makes the error match ErrNotSupported and errors.ErrUnsupported.
func (e *Error) Is(target error) bool {
	return target == ErrNotSupported || target == errors.ErrUnsupported
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// OnOS is the error of a feature this GOOS does not have:
// "AF_XDP not supported: not on windows".
func OnOS(feature string) error {
	return &Error{Feature: feature, Reason: "not on " + runtime.GOOS}
}
