package benchkit

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/wire"
)

// queuePath hands out its queued datagrams, one Recv batch per call.
type queuePath struct {
	datapath.Path
	q [][][]byte
}

func (p *queuePath) Recv(v *batch.Vec) (int, error) {
	v.Reset()
	if len(p.q) == 0 {
		return 0, nil
	}
	for _, d := range p.q[0] {
		v.Append(d, netip.AddrPort{})
	}
	p.q = p.q[1:]
	return v.Len(), nil
}

func dataFrame(typ uint16, seq uint64) []byte {
	f := make([]byte, wire.HeaderSize+16)
	binary.LittleEndian.PutUint16(f[2:], typ)
	binary.LittleEndian.PutUint64(f[wire.HeaderSize:], seq)
	return f
}

// The lost-tail dropper loses the first transmission of every 4th seq
// only: a retransmit of it (same seq, later), other seqs and non-data
// frames pass, and the kept datagrams stay in order.
func TestSeqDropperFirstTransmissionOnly(t *testing.T) {
	in := &queuePath{q: [][][]byte{
		{dataFrame(1, 1), dataFrame(1, 2), dataFrame(1, 3), dataFrame(1, 4)},
		{dataFrame(wire.TypeHeartbeat, 4), dataFrame(1, 4), dataFrame(1, 5)},
		{dataFrame(1, 8), dataFrame(1, 8), dataFrame(1, 4)},
	}}
	p := &seqDropper{Path: in, every: 4, at: 0}
	v := batch.New(8, 64)
	var got []uint64
	for range 3 {
		n, err := p.Recv(v)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			m, _ := v.Msg(i)
			got = append(got, binary.LittleEndian.Uint64(m[wire.HeaderSize:]))
		}
	}
	want := []uint64{1, 2, 3, 4, 4, 5, 8, 4} // seq 4 and the first seq 8 lost once each
	if len(got) != len(want) {
		t.Fatalf("kept %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("kept %v, want %v", got, want)
		}
	}
	if p.dropped != 2 {
		t.Fatalf("dropped %d, want 2", p.dropped)
	}
}

// The burst-lossless baseline's dropper (none set) keeps every datagram,
// the seqs the single-gap dropper would lose included.
func TestSeqDropperNoneKeepsAll(t *testing.T) {
	in := &queuePath{q: [][][]byte{{dataFrame(1, 1), dataFrame(1, 2), dataFrame(1, 3), dataFrame(1, 4)}}}
	p := &seqDropper{Path: in, every: 4, at: 2, none: true}
	v := batch.New(8, 64)
	n, err := p.Recv(v)
	if err != nil {
		t.Fatal(err)
	}
	if n != 4 || p.dropped != 0 {
		t.Fatalf("kept %d of 4, dropped %d; want all kept", n, p.dropped)
	}
	if _, err := OneWayBursts(DefaultOneWayConfig(), LossRandom); err == nil {
		t.Fatal("OneWayBursts accepted LossRandom")
	}
}
