package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/walcast/walcast/internal/benchkit"
	"github.com/walcast/walcast/wal"
	"github.com/walcast/walcast/wire"
)

func init() {
	registerBench("wal", "WAL: append ns, flush latency, sustained MB/s, cold ReadAt at 10K/100K/1M vs raw O_DIRECT pread, replay MB/s", benchWAL)
}

type walBenchConfig struct {
	dir     string
	payload int
	sizes   []int
	reads   int
	batches int
	flushes int
	records int // sustained write and replay
}

func benchWAL(args []string) error {
	fs := newFlagSet("bench wal", "[flags]", "Measures the WAL on the filesystem of -dir, each figure next to its floor from the\nsame run: Append against copy+CRC of the same frame, Flush against a raw O_DIRECT\nwrite + fdatasync of the same bytes, cold ReadAt against a raw 4 KiB O_DIRECT pread\nof the same files (samples interleaved), sustained writes against raw 1 MiB\nO_DIRECT writes + fdatasync, replay against a raw sequential read.\nRun it under the bench lock: flock /tmp/walcast-bench.lock cast bench wal")
	c := walBenchConfig{}
	fs.StringVar(&c.dir, "dir", os.TempDir(), "directory on the filesystem to measure (a temporary subdirectory is used and removed)")
	fs.IntVar(&c.payload, "payload", 128, "payload bytes per record (frame = 16 + payload)")
	sizes := fs.String("sizes", "10000,100000,1000000", "log sizes in records for the cold-read rows")
	fs.IntVar(&c.reads, "reads", 3000, "cold reads per log size (and as many raw preads, interleaved)")
	fs.IntVar(&c.batches, "batches", 2000, "append samples, 1000 appends each")
	fs.IntVar(&c.flushes, "flushes", 500, "flush samples (100 appends + Flush each)")
	fs.IntVar(&c.records, "records", 1_000_000, "records for the sustained-write and replay rows")
	jsonOut := fs.Bool("json", false, "print one JSON row per line instead of tables")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return usagef("-sizes: %q is not a positive count", s)
		}
		c.sizes = append(c.sizes, n)
	}
	if err := checkRange("payload", c.payload, 8, wire.MaxPayload); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(c.dir, "cast-bench-wal-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	c.dir = tmp
	ctx, cancel := signalContext()
	defer cancel()
	host, _ := os.Hostname()
	title := fmt.Sprintf("wal: %d-byte frames on %s, %s, host %s, load %s", wire.HeaderSize+c.payload, c.dir, time.Now().UTC().Format(time.RFC3339), host, benchkit.LoadAvg())
	var latHeaded, tputHeaded bool
	rs := newRowStreamFunc("bench wal", title, 5, *jsonOut, func(out io.Writer, r benchkit.Row) {
		fn := r.Floor
		if r.Note != "" {
			fn = strings.TrimSpace(fn + "  " + r.Note)
		}
		if r.Latency.N > 0 {
			if !latHeaded {
				fmt.Fprintf(out, "%-24s %10s %10s %10s %10s %10s %7s %7s  %s\n", "latency", "p50 µs", "p99 µs", "p99.9 µs", "max µs", "stddev", "×p50", "×p99", "floor / note")
				latHeaded = true
			}
			l := r.Latency
			fmt.Fprintf(out, "%-24s %10.3f %10.3f %10.3f %10.3f %10.3f %7s %7s  %s\n", r.Name, us(l.P50), us(l.P99), us(l.P999), us(l.Max), l.StdDev/1e3,
				ratio(r.RatioP50), ratio(r.RatioP99), fn)
			return
		}
		if !tputHeaded {
			fmt.Fprintf(out, "\n%-24s %12s %10s %8s  %s\n", "throughput", "records/s", "MB/s", "×floor", "floor / note")
			tputHeaded = true
		}
		mbs := r.RecPerS * float64(wire.HeaderSize+c.payload) / 1e6
		fmt.Fprintf(out, "%-24s %12.0f %10.1f %8s  %s\n", r.Name, r.RecPerS, mbs, ratio(r.RatioTput), fn)
	})
	note := ""
	steps := []struct {
		name string
		run  func() ([]benchkit.Row, error)
	}{
		{"append", func() ([]benchkit.Row, error) { return walAppendRows(c) }},
		{"flush", func() ([]benchkit.Row, error) { r, n, err := walFlushRows(c); note = n; return r, err }},
		{"cold reads", func() ([]benchkit.Row, error) { return walColdReadRows(c) }},
		{"sustained writes", func() ([]benchkit.Row, error) { return walSustainedRows(c) }},
		{"replay", func() ([]benchkit.Row, error) { return walReplayRows(c) }},
	}
	rows, err := rs.run(ctx, func() error {
		for i, st := range steps {
			rs.nextStep(i+1, st.name)
			r, err := st.run()
			for _, x := range r {
				rs.add(x)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", st.name, err)
			}
		}
		return nil
	})
	if !*jsonOut && len(rows) > 0 {
		if note != "" {
			fmt.Fprintf(os.Stdout, "\nflush: %s\n", note)
		}
		fmt.Fprintf(os.Stdout, "load at the end %s\n", benchkit.LoadAvg())
	}
	return err
}

func walRow(name string, s *benchkit.Samples) benchkit.Row {
	return benchkit.Row{Workload: "wal", Name: name, Path: "disk", Latency: s.Summarize(), Records: int64(s.Len())}
}

func walOpen(c walBenchConfig, sub string, mod func(*wal.Config)) (*wal.Writer, wal.Config, error) {
	cfg := wal.DefaultConfig(c.dir + "/" + sub)
	cfg.Stream = 1
	cfg.BufferSize = 64 << 20
	if mod != nil {
		mod(&cfg)
	}
	w, err := wal.Open(cfg)
	return w, cfg, err
}

func appendRetry(w *wal.Writer, p []byte) error {
	for {
		_, err := w.Append(100, p)
		if err == nil || !errors.Is(err, wal.ErrBackpressure) {
			return err
		}
	}
}

// walAppendRows: ns per Append over batches of 1000 (a single Append is
// too short to time alone), against copying and sealing the same frame
// into a local buffer (the work Append cannot avoid).
func walAppendRows(c walBenchConfig) ([]benchkit.Row, error) {
	w, _, err := walOpen(c, "append", func(cfg *wal.Config) { cfg.MaxFlushLag = time.Hour; cfg.BufferSize = 8 << 20 })
	if err != nil {
		return nil, err
	}
	defer w.Close()
	p := make([]byte, c.payload)
	for i := 0; i < 50_000; i++ {
		if err := appendRetry(w, p); err != nil {
			return nil, err
		}
	}
	w.Flush()
	ours, floor := benchkit.NewSamples(c.batches), benchkit.NewSamples(c.batches)
	frame := make([]byte, wire.HeaderSize+c.payload)
	var seq uint64
	for b := 0; b < c.batches; b++ {
		if b%20 == 19 {
			if err := w.Flush(); err != nil {
				return nil, err
			}
		}
		t0 := time.Now()
		for i := 0; i < 1000; i++ {
			if err := appendRetry(w, p); err != nil {
				return nil, err
			}
		}
		ours.Record(int64(time.Since(t0)) / 1000)
		t0 = time.Now()
		for i := 0; i < 1000; i++ {
			copy(frame[wire.HeaderSize:], p)
			seq++
			binary.LittleEndian.PutUint64(frame[wire.HeaderSize:], seq)
			wire.Seal(frame, 100)
		}
		floor.Record(int64(time.Since(t0)) / 1000)
	}
	f := walRow("append", ours)
	fl := walRow("copy+seal (floor)", floor)
	f.CompareTo(fl)
	f.Note = fmt.Sprintf("per record, batches of 1000; backpressure %d", w.Stats().Backpressure)
	return []benchkit.Row{fl, f}, nil
}

// walFlushRows: 100 appends then Flush (time until durable) against a raw
// O_DIRECT write of the same bytes (block-rounded) + fdatasync.
func walFlushRows(c walBenchConfig) ([]benchkit.Row, string, error) {
	w, _, err := walOpen(c, "flush", func(cfg *wal.Config) {
		cfg.FlushInterval = time.Hour
		cfg.FlushRecords = 1 << 30
		cfg.FlushBytes = 1 << 30
	})
	if err != nil {
		return nil, "", err
	}
	defer w.Close()
	st := w.Stats()
	note := "buffered+fdatasync: " + st.DirectNote
	if st.Direct {
		note = "O_DIRECT, " + st.DirectNote
	}
	raw, err := newRawFile(c.dir+"/raw-flush", 64<<20)
	if err != nil {
		return nil, note, err
	}
	defer raw.close()
	p := make([]byte, c.payload)
	ours, floor := benchkit.NewSamples(c.flushes), benchkit.NewSamples(c.flushes)
	bytes := 100 * (wire.HeaderSize + c.payload)
	var off int64
	for i := 0; i < c.flushes; i++ {
		for j := 0; j < 100; j++ {
			if err := appendRetry(w, p); err != nil {
				return nil, note, err
			}
		}
		t0 := time.Now()
		if err := w.Flush(); err != nil {
			return nil, note, err
		}
		ours.Record(int64(time.Since(t0)))
		t0 = time.Now()
		n, err := raw.writeSync(off, bytes)
		if err != nil {
			return nil, note, err
		}
		floor.Record(int64(time.Since(t0)))
		off = (off + int64(n)) % (60 << 20)
	}
	f := walRow("flush-100", ours)
	fl := walRow("raw-write+fdatasync", floor)
	f.CompareTo(fl)
	f.Note = "time for 100 appended records to become durable"
	return []benchkit.Row{fl, f}, note, nil
}

// walFill appends n records of payload p to w and flushes them; on error
// it closes w.
func walFill(w *wal.Writer, n int, p []byte) error {
	for i := 0; i < n; i++ {
		if _, err := w.Append(100, p); err != nil {
			w.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		w.Close()
		return err
	}
	return nil
}

// walColdReadRows grows one log through the sizes and, at each, times
// ReadAt of random seqs interleaved with raw 4 KiB O_DIRECT preads at
// random aligned offsets of the same segment files.
func walColdReadRows(c walBenchConfig) ([]benchkit.Row, error) {
	var rows []benchkit.Row
	p := make([]byte, c.payload)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	buf := make([]byte, 1<<17)
	have := 0
	var first benchkit.Row
	for _, n := range c.sizes {
		w, cfg, err := walOpen(c, "cold", func(cfg *wal.Config) { cfg.BlockOnBackpressure = true })
		if err != nil {
			return nil, err
		}
		if err := walFill(w, n-have, p); err != nil {
			return nil, err
		}
		have = max(have, n)
		raw, err := openRawSegments(wal.StreamDir(cfg.Dir, cfg.Stream), cfg.Stream, uint64(n), int64(wire.HeaderSize+c.payload))
		if err != nil {
			w.Close()
			return nil, err
		}
		ours, floor := benchkit.NewSamples(c.reads), benchkit.NewSamples(c.reads)
		for i := 0; i < c.reads; i++ {
			seq := 1 + rng.Uint64N(uint64(n))
			t0 := time.Now()
			if _, err := w.ReadAt(seq, buf); err != nil {
				raw.close()
				w.Close()
				return nil, fmt.Errorf("ReadAt(%d): %w", seq, err)
			}
			ours.Record(int64(time.Since(t0)))
			t0 = time.Now()
			if err := raw.readRandom(rng); err != nil {
				raw.close()
				w.Close()
				return nil, err
			}
			floor.Record(int64(time.Since(t0)))
		}
		raw.close()
		st := w.Stats()
		w.Close()
		label := shortCount(n)
		f := walRow("readat@"+label, ours)
		fl := walRow("raw-pread-4k@"+label, floor)
		f.CompareTo(fl)
		if first.Latency.N == 0 {
			first = f
		} else {
			f.Note = fmt.Sprintf("p50 %.2f× readat@%s", benchkit.Ratio(float64(f.Latency.P50), float64(first.Latency.P50)), shortCount(c.sizes[0]))
		}
		if !st.Direct {
			f.Note = strings.TrimSpace(f.Note + " (buffered: O_DIRECT off)")
		}
		rows = append(rows, fl, f)
	}
	return rows, nil
}

func shortCount(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dK", n/1000)
	}
	return strconv.Itoa(n)
}

// walSustainedRows appends c.records as fast as the disk takes them
// (default flush policy) against raw 1 MiB O_DIRECT writes + fdatasync of
// the same byte count.
func walSustainedRows(c walBenchConfig) ([]benchkit.Row, error) {
	w, _, err := walOpen(c, "sustained", func(cfg *wal.Config) { cfg.BlockOnBackpressure = true })
	if err != nil {
		return nil, err
	}
	p := make([]byte, c.payload)
	t0 := time.Now()
	if err := walFill(w, c.records, p); err != nil {
		return nil, err
	}
	el := time.Since(t0).Seconds()
	st := w.Stats()
	w.Close()
	total := int64(c.records) * int64(wire.HeaderSize+c.payload)
	raw, err := newRawFile(c.dir+"/raw-seq", total+1<<20)
	if err != nil {
		return nil, err
	}
	t0 = time.Now()
	for off := int64(0); off < total; {
		n, err := raw.writeSync(off, int(min(1<<20, total-off)))
		if err != nil {
			raw.close()
			return nil, err
		}
		off += int64(n)
	}
	rel := time.Since(t0).Seconds()
	raw.close()
	os.Remove(c.dir + "/raw-seq")
	fl := benchkit.Row{Workload: "wal", Name: "raw-write-1MiB+sync", Path: "disk", Records: int64(c.records), Seconds: rel, RecPerS: float64(c.records) / rel}
	f := benchkit.Row{Workload: "wal", Name: "sustained-append", Path: "disk", Records: int64(c.records), Seconds: el, RecPerS: float64(c.records) / el,
		Note: fmt.Sprintf("flush p50 %v p99 %v, %d flushes, backpressure %d", st.FlushP50.Round(time.Microsecond), st.FlushP99.Round(time.Microsecond), st.Flushes, st.Backpressure)}
	f.CompareTo(fl)
	return []benchkit.Row{fl, f}, nil
}

// walReplayRows reads the sustained log from seq 1 with a Reader, cold
// (page cache dropped, when root) and warm, against a raw sequential read
// of the same files in 1 MiB chunks.
func walReplayRows(c walBenchConfig) ([]benchkit.Row, error) {
	root := c.dir + "/sustained"
	files, err := wal.ListSegments(wal.StreamDir(root, 1), 1)
	if err != nil {
		return nil, err
	}
	var rows []benchkit.Row
	for _, phase := range []string{"cold", "warm"} {
		if phase == "cold" && !dropCaches() {
			continue
		}
		t0 := time.Now()
		var rawBytes, sealed int64
		buf := make([]byte, 1<<20)
		for _, sf := range files {
			f, err := os.Open(sf.Path)
			if err != nil {
				return nil, err
			}
			// Only the records: the active file's preallocated tail would
			// read as free zeros.
			limit := int64(1) << 62
			if sf.Active {
				limit = (int64(c.records) - sealed) * int64(wire.HeaderSize+c.payload)
			} else {
				sealed += int64(sf.Last - sf.First + 1)
			}
			for read := int64(0); read < limit; {
				n, err := f.Read(buf[:min(int64(len(buf)), limit-read)])
				read += int64(n)
				rawBytes += int64(n)
				if err == io.EOF {
					break
				}
				if err != nil {
					f.Close()
					return nil, err
				}
			}
			f.Close()
		}
		rel := time.Since(t0).Seconds()
		if phase == "cold" {
			dropCaches()
		}
		r, err := wal.OpenReader(root, 1, 1)
		if err != nil {
			return nil, err
		}
		t0 = time.Now()
		n := 0
		for {
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				r.Close()
				return nil, err
			}
			n++
		}
		el := time.Since(t0).Seconds()
		r.Close()
		rawRecs := float64(rawBytes) / rel / float64(wire.HeaderSize+c.payload)
		fl := benchkit.Row{Workload: "wal", Name: "raw-read-1MiB-" + phase, Path: "disk", Records: int64(n), Seconds: rel, RecPerS: rawRecs,
			Note: "the same bytes, no decoding"}
		f := benchkit.Row{Workload: "wal", Name: "replay-" + phase, Path: "disk", Records: int64(n), Seconds: el, RecPerS: float64(n) / el}
		f.CompareTo(fl)
		rows = append(rows, fl, f)
	}
	return rows, nil
}
