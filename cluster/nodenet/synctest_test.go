package nodenet

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// memNet is an in-memory network of net.Pipe connections, so that
// nodes can run under testing/synctest, where sockets would stop the
// fake clock.
type memNet struct {
	mu        sync.Mutex
	listeners map[string]*memListener
	wrap      func(net.Conn) net.Conn // when set, wraps the dialer's end
}

// memListener is a listener on a memNet address.
type memListener struct {
	m     *memNet
	addr  string
	conns chan net.Conn // the accepting ends of dialed pipes
	done  chan struct{} // closed by Close
	once  sync.Once
}

type memAddr string

func (a memAddr) Network() string { return "mem" }
func (a memAddr) String() string  { return string(a) }

func (m *memNet) listen(addr string) *memListener {
	l := &memListener{m: m, addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.listeners == nil {
		m.listeners = map[string]*memListener{}
	}
	m.listeners[addr] = l
	return l
}

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *memListener) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.m.mu.Lock()
		if l.m.listeners[l.addr] == l {
			delete(l.m.listeners, l.addr)
		}
		l.m.mu.Unlock()
	})
	return nil
}

func (l *memListener) Addr() net.Addr { return memAddr(l.addr) }

// dial connects to the listener on addr, or fails as a closed port does.
func (m *memNet) dial(ctx context.Context, addr string) (net.Conn, error) {
	m.mu.Lock()
	l := m.listeners[addr]
	m.mu.Unlock()
	refused := &net.OpError{Op: "dial", Net: "mem", Err: syscall.ECONNREFUSED}
	if l == nil {
		return nil, refused
	}
	c, s := net.Pipe()
	select {
	case l.conns <- s:
		if m.wrap != nil {
			return m.wrap(c), nil
		}
		return c, nil
	case <-l.done:
		return nil, refused
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Ensure, on a fake clock with the default timings, that an idle link
// stays reachable on heartbeats alone, that a stopped peer is reported
// unreachable within a heartbeat interval of the timeout, that frames
// queued for it meanwhile are dropped, and that it is reachable again
// once it restarts.
func TestReachabilityFakeClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &memNet{}
		peers := map[string]string{"n1": "n1", "n2": "n2"}
		start := func(name string) (*Net, chan string) {
			events := make(chan string, 10)
			n, err := New(Config{
				Cluster:       "test",
				Name:          name,
				Peers:         peers,
				Listener:      m.listen(name),
				Dial:          m.dial,
				OnReachable:   func(p string) { trySend(events, "+"+p) },
				OnUnreachable: func(p string) { trySend(events, "-"+p) },
				Logger:        slog.New(slog.DiscardHandler),
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := n.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { n.Close() }) // in the bubble: a failed test ends too
			return n, events
		}
		want := func(events chan string, e string) {
			t.Helper()
			if got := <-events; got != e {
				t.Fatalf("event %q, want %q", got, e)
			}
		}
		noEvent := func(events chan string) {
			t.Helper()
			synctest.Wait()
			select {
			case e := <-events:
				t.Fatalf("unexpected event %q", e)
			default:
			}
		}
		n1, ev1 := start("n1")
		n2, ev2 := start("n2")
		want(ev1, "+n2")
		want(ev2, "+n1")

		time.Sleep(time.Minute) // idle: heartbeats keep the link up
		noEvent(ev1)
		noEvent(ev2)
		if s, _ := n1.PeerStats("n2"); !s.Reachable || s.Links != 1 || s.Received < 100 {
			t.Fatalf("n1's stats for n2 after an idle minute: %+v", s)
		}

		stopped := time.Now()
		n2.Close()
		want(ev1, "-n2")
		// Last heard at most one interval before the stop; reported at
		// the first watchdog tick past the timeout.
		if d := time.Since(stopped); d <= DefaultTimeout-DefaultTimeout/4 || d > DefaultTimeout+DefaultTimeout/4 {
			t.Fatalf("unreachable %v after the stop, want within a heartbeat interval of %v", d, DefaultTimeout)
		}

		// Frames for an unreachable peer are queued, then dropped at the
		// next watchdog tick.
		if err := n1.Send("n2", LaneRaft, []byte("stale")); err != nil {
			t.Fatal(err)
		}
		if s, _ := n1.PeerStats("n2"); s.Queued != 1 {
			t.Fatalf("n1's stats for n2 after a Send: %+v, want 1 queued", s)
		}
		time.Sleep(DefaultTimeout / 4)
		synctest.Wait()
		if s, _ := n1.PeerStats("n2"); s.Queued != 0 || s.Dropped != 1 {
			t.Fatalf("n1's stats for n2 a heartbeat interval later: %+v, want 1 dropped", s)
		}

		time.Sleep(time.Minute) // n1 redials all along
		_, ev2 = start("n2")    // Cleanup closes it
		want(ev1, "+n2")
		want(ev2, "+n1")
		if s, _ := n1.PeerStats("n2"); s.Links != 2 {
			t.Fatalf("n1's stats for n2 after the restart: %+v, want 2 links", s)
		}
	})
}

// slowConn writes at 2 MiB/s on the fake clock.
type slowConn struct{ net.Conn }

func (c slowConn) Write(b []byte) (int, error) {
	const chunk = 64 << 10
	n := 0
	for len(b) > 0 {
		time.Sleep(chunk * time.Second / (2 << 20))
		w, err := c.Conn.Write(b[:min(chunk, len(b))])
		n += w
		if err != nil {
			return n, err
		}
		b = b[w:]
	}
	return n, nil
}

// Ensure a frame that takes longer than the timeout to arrive (10 MiB at
// 2 MiB/s: 5 s) keeps its sender reachable while it arrives.
func TestLargeFrameSlowLink(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &memNet{wrap: func(c net.Conn) net.Conn { return slowConn{c} }}
		peers := map[string]string{"n1": "n1", "n2": "n2"}
		events := make(chan string, 100)
		got := make(chan int, 1)
		var nets []*Net
		for _, name := range []string{"n1", "n2"} {
			n, err := New(Config{
				Cluster:  "test",
				Name:     name,
				Peers:    peers,
				Listener: m.listen(name),
				Dial:     m.dial,
				// Not blocking: a failing run's flapping must not stop Close.
				OnReachable:   func(p string) { trySend(events, name+"+"+p) },
				OnUnreachable: func(p string) { trySend(events, name+"-"+p) },
				Logger:        slog.New(slog.DiscardHandler),
			})
			if err != nil {
				t.Fatal(err)
			}
			n.Handle(LaneRaft, func(_ string, p []byte) { got <- len(p) })
			if err := n.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { n.Close() }) // in the bubble: a failed test ends too
			nets = append(nets, n)
		}
		<-events
		<-events
		start := time.Now()
		if err := nets[0].Send("n2", LaneRaft, make([]byte, 10<<20)); err != nil {
			t.Fatal(err)
		}
		select {
		case n := <-got:
			if n != 10<<20 {
				t.Fatalf("got %d bytes", n)
			}
		case e := <-events:
			t.Fatalf("event %q during the transfer", e)
		case <-time.After(time.Minute):
			t.Fatal("no frame after a minute")
		}
		if d := time.Since(start); d < 5*time.Second {
			t.Fatalf("10 MiB arrived in %v: the link is not slow", d)
		}
		synctest.Wait()
		select {
		case e := <-events:
			t.Fatalf("event %q during the transfer", e)
		default:
		}
	})
}

// trySend sends v on ch unless ch is full.
func trySend[T any](ch chan T, v T) {
	select {
	case ch <- v:
	default:
	}
}
