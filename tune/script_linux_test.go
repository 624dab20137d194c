package tune

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const tuneSh = "../scripts/tune.sh"

// scriptRow is one table row of tune.sh check.
type scriptRow struct{ sev, id string }

// runScript runs tune.sh with env and returns its exit code and output.
func runScript(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not installed")
	}
	cmd := exec.Command(tuneSh, args...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String()
	}
	t.Fatalf("tune.sh: %v", err)
	return 0, ""
}

// parseTable returns the rows of a check table, in order.
func parseTable(t *testing.T, out string) []scriptRow {
	t.Helper()
	var rows []scriptRow
	for line := range strings.SplitSeq(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || strings.HasPrefix(line, " ") || f[0] == "STATUS" {
			continue
		}
		var s Severity
		if s.UnmarshalText([]byte(f[0])) != nil {
			continue
		}
		rows = append(rows, scriptRow{f[0], f[1]})
	}
	if len(rows) == 0 {
		t.Fatalf("no table rows in:\n%s", out)
	}
	return rows
}

// compare asserts that tune.sh and Run agree on every check id, in order,
// and on every severity except those in differ.
func compare(t *testing.T, rows []scriptRow, rs []Result, out string, differ ...string) {
	t.Helper()
	if len(rows) != len(rs) {
		t.Fatalf("tune.sh printed %d checks, Run returned %d:\n%s", len(rows), len(rs), out)
	}
	for i, r := range rs {
		if rows[i].id != r.ID {
			t.Errorf("check %d: tune.sh %s, Go %s", i, rows[i].id, r.ID)
			continue
		}
		if !slices.Contains(differ, r.ID) && rows[i].sev != r.Severity.String() {
			t.Errorf("%s: tune.sh %s, Go %s (found %q)", r.ID, rows[i].sev, r.Severity, r.Found)
		}
	}
}

func TestScriptShellcheck(t *testing.T) {
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Skip("shellcheck not installed (scripts/setup.sh installs it)")
	}
	if out, err := exec.Command(sc, tuneSh).CombinedOutput(); err != nil {
		t.Fatalf("shellcheck: %v\n%s", err, out)
	}
}

// On the real machine, check reports what this VM lacks (no cpufreq, no
// idle states, no nohz_full) as skip, never fails without flags, and agrees
// with the Go checks line by line.
func TestScriptCheckRealHost(t *testing.T) {
	code, out := runScript(t, nil, "check")
	if code != 0 {
		t.Fatalf("tune.sh check exited %d:\n%s", code, out)
	}
	rows := parseTable(t, out)
	rs, err := Run(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	// net.sockbuf: the script computes the grant from *mem_max, Go probes
	// a socket; both should agree, but a root process may hold FORCE'd
	// buffers elsewhere, so only the id is compared.
	compare(t, rows, rs, out, "net.sockbuf")
	for _, r := range rs {
		if r.Severity == Skip && !strings.Contains(out, "skip   "+r.ID) {
			t.Errorf("%s is skipped by Go but not by tune.sh", r.ID)
		}
	}
	t.Logf("tune.sh check on this machine:\n%s", out)
}

func TestScriptFixtures(t *testing.T) {
	tests := []struct {
		name, root string
		args       []string
		code       int
		cfg        func(*Config)
	}{
		{"good", "testdata/good", nil, 0, func(*Config) {}},
		{"bad", "testdata/bad", []string{"--cpus", "2-3", "--fifo", "--pid", "1234"}, 1,
			func(c *Config) { c.CPUs, c.FIFO, c.PID = []int{2, 3}, true, 1234 }},
		{"container", "testdata/container", []string{"--cpus", "1"}, 0, func(c *Config) { c.CPUs = []int{1} }},
		{"missing files", t.TempDir(), nil, 0, func(*Config) {}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root, _ := filepath.Abs(tc.root)
			env := []string{"TUNE_PROC=" + root + "/proc", "TUNE_SYS=" + root + "/sys"}
			code, out := runScript(t, env, append([]string{"check", "--wal-dir", t.TempDir()}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d:\n%s", code, tc.code, out)
			}
			cfg := fixtureConfig(root, nil) // the real prober: NIC checks read the real eth0, read-only
			cfg.WALDir = t.TempDir()
			tc.cfg(&cfg)
			rs, err := Run(cfg)
			if err != nil {
				t.Fatal(err)
			}
			compare(t, parseTable(t, out), rs, out, "net.sockbuf")
		})
	}
}

// apply twice (the second changes nothing) on a copy of the bad fixture,
// then restore the script's undo file with Go's Undo, and a Go undo file
// with the script: one format, both tools.
func TestScriptApplyUndo(t *testing.T) {
	root := copyTree(t, "testdata/bad")
	before := snapshot(t, root)
	env := []string{"TUNE_PROC=" + root + "/proc", "TUNE_SYS=" + root + "/sys"}
	// File settings only: the fixture's eth0 is the real one.
	only := "irq.affinity,cpu.governor,cpu.idle,mm.thp,mm.thp_defrag,net.rmem_max,net.busy_read,net.udp_early_demux,sched.rt_runtime,proc.timerslack,clock.source,cmdline.isolcpus,mm.swap"
	undo := filepath.Join(t.TempDir(), "undo.tsv")
	args := []string{"apply", "--cpus", "2-3", "--fifo", "--pid", "1234", "--only", only, "--undo", undo}

	code, out := runScript(t, env, append(args, "-n")...)
	if code != 0 || !strings.Contains(out, "would    net.rmem_max") {
		t.Fatalf("dry run: %d\n%s", code, out)
	}
	if now := snapshot(t, root); !mapsEqual(now, before) {
		t.Fatal("dry run changed files")
	}
	code, out = runScript(t, env, args...)
	if code != 0 {
		t.Fatalf("apply: %d\n%s", code, out)
	}
	for _, w := range []string{"reboot   cmdline.isolcpus", "manual   mm.swap", "/proc/sys/net/core/rmem_max: 212992 -> 8388608",
		"enabled: always -> madvise", "sched_rt_runtime_us: 950000 -> -1", "/proc/irq/40/smp_affinity_list: 0-3 -> 0-1"} {
		if !strings.Contains(out, w) {
			t.Errorf("apply output lacks %q:\n%s", w, out)
		}
	}
	cfg := fixtureConfig(root, goodProber())
	cfg.CPUs, cfg.FIFO, cfg.PID = []int{2, 3}, true, 1234
	rs, _ := Run(cfg)
	for _, r := range rs {
		if strings.Contains(only, r.ID) && r.Bad() && len(r.Changes) > 0 {
			t.Errorf("%s still %s after tune.sh apply: %q", r.ID, r.Severity, r.Found)
		}
	}
	code, out = runScript(t, env, args...)
	if code != 0 || !strings.Contains(out, "nothing to apply at run time") {
		t.Errorf("second apply is not a no-op: %d\n%s", code, out)
	}
	// The script's undo file, restored by Go.
	f, err := os.Open(undo)
	if err != nil {
		t.Fatal(err)
	}
	restored, err := Undo(f, goodProber())
	f.Close()
	if err != nil || len(restored) == 0 {
		t.Fatalf("Go undo of tune.sh's file: %d restored, %v", len(restored), err)
	}
	assertRestored(t, before, snapshot(t, root))

	// A Go undo file, restored by the script.
	rs, _ = Run(cfg)
	var goUndo bytes.Buffer
	goUndo.WriteString(UndoHeader)
	var files []Result
	for _, r := range rs {
		if strings.Contains(only, r.ID) {
			files = append(files, r)
		}
	}
	if _, err := Apply(files, goodProber(), &goUndo); err != nil {
		t.Fatal(err)
	}
	goFile := filepath.Join(t.TempDir(), "go-undo.tsv")
	if err := os.WriteFile(goFile, goUndo.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := runScript(t, env, "undo", goFile); code != 0 || !strings.Contains(out, "restored file") {
		t.Fatalf("tune.sh undo of Go's file: %d\n%s", code, out)
	}
	assertRestored(t, before, snapshot(t, root))
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// assertRestored compares file trees; choice files come back as their
// selected word.
func assertRestored(t *testing.T, before, now map[string]string) {
	t.Helper()
	for path, was := range before {
		if strings.Contains(path, "transparent_hugepage") {
			was = bracketed(strings.TrimSpace(was)) + "\n"
		}
		if now[path] != was {
			t.Errorf("%s: %q after undo, want %q", path, now[path], was)
		}
	}
}

// runScriptCheck runs tune.sh check against a fixture root.
func runScriptCheck(t *testing.T, root string, args ...string) (int, string) {
	t.Helper()
	return runScript(t, []string{"TUNE_PROC=" + root + "/proc", "TUNE_SYS=" + root + "/sys"}, append([]string{"check"}, args...)...)
}

func TestScriptCmdlineAll(t *testing.T) {
	root := copyTree(t, "testdata/bad")
	if err := os.WriteFile(filepath.Join(root, "proc/cmdline"), []byte("ro isolcpus=2-3 nohz_full=all rcu_nocbs=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := runScriptCheck(t, root, "--cpus", "2-3")
	for _, w := range []string{"pass   cmdline.isolcpus", "pass   cmdline.nohz_full", "warn   cmdline.rcu_nocbs"} {
		if code != 0 || !strings.Contains(out, w) {
			t.Errorf("tune.sh with nohz_full=all: exit %d, no %q\n%s", code, w, out)
		}
	}
}
