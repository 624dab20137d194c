package counters

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

func acquire(t *testing.T) (*File, string) {
	t.Helper()
	dir := t.TempDir()
	f, err := Acquire(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Release() })
	return f, dir
}

func needFiles(t *testing.T) {
	if _, _, err := mapRead(os.DevNull); err == ErrNotSupported {
		t.Skip("no shared mapping on " + runtime.GOOS)
	}
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		t.Skip("no shared mapping on " + runtime.GOOS)
	}
}

func TestWriteRead(t *testing.T) {
	needFiles(t)
	f, dir := acquire(t)
	a, err := f.Counter(KindCounter, `naks_sent{stream="1",role="consumer"}`)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := f.Counter(KindGauge, `delivered_seq{stream="1",role="consumer"}`)
	a.Store(7)
	b.Store(1 << 40)
	ref := f.OpenLoss(Loss{Stream: 1, Role: RoleConsumer, First: 10, At: 100})
	f.CloseLoss(ref, Loss{Stream: 1, Role: RoleConsumer, First: 10, Count: 3, Naks: 2, At: 100, Done: 300, Repair: RepairUDP})
	f.Error(1, RoleConsumer, "faulted: retry budget", 5)
	f.Error(1, RoleConsumer, "faulted: retry budget", 9)
	f.Error(0, RoleNone, "other", 6)
	f.Flush()

	want := filepath.Join(dir, filepathBase())
	if f.Path() != want {
		t.Fatalf("path %q, want %q", f.Path(), want)
	}
	fi, err := os.Stat(want)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("file mode %v, want 0644", fi.Mode().Perm())
	}
	snaps, bad, err := List(dir)
	if err != nil || len(bad) > 0 || len(snaps) != 1 {
		t.Fatalf("List: %v %v %d", err, bad, len(snaps))
	}
	s := snaps[0]
	if s.PID != os.Getpid() || s.State != Live || s.Start == 0 {
		t.Errorf("header: pid %d state %s start %d", s.PID, s.State, s.Start)
	}
	if v, ok := s.Find(`naks_sent{stream="1",role="consumer"}`); !ok || v != 7 {
		t.Errorf("naks_sent = %d %v", v, ok)
	}
	if v, _ := s.Find(`delivered_seq{stream="1",role="consumer"}`); v != 1<<40 {
		t.Errorf("delivered_seq = %d", v)
	}
	if s.Values[0].Name != "naks_sent" || s.Values[0].Labels["role"] != "consumer" || s.Values[0].Kind != KindCounter {
		t.Errorf("parsed %+v", s.Values[0])
	}
	if len(s.Loss) != 1 || s.Loss[0].Count != 3 || s.Loss[0].Repair != RepairUDP || s.Loss[0].Latency() != 200 {
		t.Errorf("loss %+v", s.Loss)
	}
	if len(s.Errors) != 2 || s.Errors[0].Count != 2 || s.Errors[0].First != 5 || s.Errors[0].Last != 9 || s.Errors[1].Message != "other" {
		t.Errorf("errors %+v", s.Errors)
	}

	// A freed slot disappears and is reused.
	f.Free(a)
	c, _ := f.Counter(KindCounter, "other_total")
	f.Flush()
	s, _ = Read(want)
	if _, ok := s.Find(`naks_sent{stream="1",role="consumer"}`); ok || len(s.Values) != 2 {
		t.Errorf("after Free: %+v", s.Values)
	}
	if c.idx != a.idx {
		t.Errorf("slot %d not reused (got %d)", a.idx, c.idx)
	}
}

func filepathBase() string { return itoa(os.Getpid()) + Suffix }

func itoa(n int) string {
	b := []byte{}
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

func TestSharedAndReleased(t *testing.T) {
	needFiles(t)
	dir := t.TempDir()
	f1, err := Acquire(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	f2, _ := Acquire(Config{Dir: dir})
	if f1 != f2 {
		t.Fatal("two Acquires of one dir gave two files")
	}
	f1.Release()
	if _, err := os.Stat(f2.Path()); err != nil {
		t.Fatalf("file gone while still acquired: %v", err)
	}
	f2.Release()
	if _, err := os.Stat(f2.Path()); !os.IsNotExist(err) {
		t.Fatalf("file left after the last Release: %v", err)
	}
	if f, err := Acquire(Config{Off: true}); f != nil || err != nil {
		t.Fatalf("Off: %v %v", f, err)
	}
	var nilFile *File
	c, err := nilFile.Counter(KindCounter, "x")
	c.Store(1)
	if err != nil || c.Valid() || nilFile.Release() != nil {
		t.Fatal("a nil File must do nothing")
	}
}

func TestStale(t *testing.T) {
	needFiles(t)
	f, dir := acquire(t)
	// A copy of this file under a pid no process has: stale.
	b, err := os.ReadFile(f.Path())
	if err != nil {
		t.Fatal(err)
	}
	pid := 1 << 30 // above pid_max on every kernel we run on
	le.PutUint64(b[hPID:], uint64(pid))
	stale := filepath.Join(dir, itoa(pid)+Suffix)
	if err := os.WriteFile(stale, b, 0o644); err != nil {
		t.Fatal(err)
	}
	snaps, _, _ := List(dir)
	if len(snaps) != 2 || snaps[0].State != Live || snaps[1].State != Stale {
		t.Fatalf("states: %v", states(snaps))
	}
}

func states(s []*Snapshot) []State {
	var out []State
	for _, x := range s {
		out = append(out, x.State)
	}
	return out
}

func TestBadFiles(t *testing.T) {
	needFiles(t)
	dir := t.TempDir()
	good, _ := Acquire(Config{Dir: dir})
	defer good.Release()
	b, _ := os.ReadFile(good.Path())
	cases := map[string][]byte{
		"short":   []byte("WALCNTRS"),
		"magic":   append([]byte("XXXXXXXX"), b[8:]...),
		"version": func() []byte { c := append([]byte(nil), b...); le.PutUint32(c[hVersion:], 99); return c }(),
		"offsets": func() []byte { c := append([]byte(nil), b...); le.PutUint32(c[hSlots:], 1<<19); return c }(),
		"cut":     b[:HeaderSize+10],
	}
	for name, data := range cases {
		p := filepath.Join(dir, name+Suffix)
		os.WriteFile(p, data, 0o644)
		if _, err := Read(p); err == nil {
			t.Errorf("%s: read without error", name)
		}
	}
	_, bad, err := List(dir)
	if err != nil || len(bad) != len(cases) {
		t.Errorf("List: %v, %d bad", err, len(bad))
	}
}

func TestLabels(t *testing.T) {
	for s, ok := range map[string]bool{
		`a`: true, `a_b{x="1"}`: true, `a{x="1",y="z"}`: true, `a{}`: true,
		`a{x=1}`: false, `{x="1"}`: false, `a{x="1"`: false, `1a`: false, `a{x="1"y="2"}`: false,
	} {
		if _, _, got := ParseLabel(s); got != ok {
			t.Errorf("ParseLabel(%q) ok %v, want %v", s, got, ok)
		}
	}
	if CheckLabel("") == nil || CheckLabel(string(make([]byte, LabelMax+1))) == nil || CheckLabel("a\n") == nil {
		t.Error("CheckLabel let a bad label through")
	}
}

func TestFull(t *testing.T) {
	f, _ := acquire(t)
	var err error
	for i := 0; i <= Slots && err == nil; i++ {
		_, err = f.Counter(KindCounter, "x")
	}
	if err != ErrFull {
		t.Fatalf("got %v, want ErrFull", err)
	}
}

func TestHeartbeat(t *testing.T) {
	needFiles(t)
	f, _ := acquire(t)
	s0, _ := Read(f.Path())
	ran := make(chan struct{}, 1)
	stop := f.OnSample(func() {
		select {
		case ran <- struct{}{}:
		default:
		}
	})
	defer stop()
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("sampler never ran")
	}
	time.Sleep(2 * SampleInterval)
	s1, _ := Read(f.Path())
	if s1.Heartbeat <= s0.Heartbeat {
		t.Errorf("heartbeat did not move: %d → %d", s0.Heartbeat, s1.Heartbeat)
	}
}

func TestStoreAllocs(t *testing.T) {
	f, _ := acquire(t)
	c, _ := f.Counter(KindCounter, "x")
	var n uint64
	if a := testing.AllocsPerRun(1000, func() { n++; c.Store(n) }); a != 0 {
		t.Fatalf("Store allocates %v", a)
	}
	var zero Counter
	if a := testing.AllocsPerRun(1000, func() { zero.Store(1) }); a != 0 {
		t.Fatalf("zero Store allocates %v", a)
	}
}

func BenchmarkStore(b *testing.B) {
	dir := b.TempDir()
	f, err := Acquire(Config{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Release()
	c, _ := f.Counter(KindCounter, "x")
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c.Store(uint64(i))
	}
}

func BenchmarkStoreHeap(b *testing.B) {
	var v [8]uint64
	c := Counter{v: u64(unsafeBytes(v[:], 64), 0)}
	for i := 0; b.Loop(); i++ {
		c.Store(uint64(i))
	}
}
