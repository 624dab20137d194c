package cast

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/wal"
	"github.com/walcast/walcast/wire"
)

// walRecords publishes the same records through a Producer with keys k
// (nil: none) into a fresh WAL, over a mem link whose far end collects
// what was sent, and returns the WAL's directory and the datagrams sent.
// The records vary in type and size, up to the largest payload a keyed
// Producer takes, and their bytes depend only on their index.
func walRecords(t *testing.T, k *Keys, n int) (dir string, sent [][]byte) {
	t.Helper()
	dir = t.TempDir()
	pair := mem.NewPair(1)
	adv := ProducerAdvanced{Sender: SenderTuning{NoFlowControl: true, Coalesce: true}}
	adv.WAL.SegmentSize = 1 << 20 // several segments, sealed and active
	p, err := NewProducer(ProducerConfig{Dir: dir, Stream: 3, To: mem.AddrB, Path: pair.A, Idle: quiet, Keys: k, Advanced: adv})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const maxKeyed = protocol.DefaultMaxFrame - wire.HeaderSize - wire.TrailerSize
	payload := make([]byte, maxKeyed)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { // the far end: what the Producer sent
		defer close(done)
		v := batch.New(64, protocol.MaxDatagram)
		for {
			var stopped bool
			select {
			case <-stop:
				stopped = true // the Producer is closed: drain and return
			default:
			}
			k, err := pair.B.Recv(v)
			if err != nil {
				t.Error(err)
				return
			}
			for i := range k {
				d, _ := v.Msg(i)
				sent = append(sent, bytes.Clone(d))
			}
			if k == 0 {
				if stopped {
					return
				}
				time.Sleep(100 * time.Microsecond)
			}
		}
	}()
	for i := range n {
		size := 8 + (i*7919)%(maxKeyed-7) // 8 … maxKeyed bytes
		if i%97 == 0 {
			size = maxKeyed
		}
		for j := range payload[:size] {
			payload[j] = byte(i*31 + j)
		}
		if err := p.Publish(ctx, uint16(100+i%3), payload[:size]); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	close(stop)
	<-done
	return dir, sent
}

// readTree returns every file under dir by its path relative to dir.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		files[rel] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// The WAL bytes are the same with and without keys: the same records
// published by a keyed and an unkeyed Producer leave the same files,
// name for name and byte for byte (the trailer is transport framing and
// never reaches the log). And wire = disk holds with keys: every data
// frame a keyed Producer sent, its trailer verified and stripped, is the
// log's record byte for byte.
func TestProducerKeysWALIdentical(t *testing.T) {
	const n = 3000
	plainDir, _ := walRecords(t, nil, n)
	keyedDir, sent := walRecords(t, testKeys, n)
	plain, keyed := readTree(t, plainDir), readTree(t, keyedDir)
	if len(plain) < 3 {
		t.Fatalf("the log has %d files; want several segments: %v", len(plain), plain)
	}
	for name, b := range plain {
		kb, ok := keyed[name]
		switch {
		case !ok:
			t.Errorf("%s is in the unkeyed log only", name)
		case !bytes.Equal(b, kb):
			i := 0
			for i < min(len(b), len(kb)) && b[i] == kb[i] {
				i++
			}
			t.Errorf("%s differs with keys (%d bytes against %d; first difference at byte %d)", name, len(b), len(kb), i)
		}
	}
	for name := range keyed {
		if _, ok := plain[name]; !ok {
			t.Errorf("%s is in the keyed log only", name)
		}
	}

	// The log's records, by seq.
	rd, err := wal.OpenReader(keyedDir, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	logged := map[uint64][]byte{}
	for {
		f, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		_, p, _, err := wire.DecodeFrame(f)
		if err != nil {
			t.Fatal(err)
		}
		logged[wire.Seq(p)] = bytes.Clone(f)
	}
	if len(logged) != n {
		t.Fatalf("the log holds %d records, want %d", len(logged), n)
	}
	op, err := wire.NewOpener(testKeys.all()...)
	if err != nil {
		t.Fatal(err)
	}
	var onWire int
	for _, d := range sent {
		m, err := op.Open(d, mem.AddrA)
		if err != nil {
			t.Fatalf("a datagram the keyed Producer sent does not verify: %v", err)
		}
		for d = d[:m]; len(d) > 0; {
			h, p, size, err := wire.DecodeFrame(d)
			if err != nil {
				t.Fatal(err)
			}
			if !wire.UDPControl(h.Type) {
				seq := wire.Seq(p)
				if !bytes.Equal(d[:size], logged[seq]) {
					t.Fatalf("record %d on the wire differs from the log's", seq)
				}
				onWire++
			}
			d = d[size:]
		}
	}
	if onWire < n {
		t.Fatalf("%d records seen on the wire, want %d", onWire, n)
	}
	var names []string
	for name, b := range keyed {
		names = append(names, fmt.Sprintf("%s (%d bytes)", name, len(b)))
	}
	slices.Sort(names)
	t.Logf("%d records, %d on the wire in %d datagrams; identical files: %v", n, onWire, len(sent), names)
}
