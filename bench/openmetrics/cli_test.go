package openmetrics

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/walcast/walcast/internal/childproc"
)

// proc is a running cast command.
type proc struct {
	cmd      *exec.Cmd
	out, err childproc.Buffer
	done     chan struct{}
}

// buildCast builds the cast command into a temporary directory.
func buildCast(t *testing.T) string {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool in PATH to build cast")
	}
	bin := filepath.Join(t.TempDir(), "cast")
	cmd := exec.Command(goTool, "build", "-o", bin, "github.com/walcast/walcast/cmd/cast")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func start(t *testing.T, bin string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.err
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.cmd.Process.Kill(); <-p.done })
	return p
}

// wait waits for the process to exit (failing the test past 2 min) and
// returns its exit code.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("%v hangs:\n%s%s", p.cmd.Args, p.out.String(), p.err.String())
	}
	return p.cmd.ProcessState.ExitCode()
}

// find waits for re in the process's stdout or stderr and returns its
// first group.
func (p *proc) find(t *testing.T, re string) string {
	t.Helper()
	r := regexp.MustCompile(re)
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, s := range []string{p.out.String(), p.err.String()} {
			if m := r.FindStringSubmatch(s); m != nil {
				return m[1]
			}
		}
	}
	t.Fatalf("no /%s/ from %v:\n%s%s", re, p.cmd.Args, p.out.String(), p.err.String())
	return ""
}

// sample is one metric's value as last scraped, and its largest change
// between two scrapes.
type sample struct {
	last, step float64
	seen       bool
}

// TestCLIMetricsCrossProcess: `cast send -wal` → `cast recv -drop 1` as
// processes, `cast stat -serve` and `cast stat -json -watch` beside them
// in the same run; /metrics, scraped over HTTP every 50 ms and parsed with
// Prometheus's own text parser, and the JSON views end on each side's
// final summary: NAKs, retransmits from the ring and the WAL, records
// sent, delivered seq, and (both ends keyed) the datagrams each sealed
// and opened (both commands hold their final values with -hold, so the
// last scrape and refresh see them: within one refresh, exactly); no
// datagram was refused, for any reason.
func TestCLIMetricsCrossProcess(t *testing.T) {
	bin := buildCast(t)
	dir := t.TempDir()
	env := []string{"WALCAST_COUNTERS=" + dir}
	key := filepath.Join(t.TempDir(), "stream.key")
	if err := os.WriteFile(key, []byte("5 00112233445566778899aabbccddeeff\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const n = 30000
	r := start(t, bin, env, "recv", "-listen", "127.0.0.1:0", "-n", strconv.Itoa(n), "-drop", "1", "-idle", "park", "-hold", "3s", "-key-file", key)
	addr := r.find(t, `listening on 127\.0\.0\.1:(\d+)`)
	srv := start(t, bin, env, "stat", "-serve", "127.0.0.1:0", "-dir", dir)
	url := "http://" + srv.find(t, `at http://(\S+)/metrics`) + "/metrics"
	js := start(t, bin, env, "stat", "-json", "-watch", "-interval", "50ms", "-dir", dir)

	// The scraper: every metric by its labels (pid included), as last seen.
	var mu sync.Mutex
	seen := map[string]*sample{}
	stop := make(chan struct{})
	scraped := make(chan int)
	go func() {
		scrapes := 0
		defer func() { scraped <- scrapes }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			resp, err := http.Get(url)
			if err != nil {
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			parser := expfmt.NewTextParser(model.LegacyValidation)
			fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
			if err != nil {
				t.Errorf("scrape %d: %v\n%s", scrapes, err, body)
				return
			}
			scrapes++
			mu.Lock()
			for name, f := range fams {
				for _, m := range f.Metric {
					key := name
					for _, l := range m.Label {
						key += "," + l.GetName() + "=" + l.GetValue()
					}
					v := m.GetGauge().GetValue()
					if m.Counter != nil {
						v = m.Counter.GetValue()
					}
					s := seen[key]
					if s == nil {
						s = &sample{}
						seen[key] = s
					}
					if s.seen && v-s.last > s.step {
						s.step = v - s.last
					}
					s.last, s.seen = v, true
				}
			}
			mu.Unlock()
		}
	}()

	s := start(t, bin, env, "send", "-to", "127.0.0.1:"+addr, "-bind", "127.0.0.1:0", "-n", strconv.Itoa(n), "-rate", "20000",
		"-wal", filepath.Join(t.TempDir(), "wal"), "-idle", "park", "-hold", "3s", "-key-file", key)
	if code := s.wait(t); code != 0 {
		t.Fatalf("send exit %d\n%s%s", code, s.out.String(), s.err.String())
	}
	if code := r.wait(t); code != 0 {
		t.Fatalf("recv exit %d\n%s%s", code, r.out.String(), r.err.String())
	}
	close(stop)
	if k := <-scraped; k < 10 {
		t.Fatalf("%d scrapes", k)
	}
	js.cmd.Process.Signal(syscall.SIGINT)
	js.wait(t)
	srv.cmd.Process.Signal(syscall.SIGINT)
	srv.wait(t)

	sum := regexp.MustCompile(`naks (\d+), retransmits \d+ \(hot ring (\d+), WAL (\d+)\)`).FindStringSubmatch(s.out.String())
	gaps := regexp.MustCompile(`gaps NAKed (\d+)`).FindStringSubmatch(r.out.String())
	authRe := regexp.MustCompile(`(?m)^authentication: (\d+) datagrams sealed, (\d+) opened, (\d+) refused`)
	sAuth, rAuth := authRe.FindStringSubmatch(s.out.String()), authRe.FindStringSubmatch(r.out.String())
	if sum == nil || gaps == nil || sAuth == nil || rAuth == nil {
		t.Fatalf("summaries:\n%s\n%s", s.out.String(), r.out.String())
	}
	spid, rpid := strconv.Itoa(s.cmd.Process.Pid), strconv.Itoa(r.cmd.Process.Pid)
	views := lastViews(t, js.out.String())
	for _, c := range []struct {
		metric, pid, role, label string
		final                    string
	}{
		{"walcast_naks_received_total", spid, "producer", "naks_received", sum[1]},
		{"walcast_retx_hot_total", spid, "producer", "retx_hot", sum[2]},
		{"walcast_retx_cold_total", spid, "producer", "retx_cold", sum[3]},
		{"walcast_records_sent_total", spid, "producer", "records_sent", strconv.Itoa(n)},
		{"walcast_naks_sent_total", rpid, "consumer", "naks_sent", gaps[1]},
		{"walcast_delivered_seq", rpid, "consumer", "delivered_seq", strconv.Itoa(n)},
		{"walcast_auth_sealed_total", spid, "producer", "auth_sealed", sAuth[1]},
		{"walcast_auth_opened_total", spid, "producer", "auth_opened", sAuth[2]},
		{"walcast_auth_sealed_total", rpid, "consumer", "auth_sealed", rAuth[1]},
		{"walcast_auth_opened_total", rpid, "consumer", "auth_opened", rAuth[2]},
	} {
		final, _ := strconv.ParseFloat(c.final, 64)
		key := c.metric + ",pid=" + c.pid + ",role=" + c.role + ",stream=1"
		m := seen[key]
		if m == nil {
			t.Errorf("%s never scraped", key)
		} else if m.last != final {
			t.Errorf("%s: last scraped %v, final summary %v (largest change between two scrapes %v)", key, m.last, final, m.step)
		}
		lab := c.label + `{stream="1",role="` + c.role + `"}`
		if v, ok := views[c.pid][lab]; !ok || strconv.FormatUint(v, 10) != c.final {
			t.Errorf("stat -json: %s of pid %s last %d (listed %v), final summary %s", lab, c.pid, v, ok, c.final)
		}
	}
	if gaps[1] == "0" {
		t.Error("-drop 1 caused no NAK")
	}
	if sAuth[3] != "0" || rAuth[3] != "0" || sAuth[2] == "0" || rAuth[2] == "0" {
		t.Errorf("authentication: send %q, recv %q", sAuth[0], rAuth[0])
	}
	for _, pr := range []struct{ pid, role string }{{spid, "producer"}, {rpid, "consumer"}} {
		for _, reason := range []string{"short", "version", "key_id", "tag", "replay"} {
			key := "walcast_auth_refused_total,pid=" + pr.pid + ",reason=" + reason + ",role=" + pr.role + ",stream=1"
			if m := seen[key]; m == nil || m.last != 0 {
				t.Errorf("%s: %+v, want scraped as 0", key, m)
			}
		}
	}
}

// lastViews is, per pid, the counters of the last `cast stat -json`
// refresh that listed it.
func lastViews(t *testing.T, out string) map[string]map[string]uint64 {
	views := map[string]map[string]uint64{}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var v struct {
			Processes []struct {
				PID      int               `json:"pid"`
				Counters map[string]uint64 `json:"counters"`
			} `json:"processes"`
		}
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("stat -json: %v", err)
		}
		for _, p := range v.Processes {
			views[strconv.Itoa(p.PID)] = p.Counters
		}
	}
	return views
}
