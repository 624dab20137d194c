package soupbintcp

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/walcast/walcast/bench/peers"
)

var golden = []struct {
	name string
	got  []byte
	want string
}{
	{"sequenced data", AppendPacket(nil, SequencedData, []byte("hi")), "0003" + "53" + "6869"},
	{"server heartbeat", AppendPacket(nil, ServerHeartbeat, nil), "0001" + "48"},
	{"login request", AppendLogin(nil, Login{Username: "bench", Password: "walcast", Seq: 1}),
		"002f" + "4c" + hex.EncodeToString([]byte("bench "+"walcast   "+"          "+"                   1"))},
	{"login accepted", AppendAccepted(nil, "WALCAST1", 42),
		"001f" + "41" + hex.EncodeToString([]byte("  WALCAST1"+"                  42"))},
}

func TestGolden(t *testing.T) {
	for _, g := range golden {
		t.Run(g.name, func(t *testing.T) {
			if h := hex.EncodeToString(g.got); h != g.want {
				t.Fatalf("got  %s\nwant %s", h, g.want)
			}
		})
	}
}

func TestNextAndLogin(t *testing.T) {
	var stream []byte
	for _, g := range golden {
		stream = append(stream, g.got...)
	}
	var types []byte
	for rest := stream; len(rest) > 0; {
		typ, p, r, ok, err := Next(rest)
		if err != nil || !ok {
			t.Fatalf("Next: %v %v", ok, err)
		}
		types = append(types, typ)
		switch typ {
		case LoginRequest:
			l, err := ParseLogin(p)
			if err != nil || l.Username != "bench" || l.Password != "walcast" || l.Seq != 1 || l.Session != "" {
				t.Fatalf("%+v %v", l, err)
			}
		case LoginAccepted:
			s, n, err := ParseAccepted(p)
			if err != nil || s != "WALCAST1" || n != 42 {
				t.Fatalf("%q %d %v", s, n, err)
			}
		}
		rest = r
	}
	if string(types) != "SHLA" {
		t.Fatalf("types %q", types)
	}
	// A partial packet waits for more bytes.
	if _, _, _, ok, err := Next(stream[:4]); ok || err != nil {
		t.Fatal("partial packet accepted")
	}
	if _, _, _, _, err := Next([]byte{0, 0, 'H'}); !errors.Is(err, peers.ErrCorrupt) {
		t.Fatalf("zero length: %v", err)
	}
	if _, err := ParseLogin(bytes.Repeat([]byte{' '}, 45)); !errors.Is(err, peers.ErrCorrupt) {
		t.Fatal("short login accepted")
	}
	bad := bytes.Repeat([]byte{' '}, LoginRequestLen)
	copy(bad[26:], "12x")
	if _, err := ParseLogin(bad); !errors.Is(err, peers.ErrCorrupt) {
		t.Fatal("non-numeric seq accepted")
	}
}

func FuzzNext(f *testing.F) {
	for _, g := range golden {
		f.Add(g.got)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for rest := b; ; {
			typ, p, r, ok, err := Next(rest)
			if err != nil || !ok {
				return
			}
			if len(r) >= len(rest) {
				t.Fatal("Next made no progress")
			}
			if again := AppendPacket(nil, typ, p); !bytes.Equal(again, rest[:len(rest)-len(r)]) {
				t.Fatalf("round trip %x", again)
			}
			ParseLogin(p)
			ParseAccepted(p)
			rest = r
		}
	})
}
