package replay

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/walcast/walcast/wal"
	"github.com/walcast/walcast/wire"
)

// flipRecord flips a payload byte of seq's record in the stream directory
// of stream under root and returns the segment it is in.
func flipRecord(t *testing.T, root string, stream uint32, seq uint64) string {
	t.Helper()
	dir := wal.StreamDir(root, stream)
	files, err := wal.ListSegments(dir, stream)
	if err != nil {
		t.Fatal(err)
	}
	for _, sf := range files {
		var off int64 = -1
		wal.ScanSegment(sf.Path, func(r wal.ScannedRecord) bool {
			if r.Seq == seq {
				off = r.Off
				return false
			}
			return true
		})
		if off < 0 {
			continue
		}
		f, err := os.OpenFile(sf.Path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var b [1]byte
		f.ReadAt(b[:], off+wire.HeaderSize+12)
		b[0] ^= 0x5a
		if _, err := f.WriteAt(b[:], off+wire.HeaderSize+12); err != nil {
			t.Fatal(err)
		}
		return sf.Path
	}
	t.Fatalf("seq %d not found", seq)
	return ""
}

// independentWAL writes n records of stream 1 under a fresh root with
// small segments and closes the writer.
func independentWAL(t *testing.T, n int) string {
	t.Helper()
	root := t.TempDir()
	cfg := wal.DefaultConfig(root)
	cfg.Stream = 1
	cfg.SegmentSize = 32 << 10
	w, err := wal.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, n, 64)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestReplayEndsAtDamage: an independent WAL of 3 000
// records with seq 1 500 corrupt in a sealed segment. A client asking from
// 1 gets every record before the damage (the server flushes what it
// counted as sent), then an explicit error naming seq 1 500 — once, not a
// reconnect loop. A reference client (no capability flag) gets the same
// records and a plain NotAvailable asking it to try elsewhere from 1 500.
// After `wal.Repair` the stream goes on past a Skip marker.
func TestReplayEndsAtDamage(t *testing.T) {
	root := independentWAL(t, 3000)
	seg := flipRecord(t, root, 1, 1500)
	if filepath.Base(seg) == wal.ActiveName(1) {
		t.Fatalf("seq 1500 should be in a sealed segment, is in %s", seg)
	}
	ds, err := OpenDirSource(root, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	srv, addr := startServer(t, nil, ds)

	cfg := testClientConfig(t, addr)
	cfg.RetryBudget = 20
	cl, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	col := newCollector(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = cl.Run(ctx, col.handle)
	if !errors.Is(err, ErrDamaged) || errors.Is(err, ErrBlocked) {
		t.Fatalf("Run over a damaged log: %v", err)
	}
	checkRange(t, col.snapshot(), 1, 1499)
	if st := cl.Stats(); st.Retries != 0 || st.Damaged != 1 || cl.Tip() != 1499 {
		t.Fatalf("client stats %+v tip %d: it must stop, not retry", st, cl.Tip())
	}
	if st := srv.Stats(); st.Damaged != 1 || st.Records != 1499 {
		t.Fatalf("server stats %+v", st)
	}

	// A reference client: request without flags, reads frames itself.
	seqs, na := rawReplay(t, addr, 1, 0)
	if len(seqs) != 1499 || seqs[len(seqs)-1] != 1499 || na == nil || na.Requested != 1500 || na.Damaged != 0 {
		t.Fatalf("reference client: %d records, NotAvailable %+v", len(seqs), na)
	}

	// Repaired: the marker stands for 1500, the rest follows.
	if _, err := wal.Repair(wal.StreamDir(root, 1), 1); err != nil {
		t.Fatal(err)
	}
	ds2, err := OpenDirSource(root, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ds2.Close()
	_, addr2 := startServer(t, nil, ds2)
	cl2, _ := NewClient(testClientConfig(t, addr2))
	var got []uint64
	var skip wire.Skip
	_, err = cl2.CatchUp(ctx, func(h wire.Header, p []byte) error {
		if h.Type == wire.TypeSkip {
			skip, _ = wire.ParseSkip(p)
		}
		got = append(got, wire.Seq(p))
		return nil
	})
	if err != nil || len(got) != 3000 || skip != (wire.Skip{Seq: 1500, From: 1500, Reason: wire.SkipRepair}) {
		t.Fatalf("after repair: %v, %d records, skip %+v", err, len(got), skip)
	}
	seqs, na = rawReplay(t, addr2, 1, 0)
	if slices.Contains(seqs, 1500) || len(seqs) != 2999 || na != nil {
		t.Fatalf("reference client after repair: %d records (1500 is the marker, not for it), %+v", len(seqs), na)
	}
}

// rawReplay is a reference client: it sends a ReplicationRequest without
// flags over plaintext or TLS and reads frames until CaughtUp or
// NotAvailable, returning the data seqs.
func rawReplay(t *testing.T, addr string, from uint64, flags uint32) ([]uint64, *wire.NotAvailable) {
	t.Helper()
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	tc := tlsClient(t, raw, addr)
	var req [wire.ControlFrameSize]byte
	wire.PutReplicationRequestFrame(req[:], wire.ReplicationRequest{Stream: 1, From: from, Flags: flags})
	if _, err := tc.Write(req[:]); err != nil {
		t.Fatal(err)
	}
	raw.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(tc)
	var seqs []uint64
	buf := make([]byte, wire.HeaderSize+wire.MaxPayload)
	for {
		if _, err := io.ReadFull(br, buf[:wire.HeaderSize]); err != nil {
			t.Fatalf("after %d records: %v", len(seqs), err)
		}
		h, err := wire.ParseHeader(buf)
		if err != nil {
			t.Fatal(err)
		}
		n := wire.HeaderSize + int(h.Len)
		if _, err := io.ReadFull(br, buf[wire.HeaderSize:n]); err != nil {
			t.Fatal(err)
		}
		_, p, _, err := wire.DecodeFrame(buf[:n])
		if err != nil {
			t.Fatal(err)
		}
		switch h.Type {
		case wire.TypeNotAvailable:
			na, _ := wire.ParseNotAvailable(p)
			return seqs, &na
		case wire.TypeCaughtUp:
			return seqs, nil
		case wire.TypeSkip:
			t.Fatalf("a reference client got a Skip record")
		}
		seqs = append(seqs, wire.Seq(p))
	}
}

// TestReplayActiveDamageWithLiveWriter: a byte flipped in a durable
// record of the active segment while the writer keeps appending after it.
// The server must not send CaughtUp at the damage and keepalives forever:
// the client gets every record before it and an
// error naming the seq, from a server in the writer's process and from one
// following the directory.
func TestReplayActiveDamageWithLiveWriter(t *testing.T) {
	root := t.TempDir()
	w := openWAL(t, root, 1<<20)
	appendN(t, w, 200, 64)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	seg := flipRecord(t, root, 1, 120)
	if filepath.Base(seg) != wal.ActiveName(1) {
		t.Fatalf("seq 120 is in %s", seg)
	}
	appendN(t, w, 50, 64)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	ds, err := OpenDirSource(root, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	for name, src := range map[string]Source{"writer": NewWriterSource(w, root, 1), "directory": ds} {
		t.Run(name, func(t *testing.T) {
			_, addr := startServer(t, nil, src)
			cl, _ := NewClient(testClientConfig(t, addr))
			col := newCollector(t)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			err := cl.Run(ctx, col.handle)
			if !errors.Is(err, ErrDamaged) {
				t.Fatalf("Run: %v", err)
			}
			checkRange(t, col.snapshot(), 1, 119)
		})
	}
}

// TestOneBadStreamDoesNotStopTheOthers: a server with two
// directory streams, one missing a middle segment: the good one is served
// in full, the bad one up to the gap and then told where it breaks.
func TestOneBadStreamDoesNotStopTheOthers(t *testing.T) {
	root := t.TempDir()
	for _, sid := range []uint32{1, 2} {
		cfg := wal.DefaultConfig(root)
		cfg.Stream = sid
		cfg.SegmentSize = 32 << 10
		w, err := wal.Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for range 1500 {
			seq := w.NextSeq()
			appendRetry(t, w, 100, dataFrame(seq, 64)[wire.HeaderSize:])
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	files, _ := wal.ListSegments(wal.StreamDir(root, 2), 2)
	gone := files[2]
	os.Remove(gone.Path)
	var srcs []Source
	for _, sid := range []uint32{1, 2} {
		ds, err := OpenDirSource(root, sid, 0)
		if err != nil {
			t.Fatalf("stream %d: %v", sid, err)
		}
		defer ds.Close()
		srcs = append(srcs, ds)
	}
	_, addr := startServer(t, nil, srcs...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, sid := range []uint32{1, 2} {
		cfg := testClientConfig(t, addr)
		cfg.Stream = sid
		cl, _ := NewClient(cfg)
		col := newCollector(t)
		tip, err := cl.CatchUp(ctx, col.handle)
		switch sid {
		case 1:
			if err != nil || tip != 1500 {
				t.Fatalf("the good stream: %v, tip %d", err, tip)
			}
			checkRange(t, col.snapshot(), 1, 1500)
		case 2:
			if !errors.Is(err, ErrDamaged) {
				t.Fatalf("the bad stream: %v", err)
			}
			checkRange(t, col.snapshot(), 1, gone.First-1)
		}
	}
}

func tlsClient(t *testing.T, raw net.Conn, addr string) net.Conn {
	cfg := clientTLS(t).Clone()
	host, _, _ := net.SplitHostPort(addr)
	cfg.ServerName = host
	return tls.Client(raw, cfg)
}

// crashCopy simulates a crash: it copies the stream directory of a live
// writer (records appended but not flushed are not in the copy; the seq
// reservation is) and returns the copy's WAL root.
func crashCopy(t *testing.T, root string, stream uint32) string {
	t.Helper()
	dst := t.TempDir()
	src := wal.StreamDir(root, stream)
	out := wal.StreamDir(dst, stream)
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(src)
	for _, e := range ents {
		if e.IsDir() || filepath.Ext(e.Name()) == ".lock" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(out, e.Name()), b, 0o644)
	}
	return dst
}

// TestReplayAcrossACrash: a writer that crashed with records appended but
// not durable continues past its reservation behind a Skip marker. A
// client of either source gets the durable records, the marker (the seqs
// it stands for were never durable) and what follows; a client asking
// from inside the hole starts at the marker; a log whose first durable
// record is the marker itself is served from seq 1.
func TestReplayAcrossACrash(t *testing.T) {
	for _, durable := range []int{0, 30} {
		root := t.TempDir()
		cfg := wal.DefaultConfig(root)
		cfg.Stream = 1
		cfg.FlushInterval = time.Hour
		cfg.FlushRecords = 1 << 20
		cfg.FlushBytes = 1 << 30
		w, err := wal.Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		appendN(t, w, durable, 64)
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		appendN(t, w, 20, 64) // sent, never durable
		crashed := crashCopy(t, root, 1)
		w.Close()

		cfg.Dir = crashed
		w2, err := wal.Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		sk := w2.Stats().Recovery.Skip
		if sk == nil || sk.From != uint64(durable)+1 {
			t.Fatalf("durable %d: Skip %+v", durable, sk)
		}
		for range 10 {
			seq := w2.NextSeq()
			appendRetry(t, w2, 100, dataFrame(seq, 64)[wire.HeaderSize:])
		}
		if err := w2.Flush(); err != nil {
			t.Fatal(err)
		}
		last := w2.NextSeq() - 1
		ds, err := OpenDirSource(crashed, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		for name, src := range map[string]Source{"writer": NewWriterSource(w2, crashed, 1), "directory": ds} {
			_, addr := startServer(t, nil, src)
			for _, from := range []uint64{1, sk.From + 3} {
				cl, _ := NewClient(testClientConfig(t, addr))
				cl.SetTip(from - 1)
				var got []uint64
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				tip, err := cl.CatchUpTo(ctx, last, time.Second, func(h wire.Header, p []byte) error {
					if h.Type == wire.TypeSkip {
						if s, _ := wire.ParseSkip(p); s != *sk {
							t.Errorf("marker %+v, want %+v", s, *sk)
						}
					}
					got = append(got, wire.Seq(p))
					return nil
				})
				cancel()
				want := []uint64{}
				for s := from; s <= uint64(durable); s++ {
					want = append(want, s)
				}
				for s := sk.Seq; s <= last; s++ {
					want = append(want, s)
				}
				if err != nil || tip != last || !slices.Equal(got, want) {
					t.Fatalf("durable %d, %s, from %d: %v tip %d got %v want %v", durable, name, from, err, tip, got, want)
				}
			}
		}
		ds.Close()
		w2.Close()
	}
}
