package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSuiteWorkloadsRegistered(t *testing.T) {
	for _, n := range []string{"all", "suite", "peers", "oneway", "loss-degradation", "classic"} {
		if _, ok := benchWorkloads[n]; !ok {
			t.Errorf("cast bench %s not registered", n)
		}
	}
}

// Without the suite binary the error says how to build it.
func TestSuiteMissingSaysHowToBuild(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	err := benchWorkloads["all"].run(nil)
	var ee *exitError
	if !errors.As(err, &ee) || !strings.Contains(ee.msg, "make build") {
		t.Fatalf("%v", err)
	}
}

// A cast-bench on PATH gets the user's flags then the workloads.
func TestSuiteExecs(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "args")
	script := "#!/bin/sh\necho \"$@\" > " + out + "\nexit 3\n"
	if err := os.WriteFile(filepath.Join(dir, suiteBinary), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	err := benchWorkloads["peers"].run([]string{"-quick"})
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 3 {
		t.Fatalf("exit status not passed on: %v", err)
	}
	b, _ := os.ReadFile(out)
	if got := strings.TrimSpace(string(b)); got != "-quick rtt oneway throughput" {
		t.Fatalf("args %q", got)
	}
}
