package feature

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
)

func TestFamily(t *testing.T) {
	for _, err := range []error{
		ErrNotSupported,
		fmt.Errorf("wal: open: %w", ErrNotSupported),
		&Error{Feature: "UDP GSO", Reason: "kernel 4.9", Err: syscall.ENOPROTOOPT},
		fmt.Errorf("xdp: %w", OnOS("AF_XDP")),
	} {
		if !errors.Is(err, ErrNotSupported) || !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%q is not in the family", err)
		}
	}
	e := &Error{Feature: "UDP GSO", Reason: "setsockopt", Err: syscall.ENOPROTOOPT}
	if !errors.Is(e, syscall.ENOPROTOOPT) {
		t.Error("cause lost")
	}
	if got, want := e.Error(), "UDP GSO not supported: setsockopt: "+syscall.ENOPROTOOPT.Error(); got != want {
		t.Errorf("%q, want %q", got, want)
	}
	if errors.Is(errors.New("other"), ErrNotSupported) {
		t.Error("unrelated error matched")
	}
}
