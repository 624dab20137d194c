package counters

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// smallTmpfs mounts a tmpfs of size bytes on a fresh directory (root:
// CAP_SYS_ADMIN) and unmounts it when the test ends.
func smallTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0755"); err != nil {
		if errors.Is(err, unix.EPERM) {
			t.Skip("mounting a tmpfs needs CAP_SYS_ADMIN (run as root)")
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// fill writes to dir until its file system is full.
func fill(t *testing.T, dir string) {
	f, err := os.Create(filepath.Join(dir, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 4096)
	for {
		if _, err := f.Write(b); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

// TestFullTmpfs: on a file system too small for the file, Acquire still
// returns counters (in process memory) and says why nothing is written;
// on one that fills up after the file was made, every page of the file
// is already the writer's, so touching all of them (slots, the whole
// loss ring, the error log) neither faults nor loses a value.
func TestFullTmpfs(t *testing.T) {
	t.Run("too small", func(t *testing.T) {
		dir := smallTmpfs(t, "256k")
		f, err := Acquire(Config{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Release()
		if f.Path() != "" || f.Err() == nil || !strings.Contains(f.Err().Error(), "no space left") {
			t.Fatalf("path %q, err %v", f.Path(), f.Err())
		}
		c, _ := f.Counter(KindCounter, "x")
		c.Store(5)
		if v, _ := f.Snapshot().Find("x"); v != 5 {
			t.Fatalf("in-memory counter %d", v)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Fatalf("left in the directory: %v", ents)
		}
	})
	t.Run("full later", func(t *testing.T) {
		dir := smallTmpfs(t, "1m")
		f, err := Acquire(Config{Dir: dir})
		if err != nil || f.Err() != nil {
			t.Fatal(err, f.Err())
		}
		defer f.Release()
		fill(t, dir)
		for i := 0; i < Slots; i++ {
			c, err := f.Counter(KindCounter, "x_"+itoa(i+1))
			if err != nil {
				t.Fatal(err)
			}
			c.Store(uint64(i))
		}
		for i := 0; i < LossEntries; i++ {
			f.OpenLoss(Loss{Stream: 1, Role: RoleConsumer, First: uint64(i + 1), At: 1})
		}
		for i := 0; i < ErrorSlots; i++ {
			f.Error(1, RoleConsumer, "error "+itoa(i+1), 1)
		}
		f.Flush()
		s, err := Read(f.Path())
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Values) != Slots || len(s.Loss) != LossEntries || len(s.Errors) != ErrorSlots {
			t.Fatalf("read %d slots, %d episodes, %d errors", len(s.Values), len(s.Loss), len(s.Errors))
		}
		if v, _ := s.Find("x_" + itoa(Slots)); v != Slots-1 {
			t.Fatalf("last slot %d", v)
		}
	})
}
