// Package defaults holds the two rules by which every walcast config
// struct maps its zero fields to defaults: Or (zero means the default)
// and Off (zero means the default, a negative value means "none"). It is a leaf: it imports nothing.
package defaults

// Number is a field type the rules apply to.
type Number interface {
	~int | ~int32 | ~int64 | ~uint32 | ~float64
}

// Or is v, or def when v is zero.
func Or[T Number](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// Off is def when v is zero, 0 when v is negative ("off"), else v.
func Off[T Number](v, def T) T {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}
