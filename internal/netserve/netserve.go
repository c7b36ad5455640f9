// Package netserve is the accept loop both protocol front ends share: it
// accepts on any number of listeners, runs each connection on its own
// goroutine (labelled for profiles), and on Close stops the listeners,
// shuts every connection down and waits for them. Counters are the socket
// counters each connection keeps for the management API.
package netserve

import (
	"context"
	"errors"
	"net"
	"runtime/pprof"
	"sync"
	"time"
)

// ErrClosed is returned by Serve after Close.
var ErrClosed = errors.New("netserve: closed")

// Conn is a served connection.
type Conn interface {
	// Serve runs the connection to its end.
	Serve()
	// Shutdown ends it from another goroutine (server shutdown); Serve
	// then returns.
	Shutdown()
}

// Group is a set of listeners and the connections accepted on them.
type Group struct {
	label string // pprof label key, e.g. "amqp-conn"

	mu struct {
		sync.Mutex
		listeners map[net.Listener]struct{}
		conns     map[Conn]struct{}
		closed    bool
	}
	wg sync.WaitGroup
}

// New returns a Group whose connection goroutines carry the pprof label
// label=<remote address>.
func New(label string) *Group {
	g := &Group{label: label}
	g.mu.listeners = map[net.Listener]struct{}{}
	g.mu.conns = map[Conn]struct{}{}
	return g
}

// Serve accepts connections on ln, each made by accept, until Close.
// Temporary accept errors are retried with backoff; another error ends
// Serve.
func (g *Group) Serve(ln net.Listener, accept func(net.Conn) Conn) error {
	g.mu.Lock()
	if g.mu.closed {
		g.mu.Unlock()
		ln.Close()
		return ErrClosed
	}
	g.mu.listeners[ln] = struct{}{}
	g.mu.Unlock()
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if g.closed() {
				return ErrClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		c := accept(nc)
		g.mu.Lock()
		if g.mu.closed {
			g.mu.Unlock()
			nc.Close()
			return ErrClosed
		}
		g.mu.conns[c] = struct{}{}
		g.wg.Add(1)
		g.mu.Unlock()
		go pprof.Do(context.Background(), pprof.Labels(g.label, nc.RemoteAddr().String()), func(context.Context) {
			defer g.wg.Done()
			c.Serve()
			g.mu.Lock()
			delete(g.mu.conns, c)
			g.mu.Unlock()
		})
	}
}

// Conns returns the connections being served now.
func (g *Group) Conns() []Conn {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]Conn, 0, len(g.mu.conns))
	for c := range g.mu.conns {
		out = append(out, c)
	}
	return out
}

func (g *Group) closed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mu.closed
}

// Close stops the listeners, shuts every connection down and waits for
// their goroutines.
func (g *Group) Close() {
	g.mu.Lock()
	g.mu.closed = true
	for ln := range g.mu.listeners {
		ln.Close()
	}
	conns := make([]Conn, 0, len(g.mu.conns))
	for c := range g.mu.conns {
		conns = append(conns, c)
	}
	g.mu.Unlock()
	for _, c := range conns {
		c.Shutdown()
	}
	g.wg.Wait()
}
