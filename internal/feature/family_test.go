package feature_test

import (
	"errors"
	"testing"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/bpf"
	"github.com/walcast/walcast/datapath/xdp"
	"github.com/walcast/walcast/internal/feature"
	"github.com/walcast/walcast/tune"
	"github.com/walcast/walcast/wal"
)

// TestOneFamily: every package's ErrNotSupported is the one value, and
// it matches errors.ErrUnsupported.
func TestOneFamily(t *testing.T) {
	for name, err := range map[string]error{
		"wal": wal.ErrNotSupported, "batch": batch.ErrNotSupported, "affinity": affinity.ErrNotSupported,
		"tune": tune.ErrNotSupported, "bpf": bpf.ErrNotSupported, "xdp": xdp.ErrNotSupported,
	} {
		if err != feature.ErrNotSupported || !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%s.ErrNotSupported is not the family's value", name)
		}
	}
	var gso error = &batch.UnsupportedError{Feature: "UDP GSO", Reason: "test"}
	if !errors.Is(gso, wal.ErrNotSupported) || !errors.Is(gso, errors.ErrUnsupported) {
		t.Error("batch.UnsupportedError is not in the family")
	}
}
