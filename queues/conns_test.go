package queues

import (
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// fakeConn is a Conn that records its forced closes.
type fakeConn struct {
	info ConnInfo

	mu      sync.Mutex
	reasons []string
	infos   atomic.Int64
}

func (c *fakeConn) Info() ConnInfo {
	c.infos.Add(1)
	return c.info
}

func (c *fakeConn) CloseForced(reason string) {
	c.mu.Lock()
	c.reasons = append(c.reasons, reason)
	c.mu.Unlock()
}

func (c *fakeConn) Counters() (Proto, *Counters) { return ProtoAMQP091, nil }

func (c *fakeConn) closes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.reasons)
}

func connNames(cs []Conn) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Info().Name)
	}
	slices.Sort(out)
	return out
}

// Ensure connections are listed from AddConn until their remove, that a
// remove is idempotent and drops only its own registration, and that
// CloseConns closes exactly the matching ones with the reason.
func TestConnRegistry(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	if got := b.Conns(); len(got) != 0 {
		t.Fatalf("new broker lists %d connections", len(got))
	}
	a := &fakeConn{info: ConnInfo{Name: "a", User: "u1", VHost: "/"}}
	c := &fakeConn{info: ConnInfo{Name: "c", User: "u2", VHost: "v"}}
	removeA := b.AddConn(a)
	removeC := b.AddConn(c)
	removeA2 := b.AddConn(a) // registered twice: listed twice
	if got, want := connNames(b.Conns()), []string{"a", "a", "c"}; !slices.Equal(got, want) {
		t.Fatalf("Conns = %v, want %v", got, want)
	}
	removeA2()
	removeA2()
	if got, want := connNames(b.Conns()), []string{"a", "c"}; !slices.Equal(got, want) {
		t.Fatalf("after one remove: Conns = %v, want %v", got, want)
	}
	if n := b.CloseConns(func(ci ConnInfo) bool { return ci.VHost == "v" }, "because"); n != 1 {
		t.Fatalf("CloseConns closed %d, want 1", n)
	}
	if got := c.closes(); !slices.Equal(got, []string{"because"}) {
		t.Fatalf("c closed with %q", got)
	}
	if got := a.closes(); len(got) != 0 {
		t.Fatalf("a closed with %q", got)
	}
	removeA()
	removeC()
	if got := b.Conns(); len(got) != 0 {
		t.Fatalf("after removes: %d connections", len(got))
	}
}

// Ensure deleting a vhost closes its connections with RabbitMQ's reason
// ("vhost 'x' is deleted") and deleting a user closes the user's ("user
// 'x' is deleted"), and no others.
func TestConnDeleteVHostAndUserClose(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	if err := b.AddVHost("v1"); err != nil {
		t.Fatal(err)
	}
	if err := b.AddUser("alice", "pw"); err != nil {
		t.Fatal(err)
	}
	inV1 := &fakeConn{info: ConnInfo{Name: "in-v1", User: "guest", VHost: "v1"}}
	alice := &fakeConn{info: ConnInfo{Name: "alice", User: "alice", VHost: "/"}}
	other := &fakeConn{info: ConnInfo{Name: "other", User: "guest", VHost: "/"}}
	for _, c := range []*fakeConn{inV1, alice, other} {
		defer b.AddConn(c)()
	}
	if err := b.DeleteVHost("v1"); err != nil {
		t.Fatalf("DeleteVHost: %v", err)
	}
	// Closed before the deletion and swept again after it: CloseForced is
	// idempotent.
	for _, r := range inV1.closes() {
		if r != "vhost 'v1' is deleted" {
			t.Fatalf("vhost connection closed with %q", r)
		}
	}
	if len(inV1.closes()) == 0 {
		t.Fatal("vhost connection not closed")
	}
	if err := b.DeleteUser("alice"); err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	if got := alice.closes(); !slices.Equal(got, []string{"user 'alice' is deleted"}) {
		t.Fatalf("alice's connection closed with %q", got)
	}
	if got := other.closes(); len(got) != 0 {
		t.Fatalf("other connection closed with %q", got)
	}
}

// Ensure the registry is safe for concurrent use: connections come and
// go while others list and close them (run with -race).
func TestConnRegistryConcurrent(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				c := &fakeConn{info: ConnInfo{Name: fmt.Sprintf("w%d-%d", w, i), VHost: fmt.Sprint(i % 2)}}
				remove := b.AddConn(c)
				remove()
			}
		}()
	}
	for i := 0; i < 2000; i++ {
		for _, c := range b.Conns() {
			c.Info()
		}
		b.CloseConns(func(ci ConnInfo) bool { return ci.VHost == "1" }, "x")
	}
	close(stop)
	wg.Wait()
	if got := b.Conns(); len(got) != 0 {
		t.Fatalf("%d connections left", len(got))
	}
}

// Ensure connection names are RabbitMQ's, IPv6 in brackets, and hosts
// are bare.
func TestConnName(t *testing.T) {
	v4 := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 54321}
	srv := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5672}
	v6 := &net.TCPAddr{IP: net.ParseIP("::1"), Port: 40000}
	for _, tc := range []struct {
		peer, local net.Addr
		want        string
	}{
		{v4, srv, "127.0.0.1:54321 -> 127.0.0.1:5672"},
		{v6, &net.TCPAddr{IP: net.ParseIP("::1"), Port: 5672}, "[::1]:40000 -> [::1]:5672"},
	} {
		if got := ConnName(tc.peer, tc.local); got != tc.want {
			t.Errorf("ConnName(%v, %v) = %q, want %q", tc.peer, tc.local, got, tc.want)
		}
	}
	if h, p := SplitAddr(v6); h != "::1" || p != 40000 {
		t.Errorf("SplitAddr(%v) = %q, %d", v6, h, p)
	}
}
