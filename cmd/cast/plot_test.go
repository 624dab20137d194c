package main

import (
	"bytes"
	"image/color"
	"image/png"
	"testing"
)

// The RTT scatter marks repaired messages: a marked point adds red
// crosses to what the legend alone draws in red.
func TestScatterMarksRepaired(t *testing.T) {
	red := func(pts []scatterPoint) int {
		var b bytes.Buffer
		if err := writeScatterPNG(&b, "rtt", "echoed", "repaired", pts); err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(&b)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		r := img.Bounds()
		for y := r.Min.Y; y < r.Max.Y; y++ {
			for x := r.Min.X; x < r.Max.X; x++ {
				if color.RGBAModel.Convert(img.At(x, y)) == plotMarked {
					n++
				}
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
