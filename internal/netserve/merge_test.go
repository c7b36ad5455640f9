package netserve

import (
	"errors"
	"net"
	"testing"
)

// Ensure a merged listener accepts on each of its listeners, reports the
// first one's address, and after Close returns net.ErrClosed and closes
// them all.
func TestMerge(t *testing.T) {
	var lns []net.Listener
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
	}
	m := Merge(lns...)
	if m.Addr() != lns[0].Addr() {
		t.Fatalf("Addr %v, want %v", m.Addr(), lns[0].Addr())
	}
	seen := map[string]bool{}
	for _, ln := range lns {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s, err := m.Accept()
		if err != nil {
			t.Fatal(err)
		}
		seen[s.LocalAddr().String()] = true
		s.Close()
	}
	if len(seen) != 2 {
		t.Fatalf("accepted on %v, want both listeners", seen)
	}
	m.Close()
	if _, err := m.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
	for _, ln := range lns {
		if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
			t.Errorf("%v still accepts after Close", ln.Addr())
		}
	}
}
