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
		v.AppendView(p, a)
		v.Own()
		v.Reset()
	}); n != 0 {
		t.Fatalf("allocs %v", n)
	}
}

func TestVecViews(t *testing.T) {
	v := New(4, 8)
	a := netip.MustParseAddrPort("127.0.0.1:9")
	ext := []byte("external")
	if !v.Append([]byte("own"), a) || !v.AppendView(ext[:5], a) || !v.AppendView(ext, a) {
		t.Fatal("append failed")
	}
	if v.AppendView(make([]byte, 9), a) {
		t.Fatal("oversize view accepted")
	}
	if !v.Owned(0) || v.Owned(1) || v.Owned(2) {
		t.Fatalf("owned: %v %v %v", v.Owned(0), v.Owned(1), v.Owned(2))
	}
	m, addr := v.Msg(1)
	if &m[0] != &ext[0] || string(m) != "exter" || addr != a {
		t.Fatalf("view %q is not ext", m)
	}
	// Drop shifts views and owned messages alike.
	v.Drop(1)
	if m, _ := v.Msg(0); string(m) != "exter" || v.Owned(0) {
		t.Fatalf("after drop: %q owned %v", m, v.Owned(0))
	}
	if !v.Append([]byte("four"), a) || !v.Owned(2) {
		t.Fatal("append after drop")
	}
	// Own copies the views into their slots: the Vec then outlives ext.
	v.Own()
	copy(ext, "XXXXXXXX")
	for i, want := range []string{"exter", "external", "four"} {
		if m, _ := v.Msg(i); string(m) != want || !v.Owned(i) {
			t.Fatalf("after Own: msg %d %q owned %v, want %q", i, m, v.Owned(i), want)
		}
	}
	// Set makes a message its own slot again.
	v.Reset()
	v.AppendView(ext, a)
	copy(v.Buf(0), "slot")
	v.Set(0, 4, a)
	if m, _ := v.Msg(0); string(m) != "slot" || !v.Owned(0) {
		t.Fatalf("after Set: %q", m)
	}
}
