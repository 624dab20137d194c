package pathbench

import (
	"strings"
	"testing"

	"github.com/walcast/walcast/bpf"
)

func TestParseSpec(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Spec
	}{
		{"udp", Spec{Name: "udp", Kind: "udp", Batch: 64, BusyPoll: -1}},
		{"mmsg-b1", Spec{Name: "mmsg-b1", Kind: "mmsg", Batch: 1, BusyPoll: -1}},
		{"mmsg-b64-gso", Spec{Name: "mmsg-b64-gso", Kind: "mmsg", Batch: 64, GSO: true, BusyPoll: -1}},
		{"xdp-native", Spec{Name: "xdp-native", Kind: "xdp", Batch: 64, Attach: bpf.ModeNative}},
		{"xdp-generic-busy", Spec{Name: "xdp-generic-busy", Kind: "xdp", Batch: 64, Attach: bpf.ModeGeneric, BusyPoll: 50}},
		{"xdp-native-busy-nowakeup", Spec{Name: "xdp-native-busy-nowakeup", Kind: "xdp", Batch: 64, Attach: bpf.ModeNative, BusyPoll: 50, NoWakeup: true}},
		{"xdp-native-b8-busyalways", Spec{Name: "xdp-native-b8-busyalways", Kind: "xdp", Batch: 8, Attach: bpf.ModeNative, BusyPoll: 50, BusyAlways: true}},
		{"xdp-native-fill2048", Spec{Name: "xdp-native-fill2048", Kind: "xdp", Batch: 64, Attach: bpf.ModeNative, FillFrames: 2048}},
		{"xdp-native-rx8192-fill8192", Spec{Name: "xdp-native-rx8192-fill8192", Kind: "xdp", Batch: 64, Attach: bpf.ModeNative, RxFrames: 8192, FillFrames: 8192}},
	} {
		got, err := ParseSpec(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseSpec(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "tcp", "udp-gso", "mmsg", "mmsg-64", "mmsg-b0", "mmsg-b2000", "mmsg-bx",
		"mmsg-b64-gso-gso", "mmsg-b64-busy", "xdp", "xdp-zerocopy", "xdp-native-busy-busy", "xdp-native-fast",
		"xdp-native-busy-busyalways", "xdp-native-b0", "xdp-generic-bx", "xdp-native-fill0", "xdp-native-fillx",
		"xdp-native-fill4096", "xdp-native-rx1024-fill2048"} {
		if _, err := ParseSpec(bad); err == nil {
			t.Errorf("ParseSpec(%q) accepted", bad)
		} else if !strings.Contains(err.Error(), "want udp") {
			t.Errorf("ParseSpec(%q): error %q does not say what is accepted", bad, err)
		}
	}
}

func TestParseSpecs(t *testing.T) {
	all, err := ParseSpecs("")
	if err != nil || len(all) != len(DefaultSpecs) {
		t.Fatalf("default: %v %v", all, err)
	}
	for i, s := range all {
		if s.Name != DefaultSpecs[i] {
			t.Fatalf("default %d: %s", i, s.Name)
		}
	}
	if got, err := ParseSpecs("udp, xdp-native"); err != nil || len(got) != 2 || got[1].Kind != "xdp" {
		t.Fatalf("two: %v %v", got, err)
	}
	for _, bad := range []string{"udp,udp", "udp,", "udp,tcp"} {
		if _, err := ParseSpecs(bad); err == nil {
			t.Errorf("ParseSpecs(%q) accepted", bad)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	good := DefaultConfig()
	good.Specs, _ = ParseSpecs("")
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*Config){
		"no specs":       func(c *Config) { c.Specs = nil },
		"no workloads":   func(c *Config) { c.Workloads = nil },
		"bad workload":   func(c *Config) { c.Workloads = []string{"rtt", "ping"} },
		"zero runs":      func(c *Config) { c.Runs = 0 },
		"zero blocks":    func(c *Config) { c.Blocks = 0 },
		"tiny size":      func(c *Config) { c.Size = 20 },
		"huge size":      func(c *Config) { c.Sizes = []int{144, 9000} },
		"loss 1":         func(c *Config) { c.Loss = 1 },
		"negative loss":  func(c *Config) { c.Loss = -0.1 },
		"zero loss rate": func(c *Config) { c.LossRate = 0 },
		"zero window":    func(c *Config) { c.Window = 0 },
		"zero duration":  func(c *Config) { c.TputTime = 0 },
	} {
		c := good
		mod(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
