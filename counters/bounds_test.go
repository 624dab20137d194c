package counters

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDefaultDir: DefaultDir takes walcast under /dev/shm only where
// that is usable, and falls back to walcast under the temporary
// directory where /dev/shm is missing, not a directory or not writable;
// SetDefault overrides both.
func TestDefaultDir(t *testing.T) {
	orig := writable
	t.Cleanup(func() { writable = orig })
	base := t.TempDir()
	tmp := filepath.Join(base, "tmp")
	mk := func(p string) string {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	unwritable := mk(filepath.Join(base, "ro"))
	roWithDir := mk(filepath.Join(base, "ro-with-walcast"))
	mk(filepath.Join(roWithDir, "walcast"))
	roWithFile := mk(filepath.Join(base, "ro-with-file"))
	if err := os.WriteFile(filepath.Join(roWithFile, "walcast"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	writable = func(dir string) bool {
		switch dir {
		case unwritable, roWithDir, roWithFile:
			return false
		}
		return true
	}
	good := mk(filepath.Join(base, "shm"))
	for _, c := range []struct {
		name, shm, want string
	}{
		{"usable", good, filepath.Join(good, "walcast")},
		{"missing", filepath.Join(base, "nothing"), filepath.Join(tmp, "walcast")},
		{"not a directory", file, filepath.Join(tmp, "walcast")},
		{"not writable", unwritable, filepath.Join(tmp, "walcast")},
		{"not writable, walcast there", roWithDir, filepath.Join(roWithDir, "walcast")},
		{"not writable, walcast a file", roWithFile, filepath.Join(tmp, "walcast")},
	} {
		if got := chooseDir(c.shm, tmp); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}

	// The real seam, with permissions (root passes them: skipped there).
	writable = orig
	if os.Geteuid() > 0 { // not root (nor Windows: -1)
		ro := mk(filepath.Join(base, "mode0555"))
		if err := os.Chmod(ro, 0o555); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(ro, 0o755)
		if got := chooseDir(ro, tmp); got != filepath.Join(tmp, "walcast") {
			t.Errorf("mode 0555: %q, want the fallback", got)
		}
	}

	// A zero Config follows the choice: with /dev/shm missing the file
	// goes under TMPDIR, where a reader with the default looks too.
	t.Setenv("TMPDIR", tmp)
	old := shmDir
	shmDir = filepath.Join(base, "nothing")
	defer func() { shmDir = old }()
	oldDef := processDefault.Load()
	processDefault.Store(nil)
	defer processDefault.Store(oldDef)
	if got := DefaultDir(); got != filepath.Join(tmp, "walcast") {
		t.Fatalf("DefaultDir %q", got)
	}
	f, err := Acquire(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release()
	if f.Err() == nil {
		if want := filepath.Join(tmp, "walcast", filepathBase()); f.Path() != want {
			t.Fatalf("path %q, want %q", f.Path(), want)
		}
		snaps, _, err := List("")
		if err != nil || len(snaps) != 1 || snaps[0].PID != os.Getpid() {
			t.Fatalf("List(\"\") after the fallback: %v, %d files", err, len(snaps))
		}
	}
	SetDefault(Config{Dir: good})
	if got := DefaultDir(); got != good {
		t.Errorf("after SetDefault: %q", got)
	}
}

// TestLossRingWraps: the loss ring keeps the last LossEntries episodes
// and no more. Writing 1.3 rings' worth overwrites the oldest; every kept
// episode reads back with its own first seq, counts and times; the
// number ever written is exact; closing an episode whose entry was
// reused leaves the newer one alone; the file and the process's copy
// keep their size.
func TestLossRingWraps(t *testing.T) {
	f, _ := acquire(t)
	const total = LossEntries + LossEntries/3
	mem0 := len(f.mem)
	var refs []LossRef
	ep := func(i int) Loss {
		return Loss{Stream: 1, Role: RoleConsumer, First: uint64(1000 * i), At: int64(1e9 + 10*i)}
	}
	for i := 1; i <= total; i++ {
		e := ep(i)
		ref := f.OpenLoss(e)
		refs = append(refs, ref)
		if i%2 == 0 { // every other one closes; the rest stay open
			e.Count, e.Naks, e.Done, e.Repair = uint64(i), uint64(i%7+1), e.At+int64(i), RepairUDP
			f.CloseLoss(ref, e)
		}
	}
	// A late close of an overwritten episode must not touch its entry's
	// new owner (episode LossEntries+1 sits where episode 1 was).
	f.CloseLoss(refs[0], Loss{Stream: 9, Role: RoleProducer, First: 1, Count: 99, At: 1, Done: 2, Repair: RepairWAL})
	f.Flush()

	check := func(name string, s *Snapshot) {
		t.Helper()
		if s.LossTotal != total {
			t.Errorf("%s: LossTotal %d, want %d", name, s.LossTotal, total)
		}
		if len(s.Loss) != LossEntries {
			t.Fatalf("%s: %d episodes kept, want the last %d", name, len(s.Loss), LossEntries)
		}
		for k, e := range s.Loss {
			i := total - LossEntries + 1 + k // oldest first
			want := ep(i)
			if i%2 == 0 {
				want.Count, want.Naks, want.Done, want.Repair = uint64(i), uint64(i%7+1), want.At+int64(i), RepairUDP
			}
			if e != want {
				t.Fatalf("%s: episode %d of the ring: %+v, want episode %d %+v", name, k, e, i, want)
			}
		}
	}
	check("own memory", f.Snapshot())
	if len(f.mem) != mem0 {
		t.Errorf("process copy grew from %d to %d bytes", mem0, len(f.mem))
	}
	if f.Path() == "" {
		return // no shared mapping here
	}
	s, err := Read(f.Path())
	if err != nil {
		t.Fatal(err)
	}
	check("file", s)
	if fi, err := os.Stat(f.Path()); err != nil || fi.Size() != fileSize {
		t.Errorf("file size %v (%v), want %d", fi.Size(), err, fileSize)
	}
}

// TestErrorTableFull: the error log keeps ErrorSlots distinct messages.
// A new message once they are taken is not kept but counted in
// ErrorsDropped (every occurrence), while the kept ones go on counting
// with their last time; nothing grows.
func TestErrorTableFull(t *testing.T) {
	f, _ := acquire(t)
	for i := 1; i <= ErrorSlots; i++ {
		f.Error(1, RoleConsumer, "error "+itoa(i), int64(i))
	}
	s := f.Snapshot()
	if len(s.Errors) != ErrorSlots || s.ErrorsDropped != 0 {
		t.Fatalf("full table: %d errors, %d dropped", len(s.Errors), s.ErrorsDropped)
	}
	f.Error(1, RoleConsumer, "error 65", 100)        // the 65th distinct message
	f.Error(1, RoleConsumer, "error 65", 101)        // again
	f.Error(2, RoleConsumer, "error 1", 102)         // same text, another stream: distinct
	f.Error(1, RoleConsumer, "error 1", 103)         // kept: counts on
	f.Error(1, RoleConsumer, "error "+itoa(64), 104) // the last kept one too
	f.Flush()
	for _, src := range []string{"own memory", "file"} {
		s := f.Snapshot()
		if src == "file" {
			if f.Path() == "" {
				continue
			}
			var err error
			if s, err = Read(f.Path()); err != nil {
				t.Fatal(err)
			}
		}
		if s.ErrorsDropped != 3 {
			t.Errorf("%s: ErrorsDropped %d, want 3 (twice the 65th message, once the one of stream 2)", src, s.ErrorsDropped)
		}
		if len(s.Errors) != ErrorSlots {
			t.Fatalf("%s: %d errors kept, want %d", src, len(s.Errors), ErrorSlots)
		}
		for i, e := range s.Errors {
			if e.Message == "error 65" || e.Stream != 1 {
				t.Errorf("%s: entry %d holds %+v: a message found room in a full table", src, i, e)
			}
		}
		first, last := s.Errors[0], s.Errors[ErrorSlots-1]
		if first.Message != "error 1" || first.Count != 2 || first.First != 1 || first.Last != 103 {
			t.Errorf("%s: first entry %+v, want error 1 seen twice, at 1 and 103", src, first)
		}
		if last.Message != "error 64" || last.Count != 2 || last.First != 64 || last.Last != 104 {
			t.Errorf("%s: last entry %+v, want error 64 seen twice, at 64 and 104", src, last)
		}
	}
}
