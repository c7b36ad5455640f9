package faultproxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/warren-mq/warren/internal/testutil"
)

// TestMain fails the run if a test leaves a goroutine of this package
// behind.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaks := testutil.LeakedGoroutines("internal/faultproxy."); leaks != "" {
			fmt.Fprintf(os.Stderr, "leaked goroutines:\n%s\n", leaks)
			code = 1
		}
	}
	os.Exit(code)
}

// wait is how long a test waits for something that must happen.
const wait = 10 * time.Second

// echo is an echo server that counts the bytes it received and stamps
// when each read returned.
type echo struct {
	ln       net.Listener
	received atomic.Uint64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
	reads    []time.Time
}

func newEcho(t *testing.T) *echo {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echo{ln: ln}
	e.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.mu.Lock()
			e.conns = append(e.conns, c)
			e.mu.Unlock()
			e.wg.Go(func() {
				buf := make([]byte, 64<<10)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						e.mu.Lock()
						e.reads = append(e.reads, time.Now())
						e.mu.Unlock()
						e.received.Add(uint64(n))
						c.Write(buf[:n])
					}
					if err != nil {
						c.Close()
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		e.mu.Lock()
		for _, c := range e.conns {
			c.Close()
		}
		e.mu.Unlock()
		e.wg.Wait()
	})
	return e
}

// setup starts an echo server and a proxy to it.
func setup(t *testing.T) (*echo, *Proxy) {
	e := newEcho(t)
	p, err := New("127.0.0.1:0", e.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return e, p
}

func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes msg and reads it back.
func roundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(wait))
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if string(got) != msg {
		t.Fatalf("echo: got %q, want %q", got, msg)
	}
}

// waitFor polls cond until it holds, failing the test after wait.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", wait, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// wantEOF checks that c is closed by the other side.
func wantEOF(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(wait))
	n, err := c.Read(make([]byte, 1))
	if n != 0 || (err != io.EOF && !errors.Is(err, net.ErrClosed) && !isReset(err)) {
		t.Fatalf("read on a dropped connection: %d bytes, %v; want EOF", n, err)
	}
}

func isReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }

// wantOpen checks that c is neither closed nor given bytes: a short
// read deadline expires. (A close later than the deadline would pass
// unseen; Stats says the bytes were swallowed.)
func wantOpen(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	n, err := c.Read(make([]byte, 1))
	if n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read on a blackholed connection: %d bytes, %v; want a deadline", n, err)
	}
	c.SetReadDeadline(time.Time{})
}

// Ensure bytes pass both ways and are counted.
func TestForward(t *testing.T) {
	_, p := setup(t)
	c := dial(t, p)
	roundTrip(t, c, "hello")
	msg := string(bytes.Repeat([]byte("0123456789"), 100_000))
	roundTrip(t, c, msg)
	// A direction counts bytes after writing them: the echo may be
	// back first.
	want := uint64(5 + len(msg))
	waitFor(t, func() bool { s := p.Stats(); return s.Forwarded == [2]uint64{want, want} }, "the counts")
	if s := p.Stats(); s.Accepted != 1 || s.Open != 1 || s.Swallowed != [2]uint64{} {
		t.Fatalf("stats %+v", s)
	}
}

// Ensure Drop closes open connections and refuses new ones until Heal.
func TestDrop(t *testing.T) {
	_, p := setup(t)
	c := dial(t, p)
	roundTrip(t, c, "before")
	p.Drop()
	wantEOF(t, c)
	c2 := dial(t, p) // accepted, then closed
	wantEOF(t, c2)
	if s := p.Stats(); s.Refused != 1 {
		t.Fatalf("stats %+v, want 1 refused", s)
	}
	p.Heal()
	roundTrip(t, dial(t, p), "after")
}

// Ensure a blackhole both ways swallows bytes without closing, on an
// open connection and a new one, and Heal closes the connections that
// lost bytes while new ones work.
func TestBlackholeBoth(t *testing.T) {
	e, p := setup(t)
	c := dial(t, p)
	roundTrip(t, c, "before")
	p.Blackhole(Both)
	io.WriteString(c, "lost")
	waitFor(t, func() bool { return p.Stats().Swallowed[0] == 4 }, "4 bytes swallowed upstream")
	wantOpen(t, c)
	c2 := dial(t, p)
	io.WriteString(c2, "lost too")
	waitFor(t, func() bool { return p.Stats().Swallowed[0] == 12 }, "12 bytes swallowed upstream")
	wantOpen(t, c2)
	if got := e.received.Load(); got != 6 {
		t.Fatalf("the server received %d bytes, want the 6 of before", got)
	}
	p.Heal()
	wantEOF(t, c)
	wantEOF(t, c2)
	roundTrip(t, dial(t, p), "after")
}

// Ensure a one-way blackhole passes the other direction: upstream
// swallowed, the server hears nothing; downstream swallowed, the server
// hears and answers but the client gets nothing.
func TestBlackholeOneWay(t *testing.T) {
	t.Run("upstream", func(t *testing.T) {
		e, p := setup(t)
		c := dial(t, p)
		p.Blackhole(Upstream)
		io.WriteString(c, "ping")
		waitFor(t, func() bool { return p.Stats().Swallowed[0] == 4 }, "4 bytes swallowed upstream")
		wantOpen(t, c)
		if e.received.Load() != 0 {
			t.Fatal("the server received swallowed bytes")
		}
	})
	t.Run("downstream", func(t *testing.T) {
		e, p := setup(t)
		c := dial(t, p)
		p.Blackhole(Downstream)
		io.WriteString(c, "ping")
		waitFor(t, func() bool { return e.received.Load() == 4 }, "the server to receive 4 bytes")
		waitFor(t, func() bool { return p.Stats().Swallowed[1] == 4 }, "4 bytes swallowed downstream")
		wantOpen(t, c)
		// The connection lost bytes: Heal closes it.
		p.Heal()
		wantEOF(t, c)
	})
}

// Ensure a delay holds each direction's bytes at least that long and
// keeps their order. (Only a lower bound is checked: a slow machine
// cannot fail it.)
func TestDelay(t *testing.T) {
	e, p := setup(t)
	c := dial(t, p)
	const d = 100 * time.Millisecond
	p.Delay(Upstream, d)
	start := time.Now()
	roundTrip(t, c, "up")
	e.mu.Lock()
	arrived := e.reads[0]
	e.mu.Unlock()
	if arrived.Sub(start) < d {
		t.Fatalf("upstream bytes arrived after %v, want at least %v", arrived.Sub(start), d)
	}
	p.Delay(Both, 0)
	p.Delay(Downstream, d)
	start = time.Now()
	roundTrip(t, c, "down")
	if el := time.Since(start); el < d {
		t.Fatalf("round trip with a downstream delay took %v, want at least %v", el, d)
	}
	// Many small writes, delayed, come back whole and in order.
	p.Delay(Both, time.Millisecond)
	var want bytes.Buffer
	for i := range 500 {
		fmt.Fprintf(&want, "%d,", i)
	}
	go func() {
		for i := range 500 {
			fmt.Fprintf(c, "%d,", i)
		}
	}()
	got := make([]byte, want.Len())
	c.SetReadDeadline(time.Now().Add(wait))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("delayed writes came back as %q…", got[:40])
	}
	p.Heal()
	roundTrip(t, c, "healed")
}

// Ensure Close closes connections, even held by a delay, and a second
// Close says so.
func TestClose(t *testing.T) {
	_, p := setup(t)
	c := dial(t, p)
	p.Delay(Both, time.Hour)
	io.WriteString(c, "held")
	waitFor(t, func() bool { return p.Stats().Open == 1 }, "the connection")
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	wantEOF(t, c)
	if err := p.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v, want ErrClosed", err)
	}
}
