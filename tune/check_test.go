package tune

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeProber is a Prober over maps; Set* mutate them.
type fakeProber struct {
	driver   string
	features map[string]bool
	fixed    map[string]bool // features that cannot change
	coalesce map[string]uint32
	rcv, snd int
	dio      DirectIO
	dioErr   error
	napi     uint32
	err      error // returned by every ethtool method when set
}

func goodProber() *fakeProber {
	return &fakeProber{
		driver:   "ixgbe",
		features: map[string]bool{"rx-gro": true, "tx-generic-segmentation": true, "rx-udp-gro-forwarding": true, "rx-gro-hw": true},
		fixed:    map[string]bool{"rx-gro-hw": true},
		coalesce: map[string]uint32{"rx-usecs": 0, "rx-frames": 1, "adaptive-rx": 0, "tx-usecs": 0, "tx-frames": 1, "adaptive-tx": 0},
		rcv:      8 << 20, snd: 8 << 20,
		dio:  DirectIO{FS: "ext4", Works: true, RejectsMisaligned: true, MemAlign: 512, OffsetAlign: 512},
		napi: 258,
	}
}

func badProber() *fakeProber {
	p := goodProber()
	p.driver = "veth"
	p.features["rx-gro"] = false
	p.features["tx-generic-segmentation"] = false
	p.features["rx-udp-gro-forwarding"] = false
	p.coalesce["rx-usecs"] = 50
	p.coalesce["adaptive-rx"] = 1
	p.rcv, p.snd = 212992, 212992
	p.dio = DirectIO{FS: "tmpfs", Works: true}
	p.napi = 0
	return p
}

func (p *fakeProber) Driver(string) (string, error) { return p.driver, p.err }
func (p *fakeProber) Features(string) (map[string]bool, error) {
	if p.err != nil {
		return nil, p.err
	}
	return maps.Clone(p.features), nil
}
func (p *fakeProber) SetFeature(_ string, name string, on bool) error {
	if p.err != nil {
		return p.err
	}
	if _, ok := p.features[name]; !ok || p.fixed[name] {
		return fmt.Errorf("feature %s: %w", name, ErrNotSupported)
	}
	p.features[name] = on
	return nil
}
func (p *fakeProber) Coalesce(string) (map[string]uint32, error) {
	if p.err != nil {
		return nil, p.err
	}
	return maps.Clone(p.coalesce), nil
}
func (p *fakeProber) SetCoalesce(_ string, name string, v uint32) error {
	if p.err != nil {
		return p.err
	}
	p.coalesce[name] = v
	return nil
}
func (p *fakeProber) SocketBuffer(int) (int, int, error)           { return p.rcv, p.snd, nil }
func (p *fakeProber) DirectIO(string) (DirectIO, error)            { return p.dio, p.dioErr }
func (p *fakeProber) NapiID(string, time.Duration) (uint32, error) { return p.napi, nil }

func fixtureConfig(root string, p Prober) Config {
	c := DefaultConfig()
	c.Proc = filepath.Join(root, "proc")
	c.Sys = filepath.Join(root, "sys")
	c.Probe = p
	return c
}

func byID(rs []Result) map[string]Result {
	m := make(map[string]Result, len(rs))
	for _, r := range rs {
		m[r.ID] = r
	}
	return m
}

func TestFixtures(t *testing.T) {
	notProbed := func(c *Config) {}
	all := func(c *Config) {
		c.WALDir, c.NapiListen, c.PID, c.FIFO = "/wal", "127.0.0.1:1", 1234, true
	}
	tests := []struct {
		name   string
		root   string
		prober *fakeProber
		cfg    func(*Config)
		want   map[string]Severity // subset of checks
		worst  Severity
	}{
		{
			name: "good host, CPUs from isolated", root: "testdata/good", prober: goodProber(), cfg: all,
			want: map[string]Severity{
				"cpu.online": Pass, "cmdline.isolcpus": Pass, "cmdline.nohz_full": Pass, "cmdline.rcu_nocbs": Pass,
				"cpu.isolated": Pass, "cpu.nohz_full": Pass, "irq.affinity": Pass, "irq.balance": Pass,
				"cpu.governor": Pass, "cpu.idle": Pass, "mm.thp": Pass, "mm.thp_defrag": Pass, "mm.swap": Pass,
				"net.rmem_max": Pass, "net.wmem_max": Pass, "net.rmem_default": Pass, "net.busy_read": Pass,
				"net.busy_poll": Pass, "net.sockbuf": Pass, "net.udp_early_demux": Pass, "nic.gro": Pass, "nic.gso": Pass, "nic.udp_gro_fwd": Pass,
				"nic.napi": Info, "nic.napi_id": Pass, "nic.coalesce": Pass, "sched.rt_runtime": Pass,
				"proc.timerslack": Pass, "wal.dir": Pass, "clock.source": Pass,
			},
			worst: Info,
		},
		{
			name: "bad host, loops on 2-3, FIFO", root: "testdata/bad", prober: badProber(),
			cfg: func(c *Config) { all(c); c.CPUs = []int{2, 3} },
			want: map[string]Severity{
				"cpu.online": Pass, "cmdline.isolcpus": Warn, "cmdline.nohz_full": Warn, "cmdline.rcu_nocbs": Warn,
				"cpu.isolated": Warn, "cpu.nohz_full": Skip, "irq.affinity": Warn, "irq.balance": Warn,
				"cpu.governor": Warn, "cpu.idle": Warn, "mm.thp": Warn, "mm.thp_defrag": Warn, "mm.swap": Warn,
				"net.rmem_max": Warn, "net.wmem_max": Warn, "net.rmem_default": Warn, "net.busy_read": Warn,
				"net.busy_poll": Warn, "net.sockbuf": Warn, "net.udp_early_demux": Warn, "nic.gro": Warn, "nic.gso": Warn, "nic.udp_gro_fwd": Warn,
				"nic.napi_id": Warn, "nic.coalesce": Warn, "sched.rt_runtime": Fail, "proc.timerslack": Warn,
				"wal.dir": Warn, "clock.source": Warn,
			},
			worst: Fail,
		},
		{
			name: "bad host, loop CPU offline", root: "testdata/bad", prober: badProber(),
			cfg:   func(c *Config) { c.CPUs = []int{7} },
			want:  map[string]Severity{"cpu.online": Fail, "sched.rt_runtime": Info, "wal.dir": Skip, "nic.napi_id": Skip, "proc.timerslack": Info},
			worst: Fail,
		},
		{
			name: "bad host, no CPUs given", root: "testdata/bad", prober: badProber(), cfg: notProbed,
			want:  map[string]Severity{"cpu.online": Info, "cmdline.isolcpus": Info, "cpu.isolated": Info, "irq.affinity": Info, "irq.balance": Info},
			worst: Warn,
		},
		{
			name: "missing files", root: t.TempDir(), prober: &fakeProber{err: fmt.Errorf("no such device: %w", ErrNotSupported)}, cfg: notProbed,
			want: map[string]Severity{
				"cpu.online": Skip, "cmdline.isolcpus": Skip, "cpu.isolated": Skip, "cpu.nohz_full": Skip,
				"irq.affinity": Skip, "cpu.governor": Skip, "cpu.idle": Skip, "mm.thp": Skip, "mm.swap": Skip,
				"net.rmem_max": Skip, "net.busy_read": Skip, "nic.gro": Skip, "nic.coalesce": Skip, "nic.napi": Skip,
				"sched.rt_runtime": Skip, "proc.timerslack": Skip, "wal.dir": Skip, "clock.source": Skip,
			},
			worst: Warn, // the fake socket probe grants 0 bytes
		},
		{
			name: "container: per-netns sysctls only, veth", root: "testdata/container",
			prober: func() *fakeProber { p := badProber(); p.coalesce = nil; p.err = nil; return p }(),
			cfg:    func(c *Config) { c.WALDir = "/wal"; c.Iface = "eth0" },
			want: map[string]Severity{
				"cpu.online": Info, "cpu.nohz_full": Skip, "irq.affinity": Skip, "cpu.governor": Skip, "cpu.idle": Skip,
				"mm.thp": Pass, "net.rmem_max": Warn, "net.busy_read": Skip, "net.busy_poll": Skip, "nic.udp_gro_fwd": Warn,
				"clock.source": Info, "wal.dir": Warn,
			},
			worst: Warn,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := fixtureConfig(tc.root, tc.prober)
			tc.cfg(&cfg)
			rs, err := Run(cfg)
			if err != nil {
				t.Fatal(err)
			}
			got := byID(rs)
			if len(got) != len(rs) {
				t.Fatalf("duplicate check ids in %d results", len(rs))
			}
			for id, want := range tc.want {
				r, ok := got[id]
				if !ok {
					t.Errorf("%s: no result", id)
					continue
				}
				if r.Severity != want {
					t.Errorf("%s: severity %s, want %s (found %q, want %q)", id, r.Severity, want, r.Found, r.Want)
				}
			}
			for _, r := range rs {
				if r.ID == "" || r.Why == "" || r.Reads == "" || r.Want == "" {
					t.Errorf("%+v: id, why, reads and want must be set", r)
				}
				if r.Bad() && r.Fix == "" {
					t.Errorf("%s is %s without a fix", r.ID, r.Severity)
				}
				if r.Reboot && len(r.Changes) > 0 {
					t.Errorf("%s: a reboot item must not carry run-time changes", r.ID)
				}
			}
			if w := Worst(rs); w != tc.worst {
				t.Errorf("worst %s, want %s", w, tc.worst)
			}
		})
	}
}

func TestFixtureDetails(t *testing.T) {
	cfg := fixtureConfig("testdata/bad", badProber())
	cfg.CPUs = []int{2, 3}
	rs, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := byID(rs)
	// IRQs come from the device's msi_irqs and the eth0-named lines, not eth1's.
	irq := got["irq.affinity"]
	if irq.Found != "eth0 40:0-3(eff 0) 41:0-3(eff 0) 42:0-3(eff 0)" || len(irq.Changes) != 3 || irq.Changes[0].Value != "0-1" {
		t.Errorf("irq.affinity: %+v", irq)
	}
	if r := got["cmdline.isolcpus"]; r.Found != "1" || !r.Reboot || !strings.Contains(r.Fix, "isolcpus=domain,managed_irq,2-3") {
		t.Errorf("cmdline.isolcpus: %+v", r)
	}
	if r := got["cpu.idle"]; len(r.Changes) != 2 || !strings.HasSuffix(r.Changes[0].Target, "cpu2/cpuidle/state2/disable") {
		t.Errorf("cpu.idle changes: %+v", r.Changes)
	}
	if r := got["mm.thp"]; r.Found != "always" || r.Changes[0].Value != "madvise" {
		t.Errorf("mm.thp: %+v", r)
	}
	if r := got["clock.source"]; r.Found != "hpet" || len(r.Changes) != 1 {
		t.Errorf("clock.source: %+v", r)
	}
	// The init arguments after "--" on the good host's command line are not the kernel's.
	cfg = fixtureConfig("testdata/good", goodProber())
	rs, _ = Run(cfg)
	if r := byID(rs)["cmdline.isolcpus"]; r.Found != "domain,managed_irq,2-3" {
		t.Errorf("good cmdline.isolcpus found %q", r.Found)
	}
	// "all" is a CPU list on the command line.
	root0 := copyTree(t, "testdata/bad")
	if err := os.WriteFile(filepath.Join(root0, "proc/cmdline"), []byte("ro isolcpus=2-3 nohz_full=all rcu_nocbs=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c0 := fixtureConfig(root0, badProber())
	c0.CPUs = []int{2, 3}
	rs, _ = Run(c0)
	if g := byID(rs); g["cmdline.isolcpus"].Severity != Pass || g["cmdline.nohz_full"].Severity != Pass || g["cmdline.rcu_nocbs"].Severity != Warn {
		t.Errorf("cmdline with all: %+v %+v %+v", g["cmdline.isolcpus"], g["cmdline.nohz_full"], g["cmdline.rcu_nocbs"])
	}
	// A read-only sysctl (net.core.rmem_max in a child namespace) gets no change.
	root := copyTree(t, "testdata/container")
	if err := os.Chmod(filepath.Join(root, "proc/sys/net/core/rmem_max"), 0o444); err != nil {
		t.Fatal(err)
	}
	rs, _ = Run(fixtureConfig(root, badProber()))
	if r := byID(rs)["net.rmem_max"]; r.Severity != Warn || len(r.Changes) != 0 || !strings.Contains(r.Fix, "on the host") {
		t.Errorf("read-only net.rmem_max: %+v", r)
	}
	// An IRQ whose mask is right but whose effective CPU is a loop CPU is managed.
	root = copyTree(t, "testdata/good")
	if err := os.WriteFile(filepath.Join(root, "proc/irq/41/effective_affinity_list"), []byte("3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rs, _ = Run(fixtureConfig(root, goodProber()))
	if r := byID(rs)["irq.affinity"]; r.Severity != Warn || !r.Reboot || len(r.Changes) != 0 {
		t.Errorf("managed IRQ: %+v", r)
	}
	// virtio: the MSI vectors sit on the PCI parent of the device symlink.
	root = copyTree(t, "testdata/good")
	dev := filepath.Join(root, "sys/class/net/eth0/device")
	pci := filepath.Join(root, "sys/devices/pci0000:00/0000:00:03.0")
	if err := os.RemoveAll(dev); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{pci + "/virtio2", pci + "/msi_irqs/40", pci + "/msi_irqs/41"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../../../devices/pci0000:00/0000:00:03.0/virtio2", dev); err != nil {
		t.Fatal(err)
	}
	rs, _ = Run(fixtureConfig(root, goodProber()))
	if r := byID(rs)["irq.affinity"]; !strings.HasPrefix(r.Found, "eth0 40:0-1(eff 0) 41:0-1(eff 0) 42:") {
		t.Errorf("virtio IRQs via the device's parent: %+v", r)
	}
	// A non-veth NIC does not need rx-udp-gro-forwarding.
	p := goodProber()
	p.features["rx-udp-gro-forwarding"] = false
	rs, _ = Run(fixtureConfig("testdata/good", p))
	if r := byID(rs)["nic.udp_gro_fwd"]; r.Severity != Info || len(r.Changes) != 0 {
		t.Errorf("ixgbe nic.udp_gro_fwd: %+v", r)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Config)
		ok   bool
	}{
		{"default", func(*Config) {}, true},
		{"no roots", func(c *Config) { c.Proc = "" }, false},
		{"zero sockbuf", func(c *Config) { c.SockBuf = 0 }, false},
		{"negative cpu", func(c *Config) { c.CPUs = []int{-1} }, false},
		{"napi without wait", func(c *Config) { c.NapiListen, c.NapiWait = "x:1", 0 }, false},
		{"negative pid", func(c *Config) { c.PID = -3 }, false},
	}
	for _, tc := range tests {
		c := DefaultConfig()
		tc.mod(&c)
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v", tc.name, err)
		}
		if _, err := Run(c); !tc.ok && err == nil {
			t.Errorf("%s: Run accepted an invalid config", tc.name)
		}
	}
}

// copyTree copies a fixture tree (regular files and directories only).
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "root")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// snapshot returns every file's content under root.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		m[strings.TrimPrefix(p, root)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestApplyUndoFixture(t *testing.T) {
	root := copyTree(t, "testdata/bad")
	before := snapshot(t, root)
	p := badProber()
	featBefore, coalBefore := maps.Clone(p.features), maps.Clone(p.coalesce)
	cfg := fixtureConfig(root, p)
	cfg.CPUs, cfg.FIFO, cfg.PID = []int{2, 3}, true, 1234
	rs, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var undo bytes.Buffer
	done, err := Apply(rs, p, &undo)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	// Every change is recorded with the value it replaced.
	logged, err := ParseUndo(bytes.NewReader(undo.Bytes()))
	if err != nil || !slices.Equal(logged, done) {
		t.Fatalf("undo file %q does not match changes %v (%v)", undo.String(), done, err)
	}
	prevOf := map[string]string{}
	for _, c := range done {
		prevOf[c.String()] = c.Prev
	}
	for key, want := range map[string]string{
		"file " + root + "/sys/kernel/mm/transparent_hugepage/enabled": "always",
		"file " + root + "/proc/sys/net/core/rmem_max":                 "212992",
		"file " + root + "/proc/irq/40/smp_affinity_list":              "0-3",
		"feature eth0 rx-gro":                                          "off",
		"coalesce eth0 rx-usecs":                                       "50",
	} {
		if prevOf[key] != want {
			t.Errorf("%s: prev %q, want %q", key, prevOf[key], want)
		}
	}
	// After apply, everything that had a run-time fix passes.
	rs2, _ := Run(cfg)
	after := byID(rs2)
	for _, r := range rs {
		if r.Bad() && len(r.Changes) > 0 && after[r.ID].Bad() {
			t.Errorf("%s still %s after apply: found %q", r.ID, after[r.ID].Severity, after[r.ID].Found)
		}
	}
	if got := after["net.rmem_max"].Found; got != "8388608" {
		t.Errorf("rmem_max after apply: %s", got)
	}
	// A second apply is a no-op.
	var undo2 bytes.Buffer
	if again, err := Apply(rs, p, &undo2); err != nil || len(again) != 0 {
		t.Errorf("second apply changed %v (%v)", again, err)
	}
	// Undo restores every file byte for byte (choice files as their selection).
	restored, err := Undo(bytes.NewReader(undo.Bytes()), p)
	if err != nil || len(restored) != len(done) {
		t.Fatalf("undo restored %d of %d: %v", len(restored), len(done), err)
	}
	now := snapshot(t, root)
	for path, was := range before {
		got := now[path]
		if strings.Contains(path, "transparent_hugepage") {
			was = bracketed(strings.TrimSpace(was)) + "\n"
		}
		if got != was {
			t.Errorf("%s: %q after undo, want %q", path, got, was)
		}
	}
	if !maps.Equal(p.features, featBefore) || !maps.Equal(p.coalesce, coalBefore) {
		t.Errorf("ethtool state after undo: %v %v, want %v %v", p.features, p.coalesce, featBefore, coalBefore)
	}
}

func TestApplyGoesOnAfterFailure(t *testing.T) {
	root := copyTree(t, "testdata/bad")
	p := badProber()
	p.fixed["rx-gro"] = true
	cfg := fixtureConfig(root, p)
	rs, _ := Run(cfg)
	var undo bytes.Buffer
	done, err := Apply(rs, p, &undo)
	if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "nic.gro") {
		t.Fatalf("want the fixed rx-gro to fail with ErrNotSupported, got %v", err)
	}
	if len(done) == 0 || strings.Contains(undo.String(), "rx-gro\t") {
		t.Errorf("other changes must go on, and the failed one must not be logged: %q", undo.String())
	}
}

func TestParseUndo(t *testing.T) {
	tests := []struct {
		name, in string
		n        int
		ok       bool
	}{
		{"header only", UndoHeader, 0, true},
		{"all kinds", UndoHeader + "file\t/proc/sys/net/core/rmem_max\t-\t212992\t8388608\nfeature\tveth0\trx-gro\toff\ton\ncoalesce\teth0\tadaptive-rx\t1\t0\n", 3, true},
		{"short line", "file\t/x\t-\t1\n", 0, false},
		{"unknown kind", "sysctl\t/x\t-\t1\t2\n", 0, false},
		{"feature without name", "feature\teth0\t-\ton\toff\n", 0, false},
		{"empty target", "file\t\t-\t1\t2\n", 0, false},
	}
	for _, tc := range tests {
		cs, err := ParseUndo(strings.NewReader(tc.in))
		if (err == nil) != tc.ok || len(cs) != tc.n {
			t.Errorf("%s: %d changes, err %v", tc.name, len(cs), err)
		}
	}
}

func FuzzParseUndo(f *testing.F) {
	f.Add(UndoHeader + "file\t/proc/sys/net/core/rmem_max\t-\t212992\t8388608\n")
	f.Add("feature\tveth0\trx-gro\toff\ton\n#x\n\n")
	f.Fuzz(func(t *testing.T, s string) {
		cs, err := ParseUndo(strings.NewReader(s))
		if err != nil {
			return
		}
		// What parses re-encodes to lines that parse to the same changes.
		var b strings.Builder
		for _, c := range cs {
			b.WriteString(undoLine(c))
		}
		again, err := ParseUndo(strings.NewReader(b.String()))
		if err != nil || len(again) != len(cs) {
			t.Fatalf("round trip of %q: %v (%d vs %d)", s, err, len(again), len(cs))
		}
	})
}
