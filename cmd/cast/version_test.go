package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

func TestVersionLine(t *testing.T) {
	tests := []struct {
		name     string
		settings []debug.BuildSetting
		want     string // regexp
	}{
		{"clean", []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}, {Key: "vcs.modified", Value: "false"}},
			`^walcast \(devel\) revision 0123abcd \(2026-12-01T10:00:00Z\) clean go\S+ \w+/\w+$`},
		{"dirty", []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.modified", Value: "true"}},
			`^walcast \(devel\) revision 0123abcd modified go`},
		{"no vcs", nil, `^walcast \(devel\) revision unknown \(built without VCS information\) go`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := versionLine(&debug.BuildInfo{Settings: tc.settings}, true)
			if !regexp.MustCompile(tc.want).MatchString(got) {
				t.Fatalf("%q, want /%s/", got, tc.want)
			}
		})
	}
}

// A binary built with VCS stamping prints the revision its build info
// carries (go version -m reads the same), or says it has none (a git
// worktree, whose .git is a file the go tool does not follow, or a tree
// without git).
func TestVersionFromBuild(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "cast")
	build := exec.Command("go", "build", "-buildvcs=auto", "-o", bin, ".")
	build.Stderr = os.Stderr
	done := make(chan error, 1)
	go func() { done <- build.Run() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Minute):
		build.Process.Kill()
		t.Fatal("go build hung")
	}
	info, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "revision unknown (built without VCS information)"
	if m := regexp.MustCompile(`vcs\.revision=(\S+)`).FindSubmatch(info); m != nil {
		want = "revision " + string(m[1]) + " ("
		if !regexp.MustCompile(` (clean|modified) go`).Match(out) {
			t.Fatalf("cast version: %q lacks clean|modified", out)
		}
	}
	if !strings.Contains(string(out), want) {
		t.Fatalf("cast version: %q, want %q (build info:\n%s)", out, want, info)
	}
}
