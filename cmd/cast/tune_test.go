package main

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/walcast/walcast/tune"
)

func runTuneCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	old := tuneOut
	tuneOut = &out
	defer func() { tuneOut = old }()
	code := run(append([]string{"tune"}, args...), &errb)
	return code, out.String(), errb.String()
}

func fixtureRoots(root string) []string {
	return []string{"-proc", filepath.Join(root, "proc"), "-sys", filepath.Join(root, "sys")}
}

func TestTuneCheck(t *testing.T) {
	good := fixtureRoots("../../tune/testdata/good")
	bad := fixtureRoots("../../tune/testdata/bad")
	tests := []struct {
		name string
		args []string
		code int
		want []string // substrings of stdout
	}{
		{"good host passes", append([]string{"check"}, good...), 0, []string{"pass   cmdline.isolcpus", "pass   irq.affinity", " fail\n"}},
		{"bad host warns", append([]string{"check", "-cpus", "2-3"}, bad...), 0, []string{"warn   mm.thp", "fix (apply): echo madvise", "fix (reboot): add \"isolcpus="}},
		{"FIFO with RT throttling fails", append([]string{"check", "-fifo"}, bad...), 1, []string{"fail   sched.rt_runtime", "1 fail"}},
		{"offline CPU fails", append([]string{"check", "-cpus", "9"}, bad...), 1, []string{"fail   cpu.online"}},
		{"bad -cpus", append([]string{"check", "-cpus", "x"}, good...), 2, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runTuneCmd(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, tc.code, out, errs)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestTuneCheckJSON(t *testing.T) {
	code, out, errs := runTuneCmd(t, append([]string{"check", "-json", "-cpus", "2-3"}, fixtureRoots("../../tune/testdata/bad")...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rs []tune.Result
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		t.Fatal(err)
	}
	m := map[string]tune.Result{}
	for _, r := range rs {
		m[r.ID] = r
	}
	if r := m["net.rmem_max"]; r.Severity != tune.Warn || r.Found != "212992" || len(r.Changes) != 1 {
		t.Errorf("net.rmem_max: %+v", r)
	}
	if r := m["cmdline.isolcpus"]; !r.Reboot {
		t.Errorf("cmdline.isolcpus must be a reboot item: %+v", r)
	}
}

// apply and undo on a copy of the bad fixture, restricted with -only to
// file settings so the real NIC is never touched.
func TestTuneApplyUndoFixture(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	if err := os.CopyFS(root, os.DirFS("../../tune/testdata/bad")); err != nil {
		t.Fatal(err)
	}
	undo := filepath.Join(t.TempDir(), "undo.tsv")
	roots := fixtureRoots(root)
	rmem := filepath.Join(root, "proc/sys/net/core/rmem_max")
	code, out, errs := runTuneCmd(t, append([]string{"apply", "-n", "-only", "net.rmem_max,mm.thp,cmdline.isolcpus", "-cpus", "2-3"}, roots...)...)
	if code != 0 || !strings.Contains(out, "would    net.rmem_max") || !strings.Contains(out, "212992 -> 8388608") {
		t.Fatalf("dry run: %d\n%s%s", code, out, errs)
	}
	if b, _ := os.ReadFile(rmem); string(b) != "212992\n" {
		t.Fatalf("dry run changed rmem_max to %q", b)
	}
	code, out, errs = runTuneCmd(t, append([]string{"apply", "-undo", undo, "-only", "net.rmem_max,mm.thp,cmdline.isolcpus", "-cpus", "2-3"}, roots...)...)
	if code != 0 {
		t.Fatalf("apply: %d\n%s%s", code, out, errs)
	}
	for _, w := range []string{"reboot   cmdline.isolcpus", "rmem_max: 212992 -> 8388608", "enabled: always -> madvise", "2 changes"} {
		if !strings.Contains(out, w) {
			t.Errorf("apply output lacks %q:\n%s", w, out)
		}
	}
	if b, _ := os.ReadFile(rmem); string(b) != "8388608\n" {
		t.Errorf("rmem_max after apply: %q", b)
	}
	if _, _, errs := runTuneCmd(t, append([]string{"apply", "-only", "nope"}, roots...)...); !strings.Contains(errs, "unknown check") {
		t.Errorf("-only nope: %q", errs)
	}
	code, out, errs = runTuneCmd(t, "undo", undo)
	if code != 0 || !strings.Contains(out, "restored file "+rmem+": 8388608 -> 212992") {
		t.Fatalf("undo: %d\n%s%s", code, out, errs)
	}
	if b, _ := os.ReadFile(rmem); string(b) != "212992\n" {
		t.Errorf("rmem_max after undo: %q", b)
	}
}

// -napi-listen waits for one datagram; loopback has no NAPI, so the id is
// 0 and the check warns that busy polling would do nothing.
func TestTuneCheckNapiListen(t *testing.T) {
	l, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.LocalAddr().String()
	l.Close() // free the port for cast tune to bind
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		c, err := net.Dial("udp", addr)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				c.Write([]byte("napi?"))
			}
		}
	}()
	code, out, errs := runTuneCmd(t, append([]string{"check", "-json", "-napi-listen", addr, "-napi-wait", "5s"}, fixtureRoots("../../tune/testdata/good")...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rs []tune.Result
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.ID == "nic.napi_id" && (r.Severity != tune.Warn || r.Found != "0") {
			t.Errorf("nic.napi_id on loopback: %+v", r)
		}
	}
}
