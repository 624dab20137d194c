package batch

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/walcast/walcast/internal/feature"
)

// ErrNotSupported is matched (errors.Is) by every [UnsupportedError] and
// by every "not supported" error of walcast (it is the same value as
// wal.ErrNotSupported, affinity.ErrNotSupported, …); errors.Is(err,
// errors.ErrUnsupported) holds for all of them.
var ErrNotSupported = feature.ErrNotSupported

// UnsupportedError says which kernel feature is missing and why: Feature
// ("UDP GSO", "UDP GRO", "sendmmsg", ...), Reason (with the kernel
// version when relevant) and Err, the underlying errno if any.
type UnsupportedError = feature.Error

// KernelVersion is a parsed kernel release (uname -r).
type KernelVersion struct{ Major, Minor, Patch int }

// ParseKernelRelease parses "6.18.44-foo" into its numbers; missing parts
// are 0.
func ParseKernelRelease(s string) (KernelVersion, error) {
	var v KernelVersion
	end := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if end >= 0 {
		s = s[:end]
	}
	parts := strings.SplitN(s, ".", 3)
	dst := []*int{&v.Major, &v.Minor, &v.Patch}
	for i, p := range parts {
		if p == "" {
			break
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			return KernelVersion{}, fmt.Errorf("batch: kernel release %q: %w", s, err)
		}
		*dst[i] = n
	}
	if v.Major == 0 {
		return KernelVersion{}, fmt.Errorf("batch: kernel release %q: no major version", s)
	}
	return v, nil
}

// Less reports whether v is older than w.
func (v KernelVersion) Less(w KernelVersion) bool {
	if v.Major != w.Major {
		return v.Major < w.Major
	}
	if v.Minor != w.Minor {
		return v.Minor < w.Minor
	}
	return v.Patch < w.Patch
}

func (v KernelVersion) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// GSOEqualTailBroken reports whether kernel v mangles UDP headers and
// checksums when every GSO segment has the same length: Linux v7.0 up to
// and including v7.1.4, fixed in 7.1.5 (the same workaround as tailscale's
// NeverGSOEqualTail, 2026). Fixed-size records are exactly that shape, so
// GSO is skipped there.
func GSOEqualTailBroken(v KernelVersion) bool {
	return !v.Less(KernelVersion{7, 0, 0}) && v.Less(KernelVersion{7, 1, 5})
}
