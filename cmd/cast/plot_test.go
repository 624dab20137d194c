package main

import "testing"

// The RTT scatter marks repaired messages: a marked point adds red
// crosses to what the legend alone draws in red (TestCLIClassicPair
// decodes the PNG `cast sender -plot` writes).
func TestScatterMarksRepaired(t *testing.T) {
	red := func(pts []scatterPoint) int {
		img := drawScatter("rtt", "echoed", "repaired", pts)
		n := 0
		for i := 0; i+3 < len(img.Pix); i += 4 {
			if p := img.Pix[i : i+3 : i+3]; p[0] == plotMarked.R && p[1] == plotMarked.G && p[2] == plotMarked.B {
				n++
			}
		}
		return n
	}
	plain := []scatterPoint{{x: 1, us: 50}, {x: 2, us: 60}, {x: 3, us: 55}}
	marked := []scatterPoint{{x: 1, us: 50}, {x: 2, us: 150000, marked: true}, {x: 3, us: 55}}
	if p, m := red(plain), red(marked); m <= p {
		t.Fatalf("red pixels: %d with a repaired message, %d without", m, p)
	}
}
