package batch

import (
	"bytes"
	"net/netip"
	"testing"
)

func TestVec(t *testing.T) {
	v := New(3, 8)
	a := netip.MustParseAddrPort("127.0.0.1:9")
	if !v.Append([]byte("one"), a) || !v.Append([]byte("two"), a) {
		t.Fatal("append failed")
	}
	if v.Append(make([]byte, 9), a) {
		t.Fatal("oversize append accepted")
	}
	b := v.Next()
	n := copy(b, "three")
	v.Commit(n, netip.AddrPort{})
	if !v.Full() || v.Next() != nil || v.Append([]byte("x"), a) {
		t.Fatal("full vec accepted more")
	}
	v.Drop(1)
	if v.Len() != 2 {
		t.Fatalf("len %d", v.Len())
	}
	m, addr := v.Msg(0)
	if !bytes.Equal(m, []byte("two")) || addr != a {
		t.Fatalf("msg0 %q %v", m, addr)
	}
	m, _ = v.Msg(1)
	if !bytes.Equal(m, []byte("three")) {
		t.Fatalf("msg1 %q", m)
	}
	// The dropped slot is reusable and distinct from live ones.
	if !v.Append([]byte("four"), a) {
		t.Fatal("append after drop")
	}
	m0, _ := v.Msg(0)
	m2, _ := v.Msg(2)
	if !bytes.Equal(m0, []byte("two")) || !bytes.Equal(m2, []byte("four")) {
		t.Fatalf("slots aliased: %q %q", m0, m2)
	}
	v.Reset()
	if v.Len() != 0 {
		t.Fatal("reset")
	}
}

func TestVecAllocs(t *testing.T) {
	v := New(64, 2048)
	p := make([]byte, 144)
	a := netip.MustParseAddrPort("10.0.0.1:1")
	if n := testing.AllocsPerRun(100, func() {
		for !v.Full() {
			v.Append(p, a)
		}
		v.Drop(3)
		v.Reset()
	}); n != 0 {
		t.Fatalf("allocs %v", n)
	}
}
