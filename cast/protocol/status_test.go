package protocol

import (
	"encoding/hex"
	"strings"
	"testing"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRTTEstimator(t *testing.T) {
	var e RTT
	if e.Valid() || e.Timeout(10, 1000) != 1000 {
		t.Fatal("empty estimator must give the ceiling")
	}
	e.Sample(0)
	e.Sample(-5)
	if e.Samples() != 0 {
		t.Fatal("non-positive samples must be ignored")
	}
	e.Sample(800)
	if e.SRTT() != 800 || e.RTTVar() != 400 {
		t.Fatalf("first sample: srtt %d rttvar %d", e.SRTT(), e.RTTVar())
	}
	e.Sample(400) // RFC 6298: rttvar = ¾·400 + ¼·|800−400| = 400, srtt = ⅞·800 + ⅛·400 = 750
	if e.SRTT() != 750 || e.RTTVar() != 400 {
		t.Fatalf("second sample: srtt %d rttvar %d", e.SRTT(), e.RTTVar())
	}
	for i := 0; i < 200; i++ {
		e.Sample(100)
	}
	if e.SRTT() < 100 || e.SRTT() > 110 || e.RTTVar() > 10 {
		t.Fatalf("steady 100: srtt %d rttvar %d", e.SRTT(), e.RTTVar())
	}
	if to := e.Timeout(500, 1000); to != 500 {
		t.Fatalf("timeout below the floor = %d", to)
	}
	var s RTT
	s.Seed(1000, 100)
	if s.SRTT() != 1000 || s.Timeout(0, 1e9) != 1400 {
		t.Fatalf("seeded: %d %d", s.SRTT(), s.Timeout(0, 1e9))
	}
	s.Sample(200)
	s.Seed(5000, 0) // ignored once a sample exists
	if s.SRTT() != 200 {
		t.Fatalf("first own sample must replace the seed: %d", s.SRTT())
	}
}
