package replay

import (
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"

	"github.com/walcast/walcast/wal"
)

// rawRequest dials addr over TLS with the dev client certificate, sends a
// ReplicationRequest from seq from and returns the connection.
func rawRequest(t *testing.T, addr string, from uint64) *tls.Conn {
	t.Helper()
	c, err := tls.Dial("tcp", addr, clientTLS(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var req [wal.ControlFrameSize]byte
	wal.PutReplicationRequestFrame(req[:], wal.ReplicationRequest{From: from, Stream: 1})
	if _, err := c.Write(req[:]); err != nil {
		t.Fatal(err)
	}
	return c
}

// readFrame reads one frame from c.
func readFrame(t *testing.T, c net.Conn) (wal.Header, []byte) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	var b [wal.HeaderSize + wal.MaxPayload]byte
	if _, err := io.ReadFull(c, b[:wal.HeaderSize]); err != nil {
		t.Fatal(err)
	}
	h, err := wal.ParseHeader(b[:])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, b[wal.HeaderSize:wal.HeaderSize+int(h.Len)]); err != nil {
		t.Fatal(err)
	}
	return h, b[wal.HeaderSize : wal.HeaderSize+int(h.Len)]
}

// TestCaughtUpBeyondTip: a request beyond the tip gets CaughtUp with
// live_seq = the tip, a seq that exists, not from−1 (issue 16 item 11);
// within the stream, live_seq stays the last seq sent.
func TestCaughtUpBeyondTip(t *testing.T) {
	src := newMemSource(1, 1, 64)
	src.AppendFlush(100)
	_, addr := startServer(t, nil, src)
	for _, tc := range []struct {
		from, live uint64
		records    int
	}{
		{from: 500, live: 100},
		{from: 101, live: 100},
		{from: 90, live: 100, records: 11},
	} {
		c := rawRequest(t, addr, tc.from)
		for i := 0; i < tc.records; i++ {
			if h, p := readFrame(t, c); h.Type == wal.TypeCaughtUp || wal.Seq(p) != tc.from+uint64(i) {
				t.Fatalf("from %d: frame %d is type %d seq %d", tc.from, i, h.Type, wal.Seq(p))
			}
		}
		h, p := readFrame(t, c)
		if h.Type != wal.TypeCaughtUp {
			t.Fatalf("from %d: type %d, want CaughtUp", tc.from, h.Type)
		}
		if cu, err := wal.ParseCaughtUp(p); err != nil || cu.LiveSeq != tc.live {
			t.Fatalf("from %d: CaughtUp %+v (%v), want live_seq %d", tc.from, cu, err, tc.live)
		}
	}
}

