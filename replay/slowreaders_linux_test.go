package replay

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rssBytes is this process's resident set size.
func rssBytes(tb testing.TB) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	tb.Fatal("no VmRSS")
	return 0
}

// BenchmarkSlowReaders measures what 1 000 slow TLS readers cost the
// replay server's process (docs/replay.md): its RSS with them connected (each asked
// for a 20 MB history and reads nothing) and 5 s after they all closed,
// without forcing a GC, over the RSS before. The readers are another
// process. Run it under the bench lock:
//
//	flock /tmp/walcast-bench.lock go test -run '^$' -bench SlowReaders -benchtime 1x -count 3 ./replay/
func BenchmarkSlowReaders(b *testing.B) {
	const n = 1000
	dir := b.TempDir()
	w := openWAL(b, filepath.Join(dir, "wal"), 0)
	appendN(b, w, 20000, 1024)
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	pki := filepath.Join(dir, "pki")
	if err := testPKI(b).Write(pki, false); err != nil {
		b.Fatal(err)
	}
	srv, addr := startServer(b, nil, NewWriterSource(w, filepath.Join(dir, "wal"), 1))
	for i := 0; i < b.N; i++ {
		runtime.GC()
		debug.FreeOSMemory()
		before := rssBytes(b)
		cmd := exec.Command(os.Args[0], "-test.run", "^$")
		cmd.Env = append(os.Environ(), "REPLAY_SLOW_READERS="+addr+","+strconv.Itoa(n)+","+pki)
		stdin, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		line, _ := bufio.NewReader(out).ReadString('\n')
		if strings.TrimSpace(line) != "ready" {
			b.Fatalf("slow readers: %q", line)
		}
		for end := time.Now().Add(2 * time.Minute); srv.Stats().Active < n && time.Now().Before(end); {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(2 * time.Second) // every connection has filled what it can
		st := srv.Stats()
		held := rssBytes(b)
		stdin.Close()
		cmd.Wait()
		for end := time.Now().Add(2 * time.Minute); srv.Stats().Active > 0 && time.Now().Before(end); {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(5 * time.Second)
		after := rssBytes(b)
		b.ReportMetric(float64(st.Active), "conns")
		b.ReportMetric(float64(held-before)/float64(st.Active)/1024, "rss-KiB/conn")
		b.ReportMetric(float64(held-before)/(1<<20), "rss-MiB-held")
		b.ReportMetric(float64(after-before)/(1<<20), "rss-MiB-after-close")
		b.ReportMetric(float64(srv.Stats().BufferBytes), "buffer-bytes-after-close")
	}
}
