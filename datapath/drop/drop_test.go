package drop

import (
	"net/netip"
	"testing"

	"github.com/walcast/walcast/batch"
)

// loop is a Path that hands back whatever was sent to it.
type loop struct{ q [][]byte }

func (l *loop) Send(v *batch.Vec) (int, error) {
	for i := 0; i < v.Len(); i++ {
		m, _ := v.Msg(i)
		l.q = append(l.q, append([]byte(nil), m...))
	}
	return v.Len(), nil
}

func (l *loop) Recv(v *batch.Vec) (int, error) {
	v.Reset()
	for len(l.q) > 0 && !v.Full() {
		v.Append(l.q[0], netip.AddrPort{})
		l.q = l.q[1:]
	}
	return v.Len(), nil
}
func (l *loop) LocalAddr() netip.AddrPort { return netip.AddrPort{} }
func (l *loop) Close() error              { return nil }

func TestDropRates(t *testing.T) {
	cases := []struct {
		name       string
		recv, send float64
	}{
		{"none", 0, 0},
		{"recv10", 10, 0},
		{"send25", 0, 25},
		{"both", 5, 5},
		{"all", 100, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := &loop{}
			p := New(in, Config{RecvPct: c.recv, SendPct: c.send, Seed: 7}, 64, 64)
			v := batch.New(64, 64)
			got := 0
			const total = 64 * 500
			for r := 0; r < 500; r++ {
				v.Reset()
				for i := 0; i < 64; i++ {
					v.Append([]byte{byte(i)}, netip.AddrPort{})
				}
				if n, err := p.Send(v); n != 64 || err != nil {
					t.Fatal(n, err)
				}
				n, _ := p.Recv(v)
				got += n
			}
			want := total * (1 - c.recv/100) * (1 - c.send/100)
			if d := float64(got) - want; d > 0.02*total || d < -0.02*total {
				t.Fatalf("delivered %d, want ≈ %.0f", got, want)
			}
			rd, sd := p.Dropped()
			if int(rd+sd)+got != total {
				t.Fatalf("dropped %d+%d + got %d != %d", rd, sd, got, total)
			}
		})
	}
}
