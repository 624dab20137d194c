package wal

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/walcast/walcast/wire"
)

// testConfig is a small, fast configuration in a fresh directory.
func testConfig(t testing.TB) Config {
	c := DefaultConfig(t.TempDir())
	c.Stream = 7
	c.SegmentSize = 64 << 10
	c.BufferSize = 1 << 20
	c.FlushInterval = 2 * time.Millisecond
	c.MaxFlushLag = time.Second
	return c
}

func openT(t testing.TB, c Config) *Writer {
	t.Helper()
	w, err := Open(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// payloadFor is the deterministic payload of seq: size bytes (≥ 8), the seq
// in [0:8) (zero here; Append stamps it), then a pattern derived from seq.
func payloadFor(seq uint64, size int) []byte {
	p := make([]byte, size)
	for i := 8; i < size; i++ {
		p[i] = byte(seq*31 + uint64(i))
	}
	return p
}

// sizeFor varies record sizes so frames straddle blocks.
func sizeFor(seq uint64) int { return 8 + int(seq*37%300) }

func appendN(t testing.TB, w *Writer, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		seq := w.NextSeq()
		for {
			_, err := w.Append(100, payloadFor(seq, sizeFor(seq)))
			if err == nil {
				break
			}
			if !errors.Is(err, ErrBackpressure) {
				t.Fatal(err)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// checkRecord verifies that fr is the record appendN wrote for seq, or a
// Skip marker standing for seq; it returns the seq after fr.
func checkRecord(t testing.TB, seq uint64, fr []byte) uint64 {
	t.Helper()
	if h, p, _, err := wire.DecodeFrame(fr); err == nil && h.Type == wire.TypeSkip {
		sk, err := wire.ParseSkip(p)
		if err != nil || sk.From > seq || sk.Seq < seq {
			t.Fatalf("seq %d: Skip %+v (%v)", seq, sk, err)
		}
		return sk.Seq + 1
	}
	checkFrame(t, seq, fr)
	return seq + 1
}

// checkFrame verifies that fr is the record seq appended by appendN.
func checkFrame(t testing.TB, seq uint64, fr []byte) {
	t.Helper()
	h, p, size, err := wire.DecodeFrame(fr)
	if err != nil || size != len(fr) {
		t.Fatalf("seq %d: decode: %v (size %d of %d)", seq, err, size, len(fr))
	}
	want := payloadFor(seq, sizeFor(seq))
	binary.LittleEndian.PutUint64(want, seq)
	if h.Type != 100 || !bytes.Equal(p, want) {
		t.Fatalf("seq %d: got type %d payload %x…, want %x…", seq, h.Type, p[:min(16, len(p))], want[:16])
	}
}

func TestAppendStampsSeqAndFrame(t *testing.T) {
	w := openT(t, testConfig(t))
	if w.NextSeq() != 1 {
		t.Fatalf("NextSeq on empty log = %d", w.NextSeq())
	}
	if o, h := w.Bounds(); o != 0 || h != 0 {
		t.Fatalf("Bounds on empty log = %d, %d", o, h)
	}
	p := make([]byte, 64)
	p[0] = 0xee // the caller's seq bytes are ignored and not modified
	fr, err := w.Append(100, p)
	if err != nil {
		t.Fatal(err)
	}
	if p[0] != 0xee {
		t.Fatal("Append modified the caller's payload")
	}
	// The golden data frame of the spec: type 100, seq 1, 64-byte payload.
	want := mustHex(t, "01006400400000006504c67700000000")
	if !bytes.Equal(fr[:16], want) || wire.Seq(fr[16:]) != 1 {
		t.Fatalf("frame header % x, want % x", fr[:16], want)
	}
	if _, err := w.Append(100, make([]byte, 7)); err != ErrPayloadSize {
		t.Fatalf("7-byte payload: %v", err)
	}
	if o, h := w.Bounds(); o != 1 || h != 1 {
		t.Fatalf("Bounds = %d, %d", o, h)
	}
}

func TestWriteFlushReadReopen(t *testing.T) {
	c := testConfig(t)
	c.FlushInterval = time.Hour // only explicit flushes and size triggers
	c.FlushRecords = 1 << 30
	c.FlushBytes = 1 << 30
	w := openT(t, c)
	appendN(t, w, 50)
	if w.Durable() != 0 {
		t.Fatalf("durable %d before any flush", w.Durable())
	}
	buf := make([]byte, 70000)
	// Not flushed yet: served from the buffer.
	for seq := uint64(1); seq <= 50; seq++ {
		n, err := w.ReadAt(seq, buf)
		if err != nil {
			t.Fatalf("ReadAt(%d) from buffer: %v", seq, err)
		}
		checkFrame(t, seq, buf[:n])
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if w.Durable() != 50 {
		t.Fatalf("durable %d after Flush", w.Durable())
	}
	appendN(t, w, 3000) // crosses several 64 KiB segments
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 3050; seq++ {
		n, err := w.ReadAt(seq, buf)
		if err != nil {
			t.Fatalf("ReadAt(%d): %v", seq, err)
		}
		checkFrame(t, seq, buf[:n])
	}
	if _, err := w.ReadAt(3051, buf); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ReadAt past the end: %v", err)
	}
	if _, err := w.ReadAt(0, buf); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ReadAt(0): %v", err)
	}
	st := w.Stats()
	if st.Rotations == 0 || st.ColdReads == 0 || st.BufferReads == 0 {
		t.Fatalf("stats %+v", st)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w2 := openT(t, c)
	if w2.NextSeq() != 3051 {
		t.Fatalf("NextSeq after reopen = %d, want 3051", w2.NextSeq())
	}
	if o, h := w2.Bounds(); o != 1 || h != 3050 {
		t.Fatalf("Bounds after reopen = %d, %d", o, h)
	}
	for _, seq := range []uint64{1, 2, 777, 3049, 3050} {
		n, err := w2.ReadAt(seq, buf)
		if err != nil {
			t.Fatalf("ReadAt(%d) after reopen: %v", seq, err)
		}
		checkFrame(t, seq, buf[:n])
	}
	appendN(t, w2, 10)
	if err := w2.Flush(); err != nil {
		t.Fatal(err)
	}
	verifyDir(t, c, 3060)
}

// verifyDir reads the whole stream with a Reader from seq 1 and checks every
// record and that sealed names tell the truth.
func verifyDir(t testing.TB, c Config, last uint64) {
	t.Helper()
	r, err := OpenReader(c.Dir, c.Stream, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for seq := uint64(1); seq <= last; {
		fr, err := r.Next()
		if err != nil {
			t.Fatalf("Next at seq %d: %v", seq, err)
		}
		seq = checkRecord(t, seq, fr)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the last record: %v, want io.EOF", err)
	}
	files, err := ListSegments(StreamDir(c.Dir, c.Stream), c.Stream)
	if err != nil {
		t.Fatal(err)
	}
	for _, sf := range files {
		if sf.Active {
			continue
		}
		f, err := os.Open(sf.Path)
		if err != nil {
			t.Fatal(err)
		}
		res := scanSegment(f, 0, sf.First)
		fi, _ := f.Stat()
		f.Close()
		if res.bad != nil || res.first != sf.First || res.last != sf.Last || res.end != fi.Size() {
			t.Fatalf("%s holds %d…%d (%d of %d bytes, %v)", filepath.Base(sf.Path), res.first, res.last, res.end, fi.Size(), res.bad)
		}
	}
}

func TestReaderSeeksAndTails(t *testing.T) {
	c := testConfig(t)
	w := openT(t, c)
	appendN(t, w, 2000)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, from := range []uint64{1, 2, 500, 1234, 1999, 2000} {
		r, err := OpenReader(c.Dir, c.Stream, from)
		if err != nil {
			t.Fatal(err)
		}
		fr, err := r.Next()
		if err != nil {
			t.Fatalf("from %d: %v", from, err)
		}
		checkFrame(t, from, fr)
		r.Close()
	}
	// Tail: a reader at the end sees new records once they are durable.
	r, err := OpenReader(c.Dir, c.Stream, 2001)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("at the end: %v", err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		appendN(t, w, 3000)
		w.Flush()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for seq := uint64(2001); seq <= 5000; {
		fr, err := r.Next()
		if err == io.EOF {
			if _, err := w.WaitDurable(ctx, seq-1); err != nil {
				t.Fatalf("WaitDurable: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("tail at %d: %v", seq, err)
		}
		checkFrame(t, seq, fr)
		seq++
	}
	wg.Wait()
	if _, err := OpenReader(c.Dir, c.Stream, 0); err != nil {
		t.Fatal(err)
	}
}

func TestAppendAllocs(t *testing.T) {
	c := testConfig(t)
	c.BufferSize = 64 << 20
	w := openT(t, c)
	p := make([]byte, 128)
	if n := testing.AllocsPerRun(10000, func() {
		if _, err := w.Append(100, p); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("Append allocates %v per call", n)
	}
}

func TestBackpressureNeverDrops(t *testing.T) {
	c := testConfig(t)
	c.BufferSize = MinBufferSize
	c.FlushInterval = time.Hour
	c.FlushRecords = 1 << 30
	c.FlushBytes = 1 << 30
	w := openT(t, c)
	p := make([]byte, 1000)
	var bp int
	for i := 0; i < 2000; i++ {
		_, err := w.Append(100, p)
		if errors.Is(err, ErrBackpressure) {
			bp++
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if bp == 0 {
		t.Fatal("no backpressure with a full buffer")
	}
	accepted := w.NextSeq() - 1
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if w.Durable() != accepted {
		t.Fatalf("durable %d, accepted %d", w.Durable(), accepted)
	}
	if w.Stats().Backpressure == 0 {
		t.Fatal("backpressure not counted")
	}
	// Blocking mode waits instead.
	w.Close()
	c.BlockOnBackpressure = true
	w2 := openT(t, c)
	for i := 0; i < 2000; i++ {
		if _, err := w2.Append(100, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w2.Flush(); err != nil {
		t.Fatal(err)
	}
	if w2.Durable() != accepted+2000 {
		t.Fatalf("durable %d want %d", w2.Durable(), accepted+2000)
	}
}

func TestWaitDurableWakesAndCloses(t *testing.T) {
	w := openT(t, testConfig(t))
	done := make(chan error, 1)
	go func() {
		_, err := w.WaitDurable(context.Background(), 0)
		done <- err
	}()
	appendN(t, w, 1)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitDurable did not wake on the flush")
	}
	go func() {
		_, err := w.WaitDurable(context.Background(), 100)
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	w.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("WaitDurable after Close: %v", err)
	}
	if _, err := w.Append(100, make([]byte, 8)); err != ErrClosed {
		t.Fatalf("Append after Close: %v", err)
	}
}

func TestSecondWriterIsLockedOut(t *testing.T) {
	c := testConfig(t)
	openT(t, c)
	if _, err := Open(c); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
	}{
		{"no dir", func(c *Config) { c.Dir = "" }},
		{"tiny segment", func(c *Config) { c.SegmentSize = 100 }},
		{"tiny buffer", func(c *Config) { c.BufferSize = 1000 }},
		{"negative interval", func(c *Config) { c.FlushInterval = -1 }},
		{"negative records", func(c *Config) { c.FlushRecords = -1 }},
		{"negative bytes", func(c *Config) { c.FlushBytes = -1 }},
		{"negative lag", func(c *Config) { c.MaxFlushLag = -1 }},
		{"small reservation", func(c *Config) { c.SeqReserve = 10 }},
	} {
		c := DefaultConfig("x")
		tc.mod(&c)
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: Validate = %v for %+v", tc.name, err, c)
		}
	}
	if err := DefaultConfig("x").Validate(); err != nil {
		t.Fatal(err)
	}
	// Zero means default; a negative Retention keeps everything.
	if got := (Config{Dir: "x"}).withDefaults(); got != DefaultConfig("x") {
		t.Fatalf("zero config %+v, want the defaults", got)
	}
	if c := (Config{Dir: "x", Retention: -1}); c.Validate() != nil || c.withDefaults().Retention != 0 {
		t.Fatal("negative retention is not keep-everything")
	}
}

// TestIndexArrayReusedAcrossRotations: after a rotation the new active
// segment takes over the sealed segment's in-memory index array (the
// sealed one now reads its mmapped sidecar), so the I/O goroutine stops
// allocating and faulting in megabytes per segment. The sealed segments
// must still read back exactly, though the array under them was reused.
func TestIndexArrayReusedAcrossRotations(t *testing.T) {
	c := testConfig(t)
	c.BufferSize = MinBufferSize // older records are read from disk
	w := openT(t, c)
	const per, rounds = 200, 40 // 116-byte frames: 565 per 64 KiB segment
	p := make([]byte, 100)
	arrays := map[*byte]bool{}
	rot0 := uint64(0)
	for r := 0; r < rounds; r++ {
		for i := 0; i < per; i++ {
			appendSpin(w, p)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		st := w.Stats().Rotations
		w.mu.RLock()
		idx := w.act.idx
		w.mu.RUnlock()
		if st == 0 || cap(idx) == 0 {
			continue
		}
		if rot0 == 0 {
			rot0 = st
		}
		arrays[unsafe.SliceData(idx[:1])] = true
	}
	rots := w.Stats().Rotations
	w.mu.RLock()
	var mapped int
	for _, s := range w.segs {
		if s.mapped != nil {
			mapped++
		}
	}
	w.mu.RUnlock()
	if rots < 5 || mapped < 5 {
		t.Fatalf("%d rotations, %d mapped sidecars: the test needs several", rots, mapped)
	}
	if len(arrays) != 1 {
		t.Errorf("active index used %d arrays after the first rotation, want 1 (reused)", len(arrays))
	}
	buf := make([]byte, 256)
	for seq := uint64(1); seq <= per*rounds; seq++ {
		n, err := w.ReadAt(seq, buf)
		if err != nil {
			t.Fatalf("ReadAt(%d): %v", seq, err)
		}
		h, pl, _, err := wire.DecodeFrame(buf[:n])
		if err != nil || h.Type != 100 || len(pl) != len(p) || wire.Seq(pl) != seq {
			t.Fatalf("ReadAt(%d): type %d, %d bytes, seq %d, %v", seq, h.Type, len(pl), wire.Seq(pl), err)
		}
	}
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
