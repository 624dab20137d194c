// Package cfgerr builds the configuration errors of every walcast
// package: "pkg: invalid configuration: Field: what is wrong", matching
// (errors.Is) the package's own ErrConfig sentinel, and — when a config
// embeds another package's config — the nested package's sentinel too,
// without repeating its prefix:
//
//	cast: invalid configuration: Replay.Endpoints: none given
//
// matches cast.ErrConfig and replay.ErrConfig. It is a leaf: it imports
// only the standard library.
package cfgerr

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel returns a package's ErrConfig: "pkg: invalid configuration".
func Sentinel(pkg string) error { return errors.New(pkg + ": invalid configuration") }

// Error is one configuration error.
type Error struct {
	Pkg    string // package whose constructor or Validate refused the config
	Field  string // dotted path of the field ("" for the config as a whole)
	Detail string // what is wrong

	sentinel error // Pkg's ErrConfig
	inner    error // the nested package's error, when re-reported
}

// New returns pkg's configuration error about field.
func New(pkg string, sentinel error, field, format string, args ...any) error {
	return &Error{Pkg: pkg, Field: field, Detail: fmt.Sprintf(format, args...), sentinel: sentinel}
}

// Nest re-reports err, returned by the Validate of a config that pkg's
// config holds in field, as pkg's error. It returns nil for nil.
func Nest(pkg string, sentinel error, field string, err error) error {
	if err == nil {
		return nil
	}
	if in, ok := errors.AsType[*Error](err); ok {
		f := field
		if in.Field != "" {
			f += "." + in.Field
		}
		return &Error{Pkg: pkg, Field: f, Detail: in.Detail, sentinel: sentinel, inner: err}
	}
	// An error built as fmt.Errorf("%w: detail", ErrConfig) keeps only its
	// detail, so the nested package's prefix is not repeated.
	d := err.Error()
	if i := strings.Index(d, invalid); i >= 0 {
		d = d[i+len(invalid):]
	}
	return &Error{Pkg: pkg, Field: field, Detail: d, sentinel: sentinel, inner: err}
}

const invalid = "invalid configuration: "

func (e *Error) Error() string {
	s := e.Pkg + ": " + invalid
	if e.Field != "" {
		s += e.Field + ": "
	}
	return s + e.Detail
}

// Unwrap returns the package's sentinel and the nested error, if any.
func (e *Error) Unwrap() []error {
	if e.inner == nil {
		return []error{e.sentinel}
	}
	return []error{e.sentinel, e.inner}
}
