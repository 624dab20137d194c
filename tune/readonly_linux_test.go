package tune

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// A container's /sys and /proc/sys are mounted read-only: checks still
// report, apply changes nothing, logs nothing, and says why (EROFS).
func TestApplyReadOnlyContainer(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to bind-mount a read-only fixture")
	}
	root := copyTree(t, "testdata/container")
	if err := unix.Mount(root, root, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("bind mount: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(root, unix.MNT_DETACH) })
	if err := unix.Mount("", root, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Skipf("remount read-only: %v", err)
	}
	before := snapshot(t, root)
	p := badProber()
	cfg := fixtureConfig(root, p)
	cfg.CPUs = []int{1}
	rs, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := byID(rs)
	if r := got["net.rmem_max"]; r.Severity != Warn || len(r.Changes) != 1 {
		t.Fatalf("net.rmem_max on the container fixture: %+v", r)
	}
	// Only the file changes: ethtool goes through the (fake) prober.
	var files []Result
	for _, r := range rs {
		if len(r.Changes) > 0 && r.Changes[0].Kind == KindFile {
			files = append(files, r)
		}
	}
	var undo bytes.Buffer
	done, err := Apply(files, p, &undo)
	if !errors.Is(err, unix.EROFS) {
		t.Fatalf("apply on read-only tree: err %v, want EROFS", err)
	}
	if len(done) != 0 || undo.Len() != 0 {
		t.Errorf("nothing may be changed or logged: %v %q", done, undo.String())
	}
	after := snapshot(t, root)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed on a read-only mount", k)
		}
	}
}
