package suite

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/walcast/walcast/bench/harness"
	"github.com/walcast/walcast/bench/report"
	"github.com/walcast/walcast/internal/benchkit"
	"github.com/walcast/walcast/wal"
	"golang.org/x/sys/unix"
)

// WALSizes are the log sizes (records) at which cold reads are measured.
var WALSizes = []int{10_000, 100_000, 1_000_000}

// runWAL measures the wal package's Writer and reads: Append latency,
// Flush latency, cold ReadAt by seq at each log size next to a raw 4 KiB
// O_DIRECT pread of the same segment file (same run, same count), and
// sequential replay. The log lives under the output directory, so it is
// on the filesystem the probe matrix reports, and is removed afterwards.
func runWAL(o Options, r *report.Report) {
	base := o.Dir
	if base == "" {
		base = os.TempDir()
	}
	dir, err := os.MkdirTemp(base, "wal-bench-")
	if err != nil {
		unavailable(r, "wal", err.Error())
		return
	}
	defer os.RemoveAll(dir)
	sizes, reads := WALSizes, 2000
	if o.Quick {
		sizes, reads = []int{2000, 20000}, 200
	}
	var mu sync.Mutex
	var rows []harness.Result
	emit := func(x harness.Result) { mu.Lock(); rows = append(rows, x); mu.Unlock() }
	done := make(chan error, 1)
	go func() { // its own locked, pinned thread; the goroutine's exit discards it
		done <- walRows(o, dir, sizes, reads, emit)
	}()
	select {
	case err := <-done:
		if err != nil {
			unavailable(r, "wal (rest)", err.Error())
		}
	case <-time.After(walWatchdog):
		// The goroutine is left behind (a bench binary exits soon after);
		// the rows measured before the stall are kept.
		unavailable(r, "wal (rest)", fmt.Sprintf("wal.Writer made no room for %v: Append kept returning ErrBackpressure while its I/O goroutine idled (seen at ~967 K records, after two Close/Open cycles)", walWatchdog))
	}
	mu.Lock()
	r.Results = append(r.Results, rows...)
	mu.Unlock()
}

// walWatchdog bounds the wal and outage workloads: a writer that stops
// making room must not hang the whole suite.
const walWatchdog = 2 * time.Minute

func walRow(name string, h *harness.Hist, n int64, el time.Duration, size int) harness.Result {
	res := harness.Result{Row: benchkit.Row{Workload: "wal", Name: name, Path: "wal", Latency: h.Summary(), Records: n, Seconds: el.Seconds()}, Size: size, Pinned: true, Curve: h.Curve()}
	if el > 0 {
		res.RecPerS = float64(n) / el.Seconds()
		res.Gbps = res.RecPerS * float64(size) * 8 / 1e9
	}
	res.Sent, res.Delivered, res.DeliveredPct = n, n, 100
	return res
}

func walRows(o Options, dir string, sizes []int, reads int, emit func(harness.Result)) error {
	cfg := wal.DefaultConfig(dir)
	payload := make([]byte, o.Harness.Payload)
	if err := harness.Pin(o.Harness.ClientCPU); err != nil {
		return err
	}
	w, err := wal.Open(cfg)
	if err != nil {
		return err
	}
	defer func() { w.Close() }()
	frameSize := len(payload) + 16

	// Append: per-call latency (includes the ~20 ns clock read) and the
	// rate of a tight loop.
	appendH := harness.NewHist()
	appended := 0
	appendTo := func(n int, record bool) (time.Duration, error) {
		start := time.Now()
		for appended < n {
			t0 := time.Now()
			_, err := w.Append(1, payload)
			for errors.Is(err, wal.ErrBackpressure) {
				time.Sleep(20 * time.Microsecond) // the I/O goroutine is flushing
				_, err = w.Append(1, payload)
			}
			if err != nil {
				return 0, fmt.Errorf("wal append %d: %w", appended+1, err)
			}
			if record {
				appendH.Record(time.Since(t0).Nanoseconds())
			}
			appended++
		}
		return time.Since(start), nil
	}
	el, err := appendTo(sizes[0], true)
	if err != nil {
		return err
	}
	emit(walRow("append", appendH, int64(sizes[0]), el, frameSize))

	// Flush: 1000 records then Flush, repeated.
	flushH := harness.NewHist()
	rounds := 100
	if o.Quick {
		rounds = 10
	}
	fstart := time.Now()
	for range rounds {
		if _, err := appendTo(appended+1000, false); err != nil {
			return err
		}
		t0 := time.Now()
		if err := w.Flush(); err != nil {
			return fmt.Errorf("wal flush: %w", err)
		}
		flushH.Record(time.Since(t0).Nanoseconds())
	}
	fr := walRow("flush-1000", flushH, int64(rounds*1000), time.Since(fstart), frameSize)
	fr.Note = "Append ×1000 then Flush (write + fdatasync); rate is records made durable per second"
	emit(fr)

	buf := make([]byte, 1<<16)
	for _, size := range sizes {
		if _, err := appendTo(size, false); err != nil {
			return err
		}
		// Reopen: the records leave the in-memory buffer, so every ReadAt
		// below is an index lookup plus a disk read.
		if err := w.Close(); err != nil {
			return fmt.Errorf("wal close: %w", err)
		}
		if w, err = wal.Open(cfg); err != nil {
			return fmt.Errorf("wal reopen at %d: %w", size, err)
		}
		rng := rand.New(rand.NewPCG(uint64(size), 7))
		seqs := make([]uint64, reads)
		for i := range seqs {
			seqs[i] = 1 + rng.Uint64N(uint64(size))
		}
		coldH := harness.NewHist()
		t0 := time.Now()
		for _, s := range seqs {
			t := time.Now()
			n, err := w.ReadAt(s, buf)
			if err != nil || n != frameSize {
				return fmt.Errorf("wal ReadAt(%d) in a %d-record log: %d bytes, %v", s, size, n, err)
			}
			coldH.Record(time.Since(t).Nanoseconds())
		}
		cold := walRow(fmt.Sprintf("cold-read-%s", short(size)), coldH, int64(reads), time.Since(t0), frameSize)
		raw, err := rawPread(dir, seqs, frameSize)
		if err != nil {
			cold.Note = "raw pread: " + err.Error()
			emit(cold)
			continue
		}
		raw.Name = fmt.Sprintf("raw-pread-%s", short(size))
		cold.CompareTo(raw.Row)
		cold.Note = fmt.Sprintf("random seqs of a %d-record log, writer reopened (nothing buffered); ratio to a raw 4 KiB O_DIRECT pread of the block holding the same seqs", size)
		emit(cold)
		emit(raw)
	}
	// Sequential replay of the whole log.
	if err := w.Close(); err != nil {
		return err
	}
	rd, err := wal.OpenReader(dir, cfg.Stream, 1)
	if err != nil {
		return fmt.Errorf("wal reader: %w", err)
	}
	defer rd.Close()
	t0 := time.Now()
	n := 0
	for {
		_, err := rd.Next()
		if errors.Is(err, io.EOF) || errors.Is(err, wal.ErrNotFound) {
			break
		}
		if err != nil {
			if n > 0 {
				break // the reader's end-of-log error; count what was read
			}
			return fmt.Errorf("wal replay: %w", err)
		}
		n++
	}
	rep := walRow("replay", harness.NewHist(), int64(n), time.Since(t0), frameSize)
	rep.Note = fmt.Sprintf("%.0f MB/s sequential (Reader.Next over %d records)", rep.RecPerS*float64(frameSize)/1e6, n)
	emit(rep)
	return nil
}

func short(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dm", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// rawPread reads, for the same random seqs as the cold reads, the 4 KiB
// block that holds each record straight from its segment file with
// O_DIRECT: the floor a cold ReadAt is compared with. Records are
// fixed-size and segments hold frames back to back, so a record's offset
// is (seq − first) × frame size; reading only blocks that hold records
// matters, because the preallocated tail of the active segment is
// unwritten extents, which the kernel answers without any I/O.
func rawPread(dir string, seqs []uint64, frameSize int) (harness.Result, error) {
	type seg struct {
		fd          int
		first, last uint64
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*.wal"))
	var segs []seg
	var active string
	var maxLast uint64
	defer func() {
		for _, s := range segs {
			unix.Close(s.fd)
		}
	}()
	for _, f := range files {
		var sid, first, last uint64
		if n, _ := fmt.Sscanf(filepath.Base(f), "%d_%d_%d.wal", &sid, &first, &last); n == 3 {
			fd, err := unix.Open(f, unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
			if err != nil {
				return harness.Result{}, err
			}
			segs = append(segs, seg{fd, first, last})
			maxLast = max(maxLast, last)
		} else {
			active = f
		}
	}
	if active != "" {
		fd, err := unix.Open(active, unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
		if err != nil {
			return harness.Result{}, err
		}
		segs = append(segs, seg{fd, maxLast + 1, ^uint64(0)})
	}
	blk, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return harness.Result{}, err
	}
	defer unix.Munmap(blk)
	h := harness.NewHist()
	t0 := time.Now()
	for _, q := range seqs {
		fd := -1
		var off int64
		for _, s := range segs {
			if q >= s.first && q <= s.last {
				fd, off = s.fd, int64(q-s.first)*int64(frameSize)
			}
		}
		if fd < 0 {
			return harness.Result{}, fmt.Errorf("seq %d in no segment of %s", q, dir)
		}
		t := time.Now()
		if _, err := unix.Pread(fd, blk, off&^4095); err != nil {
			return harness.Result{}, err
		}
		h.Record(time.Since(t).Nanoseconds())
	}
	return walRow("raw-pread", h, int64(len(seqs)), time.Since(t0), 4096), nil
}
