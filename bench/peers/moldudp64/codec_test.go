package moldudp64

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/walcast/walcast/bench/peers"
)

var sess = NewSession("WALCAST1")

// Golden frames, written out by hand from the MoldUDP64 1.00 layout.
var golden = []struct {
	name string
	got  []byte
	want string
}{
	{"two messages", AppendPacket(nil, sess, 7, []byte("ab"), []byte("xyz")),
		"57414c434153543120200000000000000007" + "0002" + "0002" + "6162" + "0003" + "78797a"},
	{"heartbeat", AppendHeartbeat(nil, sess, 9), "57414c434153543120200000000000000009" + "0000"},
	{"end of session", AppendEndOfSession(nil, sess, 9), "57414c434153543120200000000000000009" + "ffff"},
	{"request", AppendRequest(nil, Request{Session: sess, Seq: 3, Count: 2}), "57414c434153543120200000000000000003" + "0002"},
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

func TestParse(t *testing.T) {
	p, err := Parse(golden[0].got)
	if err != nil || p.Seq != 7 || p.Count != 2 || p.Session != sess {
		t.Fatalf("%+v %v", p, err)
	}
	for i, want := range []string{"ab", "xyz"} {
		seq, m := p.Message(i)
		if seq != 7+uint64(i) || string(m) != want {
			t.Fatalf("message %d: %d %q", i, seq, m)
		}
	}
	if p, err := Parse(golden[1].got); err != nil || !p.Heartbeat() || p.Seq != 9 {
		t.Fatalf("heartbeat %+v %v", p, err)
	}
	if p, err := Parse(golden[2].got); err != nil || !p.EndOfSession() {
		t.Fatalf("eos %+v %v", p, err)
	}
	if r, err := ParseRequest(golden[3].got); err != nil || r.Seq != 3 || r.Count != 2 {
		t.Fatalf("request %+v %v", r, err)
	}
	bad := []struct {
		name string
		b    []byte
	}{
		{"short header", golden[0].got[:19]},
		{"truncated length", golden[0].got[:len(golden[0].got)-6]},
		{"truncated data", golden[0].got[:len(golden[0].got)-1]},
		{"trailing bytes", append(bytes.Clone(golden[0].got), 0)},
		{"heartbeat with data", append(bytes.Clone(golden[1].got), 0, 0)},
		{"seq wraps", AppendPacket(nil, sess, ^uint64(0), []byte("a"), []byte("b"))},
	}
	for _, c := range bad {
		if _, err := Parse(c.b); !errors.Is(err, peers.ErrCorrupt) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	for _, b := range [][]byte{golden[3].got[:19], AppendRequest(nil, Request{Session: sess, Seq: 1, Count: 0})} {
		if _, err := ParseRequest(b); !errors.Is(err, peers.ErrCorrupt) {
			t.Errorf("request %x: %v", b, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, g := range golden {
		f.Add(g.got)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse(b)
		if err != nil {
			return
		}
		// Whatever parses re-encodes to the same bytes.
		var msgs [][]byte
		if !p.Heartbeat() && !p.EndOfSession() {
			for i := range int(p.Count) {
				_, m := p.Message(i)
				msgs = append(msgs, m)
			}
		}
		var again []byte
		switch {
		case p.Heartbeat():
			again = AppendHeartbeat(nil, p.Session, p.Seq)
		case p.EndOfSession():
			again = AppendEndOfSession(nil, p.Session, p.Seq)
		default:
			again = AppendPacket(nil, p.Session, p.Seq, msgs...)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("round trip %x -> %x", b, again)
		}
		ParseRequest(b)
	})
}
