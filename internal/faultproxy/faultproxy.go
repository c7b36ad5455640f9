// Package faultproxy is a TCP proxy that a fault test puts between two
// nodes (or a client and a node) to break the network between them on
// command:
//
//   - Drop closes every connection and refuses new ones (they are
//     accepted and closed at once): a node that went away.
//   - Blackhole swallows the bytes going one way, or both, without
//     closing anything: a partition, one-way or not. The connection
//     stays open and silent; peers notice only through their own
//     timeouts.
//   - Delay holds the bytes going one way for a while before passing
//     them on, in order: a slow link.
//   - Heal lifts every fault. A connection that lost bytes to a
//     blackhole is closed then, since a byte stream with a hole in it
//     is not something TCP delivers; the others carry on.
//
// Each connection has two directions, each run by a reader goroutine
// that reads from one side and a writer goroutine that writes to the
// other when a chunk is due; the writer decides whether a chunk is
// swallowed, so a partition also takes the bytes already in flight.
package faultproxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Direction is a set of directions through the proxy.
type Direction uint8

// Directions.
const (
	// Upstream is from the client (the side that dialed the proxy) to
	// the target.
	Upstream Direction = 1 << iota
	// Downstream is from the target back to the client.
	Downstream
	// Both is both directions.
	Both = Upstream | Downstream
)

func (d Direction) String() string {
	switch d {
	case Upstream:
		return "upstream"
	case Downstream:
		return "downstream"
	case Both:
		return "both"
	}
	return fmt.Sprintf("Direction(%d)", uint8(d))
}

// dirs are the single directions, indexed as Stats's arrays are.
var dirs = [2]Direction{Upstream, Downstream}

// ErrClosed is returned by Close's second call.
var ErrClosed = errors.New("faultproxy: closed")

// chunkSize is the most a reader reads at once.
const chunkSize = 32 << 10

// queueLen bounds the chunks a direction holds for delay; a full queue
// stops its reader, which pushes back on the sender as TCP would.
const queueLen = 1024

// Stats are a proxy's counters. Index 0 is Upstream, 1 Downstream.
type Stats struct {
	Accepted  uint64    // connections accepted and forwarded
	Refused   uint64    // connections accepted and closed at once (Drop)
	Open      int       // connections open now
	Forwarded [2]uint64 // bytes passed on, per direction
	Swallowed [2]uint64 // bytes swallowed by a blackhole, per direction
}

// Proxy forwards connections accepted on its address to a target.
type Proxy struct {
	// Static after New.
	ln     net.Listener
	target string

	accepted, refused    atomic.Uint64
	forwarded, swallowed [2]atomic.Uint64
	wg                   sync.WaitGroup // the accept loop and every connection's goroutines
	mu                   struct {
		sync.Mutex
		closed    bool
		dropped   bool
		blackhole Direction
		delay     [2]time.Duration
		conns     map[*conn]struct{}
	}
}

// New listens on listen (such as "127.0.0.1:0") and forwards each
// connection to target, which it dials when the connection arrives.
func New(listen, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen %s: %w", listen, err)
	}
	p := &Proxy{ln: ln, target: target}
	p.mu.conns = map[*conn]struct{}{}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr returns the address the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Drop closes every connection and makes the proxy close new ones as
// it accepts them, until Heal.
func (p *Proxy) Drop() {
	p.mu.Lock()
	p.mu.dropped = true
	conns := p.connsLocked()
	p.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}

// Blackhole makes the proxy swallow the bytes going in d (added to any
// direction already blackholed), on open connections and new ones,
// until Heal.
func (p *Proxy) Blackhole(d Direction) {
	p.mu.Lock()
	p.mu.blackhole |= d
	p.mu.Unlock()
}

// Delay makes the proxy hold the bytes read from now on going in d for
// by before passing them on; 0 passes them on at once. Order is kept.
func (p *Proxy) Delay(d Direction, by time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, dir := range dirs {
		if d&dir != 0 {
			p.mu.delay[i] = by
		}
	}
}

// Heal lifts every fault: the proxy accepts and forwards again, with no
// delay. Connections that lost bytes to a blackhole are closed.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.mu.dropped = false
	p.mu.blackhole = 0
	p.mu.delay = [2]time.Duration{}
	conns := p.connsLocked()
	p.mu.Unlock()
	for _, c := range conns {
		if c.lost.Load() {
			c.close()
		}
	}
}

// Stats returns the proxy's counters.
func (p *Proxy) Stats() Stats {
	s := Stats{Accepted: p.accepted.Load(), Refused: p.refused.Load()}
	for i := range dirs {
		s.Forwarded[i] = p.forwarded[i].Load()
		s.Swallowed[i] = p.swallowed[i].Load()
	}
	p.mu.Lock()
	s.Open = len(p.mu.conns)
	p.mu.Unlock()
	return s
}

// Close stops listening, closes every connection and waits for the
// proxy's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	p.mu.closed = true
	conns := p.connsLocked()
	p.mu.Unlock()
	p.ln.Close()
	for _, c := range conns {
		c.close()
	}
	p.wg.Wait()
	return nil
}

// connsLocked returns the open connections.
// REQUIRES: p.mu held.
func (p *Proxy) connsLocked() []*conn {
	conns := make([]*conn, 0, len(p.mu.conns))
	for c := range p.mu.conns {
		conns = append(conns, c)
	}
	return conns
}

// state returns whether d is blackholed and its delay.
func (p *Proxy) state(i int) (blackholed bool, delay time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.blackhole&dirs[i] != 0, p.mu.delay[i]
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			p.mu.Lock()
			closed := p.mu.closed
			p.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(5 * time.Millisecond) // a temporary error such as EMFILE
			continue
		}
		p.mu.Lock()
		dropped := p.mu.dropped || p.mu.closed
		p.mu.Unlock()
		if dropped {
			p.refused.Add(1)
			client.Close()
			continue
		}
		p.wg.Add(1)
		go p.serve(client)
	}
}

// conn is a proxied connection: the client's and the target's.
type conn struct {
	client, server net.Conn
	closeOnce      sync.Once
	done           chan struct{} // closed by close
	lost           atomic.Bool   // a blackhole swallowed bytes or an end
}

func (c *conn) close() {
	c.closeOnce.Do(func() {
		c.client.Close()
		c.server.Close()
		close(c.done)
	})
}

// serve dials the target for client and runs both directions.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	c := &conn{client: client, server: server, done: make(chan struct{})}
	p.mu.Lock()
	if p.mu.closed || p.mu.dropped {
		p.mu.Unlock()
		c.close()
		return
	}
	p.mu.conns[c] = struct{}{}
	p.mu.Unlock()
	p.accepted.Add(1)
	var wg sync.WaitGroup
	wg.Go(func() { p.pipe(c, 0, client, server) })
	wg.Go(func() { p.pipe(c, 1, server, client) })
	wg.Wait()
	c.close()
	p.mu.Lock()
	delete(p.mu.conns, c)
	p.mu.Unlock()
}

// chunk is bytes read and when they are due at the other side.
type chunk struct {
	b   []byte // nil: the end of the direction
	due time.Time
}

// pipe runs direction i of c, from src to dst: a reader that queues
// chunks with their due times, and this goroutine, which writes them
// when due unless the direction is blackholed then. When src ends the
// connection closes, unless a blackhole swallows the end: then it stays
// open until Heal or Close.
func (p *Proxy) pipe(c *conn, i int, src, dst net.Conn) {
	q := make(chan chunk, queueLen)
	stop := make(chan struct{})
	var reader sync.WaitGroup
	defer reader.Wait() // it ends: c is closed when pipe returns
	defer close(stop)
	reader.Go(func() {
		buf := make([]byte, chunkSize)
		for {
			n, err := src.Read(buf)
			_, delay := p.state(i)
			due := time.Now().Add(delay)
			if n > 0 {
				select {
				case q <- chunk{bytes.Clone(buf[:n]), due}:
				case <-stop:
					return
				}
			}
			if err != nil {
				select {
				case q <- chunk{nil, due}:
				case <-stop:
				}
				return
			}
		}
	})
	for ch := range q {
		if wait := time.Until(ch.due); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-c.done:
				t.Stop()
				return
			}
		}
		blackholed, _ := p.state(i)
		if blackholed {
			c.lost.Store(true)
			p.swallowed[i].Add(uint64(len(ch.b)))
			if ch.b == nil {
				<-c.done // keep the other direction going; Heal or Close ends it
				return
			}
			continue
		}
		if ch.b == nil {
			c.close()
			return
		}
		if _, err := dst.Write(ch.b); err != nil {
			c.close()
			return
		}
		p.forwarded[i].Add(uint64(len(ch.b)))
	}
}

var _ io.Closer = (*Proxy)(nil)
