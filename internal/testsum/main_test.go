package main

import (
	"strings"
	"testing"
)

func TestSummarize(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"pass","Package":"p","Test":"TestA"}`,
		`{"Action":"run","Package":"p","Test":"TestB"}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:9: no AF_XDP in this kernel\n"}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"--- SKIP: TestB (0.00s)\n"}`,
		`{"Action":"skip","Package":"p","Test":"TestB"}`,
		`{"Action":"output","Package":"p","Test":"TestC","Output":"    c_test.go:3: got 1 want 2\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestC"}`,
		`{"Action":"pass","Package":"p","Test":"TestC/sub"}`,
		`{"Action":"output","Package":"p","Output":"FAIL\tp\t0.1s\n"}`,
		`{"Action":"fail","Package":"p"}`,
		`not json: build error`,
	}, "\n")
	var out strings.Builder
	code := summarize(strings.NewReader(in), &out)
	s := out.String()
	for _, want := range []string{
		"got 1 want 2", "FAIL\tp", "not json: build error",
		"p TestB: b_test.go:9: no AF_XDP in this kernel",
		"tests: 1 passed, 1 failed, 1 skipped\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	out.Reset()
	if code := summarize(strings.NewReader(`{"Action":"pass","Package":"p","Test":"TestA"}`), &out); code != 0 ||
		!strings.HasSuffix(out.String(), "tests: 1 passed, 0 failed, 0 skipped\n") {
		t.Errorf("clean run: exit %d, %q", code, out.String())
	}
}
