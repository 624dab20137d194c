package bpf

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"
	"golang.org/x/sys/unix"
)

// requireXDP skips when the kernel (or our privileges) cannot load XDP
// programs, printing why.
func requireXDP(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to load BPF programs (CI runs as root)")
	}
	for _, err := range []error{features.HaveProgramType(ebpf.XDP), features.HaveMapType(ebpf.XSKMap)} {
		if errors.Is(err, ebpf.ErrNotSupported) {
			t.Skipf("kernel lacks a feature: %v", err)
		}
	}
}

// frame options for the crafted test frames.
type frame struct {
	etherType uint16 // default 0x0800
	verIHL    byte   // default 0x45
	proto     byte   // default 17
	frag      uint16 // flags+offset field
	dport     uint16
	payload   []byte
	cut       int // truncate the frame to this many bytes when > 0
}

func (f frame) bytes() []byte {
	et, vi, pr := f.etherType, f.verIHL, f.proto
	if et == 0 {
		et = 0x0800
	}
	if vi == 0 {
		vi = 0x45
	}
	if pr == 0 {
		pr = 17
	}
	ihl := int(vi&0x0f) * 4
	b := make([]byte, 14+ihl+8+len(f.payload))
	copy(b[0:6], []byte{2, 0, 0, 0, 0, 2})
	copy(b[6:12], []byte{2, 0, 0, 0, 0, 1})
	binary.BigEndian.PutUint16(b[12:], et)
	ip := b[14:]
	ip[0] = vi
	binary.BigEndian.PutUint16(ip[2:], uint16(ihl+8+len(f.payload)))
	binary.BigEndian.PutUint16(ip[6:], f.frag)
	ip[8] = 64
	ip[9] = pr
	copy(ip[12:16], []byte{10, 0, 0, 1})
	copy(ip[16:20], []byte{10, 0, 0, 2})
	udp := ip[ihl:]
	binary.BigEndian.PutUint16(udp[0:], 40000)
	binary.BigEndian.PutUint16(udp[2:], f.dport)
	binary.BigEndian.PutUint16(udp[4:], uint16(8+len(f.payload)))
	copy(udp[8:], f.payload)
	if f.cut > 0 {
		b = b[:f.cut]
	}
	return b
}

// record returns a walcast-like frame prefix of the given record type.
func record(typ uint16, n int) []byte {
	p := make([]byte, n)
	p[0] = 1
	binary.LittleEndian.PutUint16(p[2:], typ)
	return p
}

func ipv6UDP(dport uint16) []byte {
	b := make([]byte, 14+40+8+16)
	binary.BigEndian.PutUint16(b[12:], 0x86dd)
	b[14] = 0x60
	binary.BigEndian.PutUint16(b[14+4:], 8+16)
	b[14+6] = 17
	b[14+7] = 64
	binary.BigEndian.PutUint16(b[14+40+2:], dport)
	return b
}

const port = 7000

// cases shared by both programs: which frames count as "ours".
var frameCases = []struct {
	name  string
	frame []byte
	match bool
}{
	{"hit", frame{dport: port, payload: record(0, 32)}.bytes(), true},
	{"hit empty payload", frame{dport: port}.bytes(), true},
	{"other port", frame{dport: port + 1, payload: record(0, 32)}.bytes(), false},
	{"port byte-swapped", frame{dport: 0x581b, payload: record(0, 32)}.bytes(), false},
	{"tcp", frame{proto: 6, dport: port, payload: record(0, 32)}.bytes(), false},
	{"icmp", frame{proto: 1, dport: port, payload: record(0, 32)}.bytes(), false},
	{"short udp header", frame{dport: port, cut: 14 + 20 + 7}.bytes(), false},
	{"only ethernet", frame{dport: port, cut: 14}.bytes(), false},
	{"ipv6 udp", ipv6UDP(port), false},
	{"arp", frame{etherType: 0x0806, dport: port}.bytes(), false},
	{"vlan", frame{etherType: 0x8100, dport: port}.bytes(), false},
	{"ip options", frame{verIHL: 0x46, dport: port, payload: record(0, 32)}.bytes(), false},
	{"first fragment (MF)", frame{frag: 0x2000, dport: port, payload: record(0, 32)}.bytes(), false},
	{"later fragment", frame{frag: 0x0010, dport: port, payload: record(0, 32)}.bytes(), false},
	{"DF is not a fragment", frame{frag: 0x4000, dport: port, payload: record(0, 32)}.bytes(), true},
}

func TestRedirectVerdicts(t *testing.T) {
	requireXDP(t)
	// Fallback XDP_DROP tells "tried to redirect to an empty slot" from pass.
	c := DefaultRedirectConfig()
	c.Port, c.Fallback, c.Queues = port, XDPDrop, 4
	r, err := NewRedirect(c)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	t.Logf("redirect program:\n%v", progSpec{redirectPort: port, xskFD: -1, impairCfgFD: -1, impairCtrFD: -1, fallback: XDPDrop}.instructions())
	for _, tc := range frameCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := r.Run(tc.frame)
			if err != nil {
				t.Fatal(err)
			}
			want := uint32(XDPPass)
			if tc.match {
				want = XDPDrop
			}
			if got != want {
				t.Fatalf("verdict %d, want %d", got, want)
			}
		})
	}

	// With a socket in slot 0 (test runs use rx_queue_index 0) a hit is
	// XDP_REDIRECT.
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("AF_XDP socket: %v", err)
	}
	defer unix.Close(fd)
	if err := r.Register(0, fd); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(4, fd); err == nil {
		t.Fatal("Register(4) on a 4-queue map succeeded")
	}
	for _, tc := range frameCases {
		got, err := r.Run(tc.frame)
		if err != nil {
			t.Fatal(err)
		}
		want := uint32(XDPPass)
		if tc.match {
			want = XDPRedirect
		}
		if got != want {
			t.Errorf("%s with socket: verdict %d, want %d", tc.name, got, want)
		}
	}
	if err := r.Unregister(0); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Run(frameCases[0].frame); got != XDPDrop {
		t.Fatalf("after Unregister: verdict %d, want fallback %d", got, XDPDrop)
	}
}

// impairProg is the impair logic in either hook: the XDP program or the
// tc classifier, with the verdicts of its kind.
type impairProg interface {
	Run(frame []byte) (uint32, error)
	Counters() (ImpairCounters, error)
	Set(ImpairConfig) error
	Close() error
}

type impairKind struct {
	name       string
	pass, drop uint32
	load       func(ImpairConfig) (impairProg, error)
}

var impairKinds = []impairKind{
	{"xdp", XDPPass, XDPDrop, func(c ImpairConfig) (impairProg, error) { return NewImpair(c) }},
	{"tc", 1<<32 + TCActUnspec, TCActShot, func(c ImpairConfig) (impairProg, error) { return NewTCImpair(c) }},
}

func counters(t *testing.T, im impairProg) ImpairCounters {
	t.Helper()
	c, err := im.Counters()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestImpairFrames(t *testing.T) {
	requireXDP(t)
	for _, k := range impairKinds {
		t.Run(k.name, func(t *testing.T) {
			c := DefaultImpairConfig()
			c.Port, c.DropFraction = port, 1
			im, err := k.load(c)
			if err != nil {
				t.Fatal(err)
			}
			defer im.Close()
			matched := uint64(0)
			for _, tc := range frameCases {
				if k.name == "tc" && len(tc.frame) <= 14 {
					// BPF_PROG_TEST_RUN refuses an skb with nothing past
					// the Ethernet header (EINVAL); XDP covers the case.
					continue
				}
				got, err := im.Run(tc.frame)
				if err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				want := k.pass
				if tc.match {
					want = k.drop
					matched++
				}
				if got != want {
					t.Errorf("%s: verdict %d, want %d", tc.name, got, want)
				}
			}
			if got := counters(t, im); got != (ImpairCounters{matched, matched, matched}) {
				t.Fatalf("counters %+v, want all %d", got, matched)
			}
		})
	}
}

func TestImpairConfigs(t *testing.T) {
	requireXDP(t)
	nak, hb := record(0x11, 64), record(0x12, 64)
	tests := []struct {
		name   string
		cfg    ImpairConfig
		frames [][]byte
		drops  []bool // verdict per frame, in order
		want   ImpairCounters
	}{
		{"fraction 0 passes", ImpairConfig{Port: port, RecordType: -1},
			[][]byte{frame{dport: port}.bytes()}, []bool{false}, ImpairCounters{1, 1, 0}},
		{"port 0 matches any port", ImpairConfig{DropFraction: 1, RecordType: -1},
			[][]byte{frame{dport: 1}.bytes(), frame{dport: 65535}.bytes()}, []bool{true, true}, ImpairCounters{2, 2, 2}},
		{"other port not counted", ImpairConfig{Port: port, DropFraction: 1, RecordType: -1},
			[][]byte{frame{dport: port + 1}.bytes()}, []bool{false}, ImpairCounters{}},
		{"every 3rd", ImpairConfig{Port: port, EveryNth: 3, RecordType: -1},
			rep(frame{dport: port}.bytes(), 7), []bool{false, false, true, false, false, true, false}, ImpairCounters{7, 7, 2}},
		{"every 1st", ImpairConfig{Port: port, EveryNth: 1, RecordType: -1},
			rep(frame{dport: port}.bytes(), 2), []bool{true, true}, ImpairCounters{2, 2, 2}},
		{"only NAKs", ImpairConfig{Port: port, DropFraction: 1, RecordType: 0x11},
			[][]byte{frame{dport: port, payload: nak}.bytes(), frame{dport: port, payload: hb}.bytes()},
			[]bool{true, false}, ImpairCounters{2, 1, 1}},
		{"type filter skips short payload", ImpairConfig{Port: port, DropFraction: 1, RecordType: 0},
			[][]byte{frame{dport: port, payload: []byte{1, 0, 0}}.bytes(), frame{dport: port, payload: []byte{1, 0, 0, 0}}.bytes()},
			[]bool{false, true}, ImpairCounters{2, 1, 1}},
		{"every 2nd NAK", ImpairConfig{Port: port, EveryNth: 2, RecordType: 0x11},
			[][]byte{frame{dport: port, payload: nak}.bytes(), frame{dport: port, payload: hb}.bytes(), frame{dport: port, payload: nak}.bytes()},
			[]bool{false, false, true}, ImpairCounters{3, 2, 1}},
	}
	for _, k := range impairKinds {
		for _, tc := range tests {
			t.Run(k.name+"/"+tc.name, func(t *testing.T) {
				im, err := k.load(tc.cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer im.Close()
				for i, f := range tc.frames {
					got, err := im.Run(f)
					if err != nil {
						t.Fatal(err)
					}
					if (got == k.drop) != tc.drops[i] || (got != k.drop && got != k.pass) {
						t.Errorf("frame %d: verdict %d, want drop=%v", i, got, tc.drops[i])
					}
				}
				if got := counters(t, im); got != tc.want {
					t.Fatalf("counters %+v, want %+v", got, tc.want)
				}
			})
		}
	}
}

func rep(b []byte, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = b
	}
	return out
}

// TestImpairFraction checks the random draw against the binomial spread:
// more than 6 standard deviations off fails (a false failure is ~1e-9).
func TestImpairFraction(t *testing.T) {
	requireXDP(t)
	const n = 20000
	f := frame{dport: port}.bytes()
	for _, k := range impairKinds {
		for _, p := range []float64{0.01, 0.1, 0.5} {
			im, err := k.load(ImpairConfig{Port: port, DropFraction: p, RecordType: -1})
			if err != nil {
				t.Fatal(err)
			}
			for range n {
				if _, err := im.Run(f); err != nil {
					t.Fatal(err)
				}
			}
			c := counters(t, im)
			im.Close()
			sd := math.Sqrt(n * p * (1 - p))
			if c.Candidates != n || math.Abs(float64(c.Dropped)-n*p) > 6*sd {
				t.Errorf("%s p=%v: dropped %d of %d, want %.0f ± %.0f", k.name, p, c.Dropped, c.Candidates, n*p, 6*sd)
			}
			t.Logf("%s p=%v: dropped %d of %d", k.name, p, c.Dropped, n)
		}
	}
}

// TestImpairSet changes the loss while loaded: an outage and its end.
func TestImpairSet(t *testing.T) {
	requireXDP(t)
	for _, k := range impairKinds {
		im, err := k.load(DefaultImpairConfig())
		if err != nil {
			t.Fatal(err)
		}
		f := frame{dport: port}.bytes()
		for i, p := range []float64{0, 1, 0, 1} {
			if err := im.Set(ImpairConfig{DropFraction: p, RecordType: -1}); err != nil {
				t.Fatal(err)
			}
			got, _ := im.Run(f)
			if want := map[bool]uint32{false: k.pass, true: k.drop}[p == 1]; got != want {
				t.Fatalf("%s step %d p=%v: verdict %d, want %d", k.name, i, p, got, want)
			}
		}
		if err := im.Set(ImpairConfig{DropFraction: 2}); err == nil {
			t.Fatalf("%s: Set accepted DropFraction 2", k.name)
		}
		im.Close()
	}
}

// TestRedirectWithImpair embeds the impair logic into the redirect program.
func TestRedirectWithImpair(t *testing.T) {
	requireXDP(t)
	im, err := NewImpair(ImpairConfig{Port: port, DropFraction: 1, RecordType: 0x11})
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	c := DefaultRedirectConfig()
	c.Port, c.Impair = port, im
	r, err := NewRedirect(c)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := r.Register(0, fd); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		f    []byte
		want uint32
	}{
		{"nak dropped", frame{dport: port, payload: record(0x11, 64)}.bytes(), XDPDrop},
		{"data redirected", frame{dport: port, payload: record(0, 64)}.bytes(), XDPRedirect},
		{"other port passes untouched", frame{dport: port + 1, payload: record(0x11, 64)}.bytes(), XDPPass},
		{"ipv6 passes", ipv6UDP(port), XDPPass},
	} {
		if got, err := r.Run(tc.f); err != nil || got != tc.want {
			t.Errorf("%s: verdict %d (%v), want %d", tc.name, got, err, tc.want)
		}
	}
	if got := counters(t, im); got != (ImpairCounters{2, 1, 1}) {
		t.Fatalf("counters %+v", got)
	}
	if err := im.Set(ImpairConfig{Port: port, RecordType: -1}); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Run(frame{dport: port, payload: record(0x11, 64)}.bytes()); got != XDPRedirect {
		t.Fatalf("after Set(0): verdict %d, want redirect", got)
	}
}

// TestRedirectByPort: a port-keyed redirect sends each registered port to
// its slot's socket and everything else to the kernel.
func TestRedirectByPort(t *testing.T) {
	requireXDP(t)
	c := DefaultRedirectConfig()
	c.PortSlots, c.Fallback = 2, XDPDrop
	r, err := NewRedirect(c)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var fds [2]int
	for i := range fds {
		if fds[i], err = unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0); err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fds[i])
	}
	verdict := func(dport uint16) uint32 {
		t.Helper()
		v, err := r.Run(frame{dport: dport, payload: record(0, 32)}.bytes())
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := verdict(port); v != XDPPass {
		t.Fatalf("unregistered port: verdict %d, want pass", v)
	}
	for i, p := range []uint16{port, port + 1} {
		if err := r.RegisterPort(p, i, fds[i]); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []uint16{port, port + 1} {
		if v := verdict(p); v != XDPRedirect {
			t.Fatalf("port %d: verdict %d, want redirect", p, v)
		}
	}
	if v := verdict(port + 2); v != XDPPass {
		t.Fatalf("other port: verdict %d, want pass", v)
	}
	if v, _ := r.Run(ipv6UDP(port)); v != XDPPass {
		t.Fatalf("ipv6: verdict %d, want pass", v)
	}
	if err := r.UnregisterPort(port+1, 1); err != nil {
		t.Fatal(err)
	}
	if v := verdict(port + 1); v != XDPPass {
		t.Fatalf("after UnregisterPort: verdict %d, want pass", v)
	}
	if err := r.RegisterPort(port, 2, fds[0]); err == nil {
		t.Fatal("slot 2 of 2 accepted")
	}
	q, err := NewRedirect(DefaultRedirectConfig())
	if err == nil {
		q.Close()
		t.Fatal("queue-keyed redirect without a port accepted")
	}
}

// The tc program loaded with TCP impairs IPv4/TCP segments to the port
// and lets UDP through; TCP is fixed at load and tc only.
func TestTCImpairTCP(t *testing.T) {
	requireXDP(t)
	im, err := NewTCImpair(ImpairConfig{Port: port, DropFraction: 1, RecordType: -1, TCP: true})
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	pass, drop := uint32(1<<32+TCActUnspec), uint32(TCActShot)
	for _, tc := range []struct {
		name string
		f    frame
		want uint32
	}{
		{"tcp to the port", frame{proto: 6, dport: port, payload: make([]byte, 32)}, drop},
		{"tcp elsewhere", frame{proto: 6, dport: port + 1, payload: make([]byte, 32)}, pass},
		{"udp to the port", frame{dport: port, payload: record(0x11, 64)}, pass},
	} {
		got, err := im.Run(tc.f.bytes())
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got != tc.want {
			t.Errorf("%s: verdict %d, want %d", tc.name, got, tc.want)
		}
	}
	if c := counters(t, im); c != (ImpairCounters{1, 1, 1}) {
		t.Errorf("counters %+v, want 1 matched and dropped", c)
	}
	if err := im.Set(ImpairConfig{RecordType: -1}); err == nil {
		t.Error("Set turned TCP off on a loaded program")
	}
	if xi, err := NewImpair(ImpairConfig{RecordType: -1, TCP: true}); err == nil {
		xi.Close()
		t.Error("the XDP program took TCP")
	}
}
