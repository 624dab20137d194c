package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walcast/walcast/counters/counterstest"
	"github.com/walcast/walcast/internal/childproc"
)

func TestMain(m *testing.M) {
	if os.Getenv("CAST_BENCH_CHILD") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(counterstest.Main(m))
}

// Ctrl-C ends the suite after the running workload: the report of what
// was measured is written, the README block is not touched, exit 130.
func TestInterruptWritesPartialReport(t *testing.T) {
	dir := t.TempDir()
	readme := filepath.Join(dir, "README.md")
	const doc = "x\n<!-- bench:begin -->\nold\n<!-- bench:end -->\n"
	if err := os.WriteFile(readme, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	c := childproc.Start(t, "CAST_BENCH_CHILD=1", "", "-quick", "-out", out, "-readme", readme, "oneway", "rtt", "throughput")
	c.WaitOutput("== oneway", 5*time.Minute)
	c.Signal(syscall.SIGINT)
	if code := c.Wait(5 * time.Minute); code != 130 {
		t.Fatalf("exit %d, want 130\n%s", code, c.Dump())
	}
	if last := childproc.LastLine(c.Stderr.String()); !strings.HasPrefix(last, "cast-bench: interrupted: rtt, throughput not run") {
		t.Fatalf("last line %q", last)
	}
	if b, _ := os.ReadFile(readme); string(b) != doc {
		t.Fatalf("README touched by a partial run:\n%s", b)
	}
	if b, err := os.ReadFile(filepath.Join(out, "report.md")); err != nil || !strings.Contains(string(b), "interrupted: not run: rtt, throughput") {
		t.Fatalf("report.md: %v\n%s", err, b)
	}
}
