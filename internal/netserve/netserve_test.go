package netserve

import (
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

type testConn struct {
	nc       net.Conn
	shutdown atomic.Bool
	serving  chan struct{}
	done     chan struct{}
}

func (c *testConn) Serve() {
	close(c.serving)
	buf := make([]byte, 1)
	c.nc.Read(buf) // returns when Shutdown closes the socket
	close(c.done)
}

func (c *testConn) Shutdown() {
	c.shutdown.Store(true)
	c.nc.Close()
}

// Ensure Close stops accepting, shuts down every open connection, waits
// for them, and makes Serve return ErrClosed (also when called after).
func TestGroupServeClose(t *testing.T) {
	g := New("test-conn")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan *testConn, 4)
	errc := make(chan error, 1)
	go func() {
		errc <- g.Serve(ln, func(nc net.Conn) Conn {
			c := &testConn{nc: nc, serving: make(chan struct{}), done: make(chan struct{})}
			accepted <- c
			return c
		})
	}()
	var conns []*testConn
	for range 3 {
		nc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		select {
		case c := <-accepted:
			<-c.serving
			conns = append(conns, c)
		case <-time.After(5 * time.Second):
			t.Fatal("not accepted")
		}
	}
	if n := len(g.Conns()); n != 3 {
		t.Fatalf("Conns: %d, want 3", n)
	}
	g.Close()
	if n := len(g.Conns()); n != 0 {
		t.Fatalf("Conns after Close: %d", n)
	}
	for i, c := range conns {
		if !c.shutdown.Load() {
			t.Fatalf("connection %d not shut down", i)
		}
		select {
		case <-c.done:
		default:
			t.Fatalf("Close returned before connection %d's Serve", i)
		}
	}
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("Serve: %v, want ErrClosed", err)
	}
	ln2, _ := net.Listen("tcp", "127.0.0.1:0")
	if err := g.Serve(ln2, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Serve after Close: %v", err)
	}
	if _, err := ln2.Accept(); err == nil {
		t.Fatal("listener handed to a closed group left open")
	}
}
