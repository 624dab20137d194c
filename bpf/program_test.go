package bpf

import (
	"encoding/binary"
	"math"
	"testing"
)

func TestImpairConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    ImpairConfig
		ok   bool
	}{
		{"default", DefaultImpairConfig(), true},
		{"all", ImpairConfig{DropFraction: 1, RecordType: -1}, true},
		{"negative", ImpairConfig{DropFraction: -0.1, RecordType: -1}, false},
		{"above one", ImpairConfig{DropFraction: 1.5, RecordType: -1}, false},
		{"nan", ImpairConfig{DropFraction: math.NaN(), RecordType: -1}, false},
		{"type too big", ImpairConfig{RecordType: 1 << 16}, false},
		{"type -2", ImpairConfig{RecordType: -2}, false},
		{"tcp", ImpairConfig{RecordType: -1, TCP: true}, true},
		{"tcp with a record type", ImpairConfig{RecordType: 0x11, TCP: true}, false},
	} {
		if err := tc.c.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestRedirectConfigValidate(t *testing.T) {
	good := DefaultRedirectConfig()
	good.Port = 7000
	for _, tc := range []struct {
		name string
		mod  func(*RedirectConfig)
		ok   bool
	}{
		{"good", func(*RedirectConfig) {}, true},
		{"port 0", func(c *RedirectConfig) { c.Port = 0 }, false},
		{"no queues", func(c *RedirectConfig) { c.Queues = 0 }, false},
		{"bad fallback", func(c *RedirectConfig) { c.Fallback = XDPRedirect }, false},
	} {
		c := good
		tc.mod(&c)
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

// The threshold must reach 1<<32 so that a fraction of 1 drops every draw
// (prandom_u32 < 1<<32 always).
func TestImpairThreshold(t *testing.T) {
	for _, tc := range []struct {
		p    float64
		want uint64
	}{{0, 0}, {1, 1 << 32}, {0.5, 1 << 31}} {
		v := ImpairConfig{DropFraction: tc.p, RecordType: -1}.value()
		if got := binary.NativeEndian.Uint64(v); got != tc.want {
			t.Errorf("p=%v: threshold %#x, want %#x", tc.p, got, tc.want)
		}
	}
}
