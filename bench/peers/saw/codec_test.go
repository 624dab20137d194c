package saw

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/walcast/walcast/bench/peers"
)

func TestGolden(t *testing.T) {
	d := make([]byte, 7)
	PutHeader(d, 0x01020304, TypeData)
	copy(d[5:], "hi")
	a := make([]byte, 5)
	PutHeader(a, 0xfffffffe, TypeAck)
	for _, c := range []struct{ got, want string }{
		{hex.EncodeToString(d), "01020304" + "01" + "6869"},
		{hex.EncodeToString(a), "fffffffe" + "02"},
	} {
		if c.got != c.want {
			t.Fatalf("got %s want %s", c.got, c.want)
		}
	}
	seq, typ, p, err := Parse(d)
	if err != nil || seq != 0x01020304 || typ != TypeData || string(p) != "hi" {
		t.Fatalf("%x %x %q %v", seq, typ, p, err)
	}
	seq, typ, _, err = Parse(a)
	if err != nil || seq != 0xfffffffe || typ != TypeAck {
		t.Fatalf("%x %x %v", seq, typ, err)
	}
	for name, b := range map[string][]byte{
		"short":    d[:4],
		"long ack": append(bytes.Clone(a), 0),
		"type 3":   {0, 0, 0, 1, 3},
	} {
		if _, _, _, err := Parse(b); !errors.Is(err, peers.ErrCorrupt) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 1, 'x'})
	f.Add([]byte{0, 0, 0, 1, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		seq, typ, p, err := Parse(b)
		if err != nil {
			return
		}
		out := make([]byte, HeaderLen+len(p))
		PutHeader(out, seq, typ)
		copy(out[HeaderLen:], p)
		if !bytes.Equal(out, b) {
			t.Fatalf("round trip %x -> %x", b, out)
		}
	})
}
