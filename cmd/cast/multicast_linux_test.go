package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"testing"

	"github.com/walcast/walcast/internal/netns"
)

// TestCLIMulticast runs `cast send -to GROUP:PORT -iface` in one
// namespace and two `cast recv -group GROUP:PORT -iface` in two others,
// all on one bridge, as real processes: both receivers get every record
// in order from one stream, the one losing 1 % of what reaches it
// repairs through the control group, the sender paces to both (tagged by
// their -id), and each receiver stops when the sender ends the stream.
func TestCLIMulticast(t *testing.T) {
	c := netns.DefaultLANConfig()
	c.Hosts, c.Tag = 3, "mc"
	lan := netns.NewLAN(t, c)
	const n = 10000
	group := "239.199.1.1:9311"
	var recv []*child
	for i, drop := range []string{"0", "1"} {
		h := lan.Hosts[i+1]
		r := startWrapped(t, "", []string{"ip", "netns", "exec", h.NS},
			"recv", "-group", group, "-iface", h.Link, "-idle", "park", "-drop", drop, "-debounce", "20ms", "-reorder", "32768", "-id", fmt.Sprint(11+i),
			"-retries", "400", "-silence", "10s") // budgets a loaded machine (-race, load 20) needs
		r.waitOutput(`receiving groups`, hangBudget)
		recv = append(recv, r)
	}
	s := startWrapped(t, "", []string{"ip", "netns", "exec", lan.Hosts[0].NS},
		"send", "-to", group, "-iface", lan.Hosts[0].Link, "-n", fmt.Sprint(n), "-rate", "5000", "-idle", "park", "-linger", "10s", "-wal", t.TempDir(), "-flow", "tagged", "-tagged", "11,12")
	s.wait(hangBudget)
	s.expect(0, "stdout", `^wal .*: durable through seq \d+`)
	for i, r := range recv {
		r.wait(hangBudget)
		out := r.Stdout.String()
		if !regexp.MustCompile(fmt.Sprintf(`received %d records \(seq 1\.\.%d, in order: true\)`, n, n)).MatchString(out) ||
			!regexp.MustCompile(fmt.Sprintf(`stream ended by the sender at seq %d`, n)).MatchString(out) {
			t.Errorf("receiver %d:\n%s\n%s", i, out, r.Stderr.String())
		}
		r.expect(0, "stdout", `^outcome: live`)
	}
}

// scripts/mcblast.sh, the group producer's blast that docs/bench.md
// cites, runs as written: a short blast between two namespaces delivers
// every record, exits 0 and prints its row.
func TestMcblastScript(t *testing.T) {
	netns.Require(t)
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("needs bash")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangBudget)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "../../scripts/mcblast.sh")
	cmd.Env = append(os.Environ(), childEnv+"=1", "CASTS="+self, "N=20000", "RUNS=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/mcblast.sh: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`(?m)^1 +\S+ +\d+( +[\d.]+){4}$`).Match(out) {
		t.Fatalf("no row:\n%s", out)
	}
	t.Logf("%s", out)
}
