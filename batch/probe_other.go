//go:build !linux

package batch

// ProbeGSO reports that UDP GSO is Linux-only.
func ProbeGSO() error {
	return &UnsupportedError{Feature: "UDP GSO", Reason: "not Linux"}
}

// ProbeGRO reports that UDP GRO is Linux-only.
func ProbeGRO() error {
	return &UnsupportedError{Feature: "UDP GRO", Reason: "not Linux"}
}
