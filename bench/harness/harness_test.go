package harness

import (
	"testing"
	"time"
)

func TestHist(t *testing.T) {
	h := NewHist()
	if (h.Summary().N != 0) || h.Curve() != nil {
		t.Fatal("empty histogram not empty")
	}
	for i := int64(1); i <= 1000; i++ {
		h.Record(i * 1000)
	}
	h.Record(-5)               // clamped to 1 ns
	h.Record(int64(time.Hour)) // clamped to 60 s
	s := h.Summary()
	if s.N != 1002 || s.Min != 1 || s.Max < int64(59*time.Second) {
		t.Fatalf("%+v", s)
	}
	if !(s.P50 <= s.P90 && s.P90 <= s.P99 && s.P99 <= s.P999 && s.P999 <= s.Max) {
		t.Fatalf("unordered %+v", s)
	}
	if s.P50 < 495_000 || s.P50 > 505_000 { // 3 significant digits
		t.Fatalf("p50 %d", s.P50)
	}
	c := h.Curve()
	for i := 1; i < len(c); i++ {
		if c[i].NS < c[i-1].NS {
			t.Fatalf("curve not monotone at %v", c[i])
		}
	}
	if n := testing.AllocsPerRun(1000, func() { h.Record(12345); h.Record(-1); h.Record(1 << 62) }); n != 0 {
		t.Fatalf("Record allocates %v", n)
	}
}

func TestStamp(t *testing.T) {
	b := make([]byte, 16)
	stamp(b, 7, -3)
	if s, ns := unstamp(b); s != 7 || ns != -3 {
		t.Fatal(s, ns)
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := DefaultConfig()
	bad.Payload = 8
	if bad.Validate() == nil {
		t.Fatal("8-byte payload accepted")
	}
}
