package report

import (
	"errors"
	"testing"
)

func TestReplaceBlock(t *testing.T) {
	doc := "# t\n\nbefore\n" + BeginMarker + "\nold\nstuff\n" + EndMarker + "\nafter\n"
	got, err := ReplaceBlock([]byte(doc), "new | table\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "# t\n\nbefore\n" + BeginMarker + "\nnew | table\n" + EndMarker + "\nafter\n"
	if string(got) != want {
		t.Fatalf("got %q", got)
	}
	again, _ := ReplaceBlock(got, "new | table")
	if string(again) != want {
		t.Fatal("not idempotent")
	}
	for _, bad := range []string{"no markers", BeginMarker + " only", EndMarker + " then " + BeginMarker} {
		if _, err := ReplaceBlock([]byte(bad), "x"); !errors.Is(err, ErrNoMarkers) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
