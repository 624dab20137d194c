package defaults

import "testing"

func TestRules(t *testing.T) {
	if Or(0, 5) != 5 || Or(3, 5) != 3 || Or(-2, 5) != -2 {
		t.Error("Or")
	}
	if Off(0, 5) != 5 || Off(3, 5) != 3 || Off(-2, 5) != 0 || Off(-0.5, 0.2) != 0 {
		t.Error("Off")
	}
}
