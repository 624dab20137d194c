package batch

import "testing"

func TestKernelRanges(t *testing.T) {
	cases := []struct {
		rel    string
		broken bool
	}{
		{"6.18.44", false},
		{"7.0", true},
		{"7.0.0-rc1", true},
		{"7.1.4-arch1", true},
		{"7.1.5", false},
		{"7.2.0", false},
		{"5.15.0-91-generic", false},
	}
	for _, c := range cases {
		v, err := ParseKernelRelease(c.rel)
		if err != nil {
			t.Fatal(c.rel, err)
		}
		if GSOEqualTailBroken(v) != c.broken {
			t.Errorf("%s (%v): broken=%v", c.rel, v, !c.broken)
		}
	}
	if _, err := ParseKernelRelease("x"); err == nil {
		t.Fatal("garbage accepted")
	}
}
