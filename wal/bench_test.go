package wal

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/walcast/walcast/wal/internal/unix"
	"github.com/walcast/walcast/wire"
)

// Benchmarks. Run under the machine's bench lock:
//
//	flock /tmp/walcast-bench.lock go test -run '^$' -bench . -benchmem ./wal
//
// Records are 128-byte payloads (144-byte frames), the reference's
// hottest record size.

func benchConfig(dir string) Config {
	c := DefaultConfig(dir)
	c.Stream = 1
	c.BufferSize = 64 << 20
	return c
}

func appendSpin(w *Writer, p []byte) {
	for {
		if _, err := w.Append(100, p); err == nil {
			return
		} else if !errors.Is(err, ErrBackpressure) {
			panic(err)
		}
	}
}

// BenchmarkAppend is the hot-path cost: copy, seq stamp, header, CRC, into
// the buffer. Every 20 K appends the timer stops while the log is
// flushed, so the disk's bandwidth does not become the figure (see
// BenchmarkSustained for that).
func BenchmarkAppend(b *testing.B) {
	c := benchConfig(b.TempDir())
	c.MaxFlushLag = time.Hour // measure the copy, not the disk's lag
	c.BufferSize = 8 << 20    // stays in cache: the hot path, not DRAM streaming
	w, err := Open(c)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	p := make([]byte, 128)
	for i := 0; i < 100_000; i++ { // fault the ring's pages in
		appendSpin(w, p)
	}
	w.Flush()
	bp0 := w.Stats().Backpressure
	b.SetBytes(wire.HeaderSize + 128)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%20_000 == 19_999 {
			b.StopTimer()
			w.Flush()
			b.StartTimer()
		}
		appendSpin(w, p)
	}
	b.StopTimer()
	b.ReportMetric(float64(w.Stats().Backpressure-bp0)/float64(b.N), "bp/op")
}

// BenchmarkSustained appends as fast as the disk takes them (O_DIRECT,
// fdatasync per flush): the throughput figure.
func BenchmarkSustained(b *testing.B) {
	w, err := Open(benchConfig(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	p := make([]byte, 128)
	b.SetBytes(wire.HeaderSize + 128)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		appendSpin(w, p)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkFlush: append k records, then Flush (write + fdatasync);
// ns/op is the time until all k are durable.
func BenchmarkFlush(b *testing.B) {
	for _, k := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("records=%d", k), func(b *testing.B) {
			c := benchConfig(b.TempDir())
			c.FlushInterval = time.Hour
			c.FlushRecords = 1 << 30
			c.FlushBytes = 1 << 30
			w, err := Open(c)
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			p := make([]byte, 128)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for j := 0; j < k; j++ {
					appendSpin(w, p)
				}
				if err := w.Flush(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			st := w.Stats()
			b.ReportMetric(float64(st.FlushP50.Nanoseconds()), "flushP50-ns")
			b.ReportMetric(float64(st.FlushP99.Nanoseconds()), "flushP99-ns")
			b.ReportMetric(map[bool]float64{true: 1}[st.Direct], "odirect")
		})
	}
}

// buildLog writes n 144-byte records and returns the closed log's root.
func buildLog(b *testing.B, n int) string {
	dir := b.TempDir()
	c := benchConfig(dir)
	c.BlockOnBackpressure = true
	w, err := Open(c)
	if err != nil {
		b.Fatal(err)
	}
	p := make([]byte, 128)
	for i := 0; i < n; i++ {
		if _, err := w.Append(100, p); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return dir
}

// BenchmarkColdRead compares, on the same log in the same run, ReadAt of a
// random seq (index lookup + one aligned O_DIRECT read + CRC) with a raw
// 4 KiB O_DIRECT pread at a random aligned offset inside the records of the
// same files. Each iteration does one of each, interleaved, so both see
// the same device and cache state; ns/op is their sum, the metrics split
// it.
func BenchmarkColdRead(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			dir := buildLog(b, n)
			w, err := Open(benchConfig(dir))
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			files, _ := ListSegments(StreamDir(dir, 1), 1)
			var fds []int
			var sizes []int64
			var sealed uint64
			for _, f := range files {
				fd, err := openDirect(f.Path, unix.O_RDONLY)
				if err != nil {
					b.Skipf("O_DIRECT: %v", err)
				}
				defer unix.Close(fd)
				size := int64(uint64(n)-sealed) * 144 // the active file: only its records
				if !f.Active {
					var st unix.Stat_t
					unix.Fstat(fd, &st)
					size = st.Size
					sealed += f.Last - f.First + 1
				}
				fds = append(fds, fd)
				sizes = append(sizes, max(size, pageSize))
			}
			rng := rand.New(rand.NewPCG(1, 2))
			buf := make([]byte, 1<<16)
			blk := alignedBuf(pageSize, pageSize)
			var ours, raw time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				seq := 1 + rng.Uint64N(uint64(n))
				t0 := time.Now()
				if _, err := w.ReadAt(seq, buf); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				j := rng.IntN(len(fds))
				if _, err := unix.Pread(fds[j], blk, alignDown(rng.Int64N(sizes[j]), pageSize)); err != nil {
					b.Fatal(err)
				}
				raw += time.Since(t1)
				ours += t1.Sub(t0)
			}
			b.ReportMetric(float64(ours.Nanoseconds())/float64(b.N), "readat-ns")
			b.ReportMetric(float64(raw.Nanoseconds())/float64(b.N), "pread4k-ns")
			b.ReportMetric(float64(ours)/float64(raw), "ratio")
		})
	}
}

// BenchmarkReplay reads a 100 K-record log from seq 1 with a Reader.
func BenchmarkReplay(b *testing.B) {
	const n = 100_000
	dir := buildLog(b, n)
	b.SetBytes(n * 144)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := OpenReader(dir, 1, 1)
		if err != nil {
			b.Fatal(err)
		}
		k := 0
		for {
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			k++
		}
		r.Close()
		if k != n {
			b.Fatalf("replayed %d of %d", k, n)
		}
	}
}

// TestLargeMillion appends 1 M records, reopens, reads a sample back by
// seq and replays all of them.
func TestLargeMillion(t *testing.T) {
	const n = 1_000_000
	c := DefaultConfig(t.TempDir())
	c.BlockOnBackpressure = true
	w, err := Open(c)
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 128)
	for i := 0; i < n; i++ {
		if _, err := w.Append(100, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w, err = Open(c)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.NextSeq() != n+1 {
		t.Fatalf("NextSeq %d", w.NextSeq())
	}
	rng := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, 1<<16)
	for i := 0; i < 10000; i++ {
		seq := 1 + rng.Uint64N(n)
		k, err := w.ReadAt(seq, buf)
		if err != nil || k != 144 || wire.Seq(buf[wire.HeaderSize:]) != seq {
			t.Fatalf("ReadAt(%d): %d %v", seq, k, err)
		}
	}
	r, err := OpenReader(c.Dir, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for seq := uint64(1); seq <= n; seq++ {
		fr, err := r.Next()
		if err != nil || wire.Seq(fr[wire.HeaderSize:]) != seq {
			t.Fatalf("replay at %d: %v", seq, err)
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the end: %v", err)
	}
	rep, err := Verify(StreamDir(c.Dir, 0), 0)
	if err != nil || rep.Bad != nil || rep.Records != n {
		t.Fatalf("verify: %v %v %d", err, rep.Bad, rep.Records)
	}

}
