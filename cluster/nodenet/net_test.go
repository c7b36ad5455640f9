package nodenet

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestMain fails the run if a test leaves a goroutine of this package
// behind.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaks := leakedGoroutines("cluster/nodenet."); leaks != "" {
			fmt.Fprintf(os.Stderr, "leaked goroutines:\n%s\n", leaks)
			code = 1
		}
	}
	os.Exit(code)
}

// leakedGoroutines returns the stacks of other goroutines running code
// whose name contains suspect, giving exiting goroutines a bounded number
// of chances to finish. (The package imports nothing of Warren's, its
// tests included, so this is not internal/testutil's.)
func leakedGoroutines(suspect string) string {
	var leaks []string
	for try := 0; try < 1000; try++ {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		leaks = leaks[:0]
		for i, g := range strings.Split(string(buf), "\n\n") {
			if i > 0 && strings.Contains(g, suspect) && !strings.Contains(g, "leakedGoroutines") {
				leaks = append(leaks, g)
			}
		}
		if len(leaks) == 0 {
			return ""
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
	return strings.Join(leaks, "\n\n")
}

// wait is how long a test waits for something that must happen before
// it fails; nothing asserts that anything happens sooner.
const wait = 10 * time.Second

// logBuf collects a Net's log for assertions on refusal reasons.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitLog waits until l holds every one of subs on one line.
func waitLog(t *testing.T, l *logBuf, subs ...string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		for line := range strings.SplitSeq(l.String(), "\n") {
			ok := true
			for _, s := range subs {
				ok = ok && strings.Contains(line, s)
			}
			if ok {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for a log line with %q; log:\n%s", wait, subs, l)
		}
		time.Sleep(2 * time.Millisecond)
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
		time.Sleep(2 * time.Millisecond)
	}
}

// node is a Net in a test, with what it received and the reachability
// events it reported.
type node struct {
	name string
	addr string
	net  *Net
	log  *logBuf

	mu     sync.Mutex
	got    map[string][]uint64 // "from/lane" → sequence numbers received
	events chan string         // "+peer" reachable, "-peer" unreachable
}

func (nd *node) record(lane Lane) Handler {
	return func(from string, p []byte) {
		nd.mu.Lock()
		defer nd.mu.Unlock()
		k := fmt.Sprintf("%s/%d", from, lane)
		nd.got[k] = append(nd.got[k], binary.BigEndian.Uint64(p))
	}
}

func (nd *node) received(from string, lane Lane) []uint64 {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return append([]uint64(nil), nd.got[fmt.Sprintf("%s/%d", from, lane)]...)
}

// nextEvent returns nd's next reachability event.
func (nd *node) nextEvent(t *testing.T) string {
	t.Helper()
	select {
	case e := <-nd.events:
		return e
	case <-time.After(wait):
		t.Fatalf("%s: no reachability event in %v", nd.name, wait)
		return ""
	}
}

// wantEvents waits for nd's next events to be want, in any order.
func (nd *node) wantEvents(t *testing.T, want ...string) {
	t.Helper()
	left := map[string]bool{}
	for _, w := range want {
		left[w] = true
	}
	for len(left) > 0 {
		e := nd.nextEvent(t)
		if !left[e] {
			t.Fatalf("%s: event %q, want one of %v", nd.name, e, left)
		}
		delete(left, e)
	}
}

// testCluster is a set of nodes on loopback ports.
type testCluster struct {
	t     *testing.T
	peers map[string]string
	nodes map[string]*node
	tweak func(*Config)
}

// newCluster starts a node per name on free loopback ports; tweak, when
// not nil, changes each node's Config.
func newCluster(t *testing.T, tweak func(*Config), names ...string) *testCluster {
	c := &testCluster{t: t, peers: map[string]string{}, nodes: map[string]*node{}, tweak: tweak}
	lns := map[string]net.Listener{}
	for _, name := range names {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[name] = ln
		c.peers[name] = ln.Addr().String()
	}
	for _, name := range names {
		c.start(name, lns[name])
	}
	return c
}

// start starts node name on ln, or on its address when ln is nil (a
// restart), replacing any node of that name.
func (c *testCluster) start(name string, ln net.Listener) *node {
	t := c.t
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", c.peers[name]); err != nil {
			t.Fatal(err)
		}
	}
	nd := &node{name: name, addr: c.peers[name], log: &logBuf{}, got: map[string][]uint64{}, events: make(chan string, 100)}
	cfg := Config{
		Cluster:           "test",
		Name:              name,
		Peers:             c.peers,
		Secret:            "secret",
		Listener:          ln,
		Timeout:           time.Second, // short, for the reachability tests, but -race on 2 busy cores needs a few hundred ms
		HeartbeatInterval: 100 * time.Millisecond,
		RedialMin:         5 * time.Millisecond,
		RedialMax:         50 * time.Millisecond,
		OnReachable:       func(p string) { nd.events <- "+" + p },
		OnUnreachable:     func(p string) { nd.events <- "-" + p },
		Logger:            slog.New(slog.NewTextHandler(nd.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nd.net = n
	n.Handle(LaneRaft, nd.record(LaneRaft))
	n.Handle(LaneProxy, nd.record(LaneProxy))
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	c.nodes[name] = nd
	return nd
}

// connected waits until every node has reported every other reachable.
func (c *testCluster) connected() {
	for name, nd := range c.nodes {
		var want []string
		for other := range c.nodes {
			if other != name {
				want = append(want, "+"+other)
			}
		}
		nd.wantEvents(c.t, want...)
	}
}

// withPeers returns a Config tweak that adds peers at an address where
// nothing listens.
func withPeers(names ...string) func(*Config) {
	return func(cfg *Config) {
		for _, name := range names {
			withPeer(name, "127.0.0.1:1")(cfg)
		}
	}
}

// withPeer returns a Config tweak that adds a peer.
func withPeer(name, addr string) func(*Config) {
	return func(cfg *Config) {
		peers := maps.Clone(cfg.Peers)
		peers[name] = addr
		cfg.Peers = peers
	}
}

// seq is a payload carrying sequence number i.
func seq(i uint64) []byte { return binary.BigEndian.AppendUint64(nil, i) }

// send sends sequence number i, retrying while the queue is full.
func send(t *testing.T, n *Net, peer string, lane Lane, i uint64) {
	t.Helper()
	for {
		err := n.Send(peer, lane, seq(i))
		if err == nil {
			return
		}
		if !errors.Is(err, ErrQueueFull) {
			t.Fatalf("Send to %s: %v", peer, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// wantSeqs waits until nd has received 0..count-1 from peer on lane and
// checks they came in order, each once.
func wantSeqs(t *testing.T, nd *node, from string, lane Lane, count int) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for len(nd.received(from, lane)) < count {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s to receive %d frames from %s on lane %d, got %d; log:\n%s",
				wait, nd.name, count, from, lane, len(nd.received(from, lane)), nd.log)
		}
		time.Sleep(2 * time.Millisecond)
	}
	got := nd.received(from, lane)
	for i, s := range got {
		if s != uint64(i) {
			t.Fatalf("%s from %s lane %d: frame %d is sequence %d", nd.name, from, lane, i, s)
		}
	}
	if len(got) != count {
		t.Fatalf("%s from %s lane %d: %d frames, want %d", nd.name, from, lane, len(got), count)
	}
}

// Ensure three nodes exchange frames on two lanes, each lane's frames
// from each peer arriving in order, once.
func TestOrderPerLane(t *testing.T) {
	// A link that drops may lose frames; with a long timeout a busy
	// machine cannot make the watchdog drop one.
	c := newCluster(t, func(cfg *Config) { cfg.Timeout = time.Minute }, "n1", "n2", "n3")
	c.connected()
	const count = 3000
	var wg sync.WaitGroup
	for from, nd := range c.nodes {
		for to := range c.nodes {
			if to == from {
				continue
			}
			wg.Go(func() {
				for i := range uint64(count) {
					send(t, nd.net, to, LaneRaft, i)
					send(t, nd.net, to, LaneProxy, i)
				}
			})
		}
	}
	wg.Wait()
	for to, nd := range c.nodes {
		for from := range c.nodes {
			if from != to {
				wantSeqs(t, nd, from, LaneRaft, count)
				wantSeqs(t, nd, from, LaneProxy, count)
			}
		}
	}
}

// Ensure a lane connection is a byte stream both ways between the
// dialer and the peer's ConnHandler, whichever node of the pair dials.
func TestDialLane(t *testing.T) {
	c := newCluster(t, nil, "n1", "n2")
	for _, nd := range c.nodes {
		nd.net.HandleConn(LaneStream, func(from string, conn net.Conn) {
			defer conn.Close()
			fmt.Fprintf(conn, "%s->%s:", from, nd.name)
			io.Copy(conn, conn)
		})
	}
	for _, pair := range [][2]string{{"n1", "n2"}, {"n2", "n1"}} {
		conn, err := c.nodes[pair[0]].net.Dial(context.Background(), pair[1], LaneStream)
		if err != nil {
			t.Fatal(err)
		}
		payload := bytes.Repeat([]byte("x"), 1<<20)
		go conn.Write(payload)
		prefix := pair[0] + "->" + pair[1] + ":"
		got := make([]byte, len(prefix)+len(payload))
		if _, err := io.ReadFull(conn, got); err != nil {
			t.Fatal(err)
		}
		if string(got[:len(prefix)]) != prefix || !bytes.Equal(got[len(prefix):], payload) {
			t.Fatalf("%s dialing %s: got %q… back", pair[0], pair[1], got[:min(len(got), 20)])
		}
		conn.Close()
	}
	// A lane without a handler is refused.
	_, err := c.nodes["n1"].net.Dial(context.Background(), "n2", LaneProxy)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "(no handler for lane)") {
		t.Fatalf("Dial for a lane without a handler: got %v, want ErrRefused (no handler)", err)
	}
}

// Ensure a node refuses dialers of another cluster, with another secret,
// not in its peer map, or meaning another node, saying why on both
// sides.
func TestRefusals(t *testing.T) {
	c := newCluster(t, withPeers("n2", "n9"), "n1")
	n1 := c.nodes["n1"]
	n1.net.HandleConn(LaneStream, func(_ string, conn net.Conn) { conn.Close() })
	for _, tc := range []struct {
		name    string
		cfg     Config // rogue dialer; Peers and Logger filled in
		as      string // the name the rogue gives n1's address
		want    error
		wantLog string // in n1's log
	}{
		{"secret", Config{Cluster: "test", Name: "n2", Secret: "guess"}, "n1", ErrBadSecret, "bad secret"},
		{"no secret", Config{Cluster: "test", Name: "n2"}, "n1", ErrBadSecret, "bad secret"},
		{"cluster", Config{Cluster: "other", Name: "n2", Secret: "secret"}, "n1", ErrWrongCluster, "wrong cluster"},
		{"unknown", Config{Cluster: "test", Name: "intruder", Secret: "secret"}, "n1", ErrUnknownNode, "unknown node"},
		{"wrong node", Config{Cluster: "test", Name: "n2", Secret: "secret"}, "n3", ErrWrongNode, "wrong node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Peers = map[string]string{tc.as: n1.addr, cfg.Name: "127.0.0.1:1"}
			cfg.Logger = slog.New(slog.DiscardHandler)
			rogue, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer rogue.Close()
			conn, err := rogue.Dial(context.Background(), tc.as, LaneStream)
			if err == nil {
				conn.Close()
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Dial: got %v, want %v", err, tc.want)
			}
			waitLog(t, n1.log, "refused connection", "from="+cfg.Name, tc.wantLog)
		})
	}
	t.Run("direction", func(t *testing.T) {
		// n9 is n1's peer but sorts after it: n1 dials n9's link, never
		// the other way.
		cfg := Config{Cluster: "test", Name: "n9", Secret: "secret", Peers: map[string]string{"n1": n1.addr, "n9": "127.0.0.1:1"}, Logger: slog.New(slog.DiscardHandler)}
		rogue, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer rogue.Close()
		_, err = rogue.dial(context.Background(), rogue.peers["n1"], purposeLink, 0)
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "(wrong direction)") {
			t.Fatalf("a link from n9 to n1: got %v, want ErrRefused", err)
		}
	})
}

// Ensure a node answers another version with its own and closes, and
// closes on bytes that are not Warren's without answering.
func TestRefusalsRaw(t *testing.T) {
	c := newCluster(t, nil, "n1")
	n1 := c.nodes["n1"]
	for _, tc := range []struct {
		name    string
		send    []byte
		answer  []byte
		wantLog string
	}{
		{"version", appendPreamble(nil, 99), appendPreamble(nil, Version), "version mismatch"},
		{"magic", []byte("GET / HTTP/1.1\r\n\r\n"), nil, "bad magic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", n1.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.Write(tc.send)
			got, err := io.ReadAll(conn)
			if err != nil && !errors.Is(err, syscall.ECONNRESET) { // unread bytes at close: a reset
				t.Fatal(err)
			}
			if !bytes.Equal(got, tc.answer) {
				t.Fatalf("answer % x, want % x", got, tc.answer)
			}
			waitLog(t, n1.log, "refused connection", tc.wantLog)
		})
	}
}

// Ensure a dialer refuses an acceptor that cannot prove the secret.
func TestDialerChecksAcceptorProof(t *testing.T) {
	dconn, aconn := net.Pipe()
	defer dconn.Close()
	go func() {
		defer aconn.Close()
		// An acceptor that answers like n2 but never checks the proof.
		var pre [preambleLen]byte
		io.ReadFull(aconn, pre[:])
		readFrame(aconn, nil, maxHandshakePayload)
		a := hello{cluster: "c", from: "n2", to: "n1"}
		aconn.Write(a.appendTo(appendPreamble(nil, Version)))
		readFrame(aconn, nil, maxHandshakePayload)
		aconn.Write(appendProof(nil, make([]byte, macLen)))
	}()
	err := dialHandshake(dconn, &local{cluster: "c", name: "n1", secret: []byte("s")}, "n2", purposeLink, 0)
	if !errors.Is(err, ErrBadSecret) {
		t.Fatalf("got %v, want ErrBadSecret", err)
	}
}

// Ensure a link to a node whose secret differs never comes up, and both
// sides log why.
func TestLinkRefused(t *testing.T) {
	c := newCluster(t, func(cfg *Config) {
		if cfg.Name == "n1" {
			cfg.Secret = "other"
		}
	}, "n1", "n2")
	waitLog(t, c.nodes["n1"].log, "link down", "peer=n2", "bad secret")
	waitLog(t, c.nodes["n2"].log, "refused connection", "from=n1", "bad secret")
	if s, _ := c.nodes["n1"].net.PeerStats("n2"); s.Links != 0 || s.Reachable {
		t.Fatalf("n1's stats for n2: %+v, want no link", s)
	}
}

// Ensure a node restarted on its address is dialed again (n1 dials n2)
// and dials again (n2 dials n3), and frames flow both ways afterwards.
func TestRestart(t *testing.T) {
	c := newCluster(t, nil, "n1", "n2", "n3")
	c.connected()
	c.nodes["n2"].net.Close()
	n2 := c.start("n2", nil)
	n2.wantEvents(t, "+n1", "+n3")
	for _, other := range []string{"n1", "n3"} {
		waitFor(t, func() bool {
			s, _ := c.nodes[other].net.PeerStats("n2")
			return s.Links == 2
		}, other+"'s second link to n2")
	}
	const count = 100
	for _, other := range []string{"n1", "n3"} {
		for i := range uint64(count) {
			send(t, n2.net, other, LaneRaft, i)
			send(t, c.nodes[other].net, "n2", LaneRaft, 1000+i)
		}
	}
	for _, other := range []string{"n1", "n3"} {
		waitFor(t, func() bool { return len(n2.received(other, LaneRaft)) == count }, "frames at n2 from "+other)
		for i, s := range n2.received(other, LaneRaft) {
			if s != 1000+uint64(i) {
				t.Fatalf("n2 from %s: frame %d is %d", other, i, s)
			}
		}
		got := c.nodes[other].received("n2", LaneRaft)
		waitFor(t, func() bool { got = c.nodes[other].received("n2", LaneRaft); return len(got) >= count }, other+"'s frames from n2")
		for i, s := range got[len(got)-count:] {
			if s != uint64(i) {
				t.Fatalf("%s from the new n2: frame %d is %d", other, i, s)
			}
		}
	}
}

// Ensure a stopped peer is reported unreachable, and reachable again
// when it comes back, on both sides, in that order.
func TestReachability(t *testing.T) {
	c := newCluster(t, nil, "n1", "n2")
	c.connected()
	n1 := c.nodes["n1"]
	c.nodes["n2"].net.Close()
	if e := n1.nextEvent(t); e != "-n2" {
		t.Fatalf("n1's event after n2 stopped: %q, want -n2", e)
	}
	n2 := c.start("n2", nil)
	if e := n1.nextEvent(t); e != "+n2" {
		t.Fatalf("n1's event after n2 came back: %q, want +n2", e)
	}
	if e := n2.nextEvent(t); e != "+n1" {
		t.Fatalf("the new n2's first event: %q, want +n1", e)
	}
}

// Ensure a peer whose connection stays open but that sends nothing (not
// even heartbeats) is reported unreachable and its link closed.
func TestSilentPeer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c := newCluster(t, withPeer("n2", ln.Addr().String()), "n1")
	n1 := c.nodes["n1"]
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := acceptHandshake(conn, &local{cluster: "test", name: "n2", secret: []byte("secret")}); err != nil {
		t.Fatal(err)
	}
	if e := n1.nextEvent(t); e != "+n2" {
		t.Fatalf("got %q, want +n2", e)
	}
	if e := n1.nextEvent(t); e != "-n2" {
		t.Fatalf("got %q, want -n2", e)
	}
	// n1 closes the silent link: reading it ends.
	if _, err := io.Copy(io.Discard, conn); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatal(err)
	}
	waitLog(t, n1.log, "link closed", "peer=n2", "silent for")
}

// Ensure Send returns at once, dropping and counting, when the peer's
// queue is full because the peer stopped reading.
func TestStuckPeerSendDoesNotBlock(t *testing.T) {
	release := make(chan struct{})
	c := newCluster(t, func(cfg *Config) {
		cfg.QueueBytes = 1 << 20
		cfg.Timeout = time.Minute // the link stays up: only the queue stops Send
		cfg.HeartbeatInterval = time.Second
	}, "n1", "n2")
	t.Cleanup(func() { close(release) }) // before the nodes' Close, which waits for handlers
	c.connected()
	stuck := make(chan struct{}, 1)
	c.nodes["n2"].net.Handle(LaneRaft, func(string, []byte) {
		select {
		case stuck <- struct{}{}:
		default:
		}
		<-release
	})
	n1 := c.nodes["n1"].net
	// Send to a peer that reads nothing until the queue has stayed full
	// through 100 Sends in a row, each after a pause that lets the writer
	// empty it if it could: by then the socket buffers are full and the
	// writer is stuck. The loop ending shows that Send never waited.
	payload := make([]byte, 64<<10)
	full, inRow := 0, 0
	for i := 0; inRow < 100; i++ {
		if i == 100_000 {
			t.Fatal("6 GB sent to a peer that reads nothing, and the queue still drains")
		}
		err := n1.Send("n2", LaneRaft, payload)
		switch {
		case errors.Is(err, ErrQueueFull):
			full++
			inRow++
			time.Sleep(time.Millisecond)
		case err != nil:
			t.Fatal(err)
		default:
			inRow = 0
		}
	}
	<-stuck
	s, _ := n1.PeerStats("n2")
	if s.Dropped != uint64(full) || s.Queued == 0 {
		t.Fatalf("%d Sends full; n1's stats for n2: %+v, want that many dropped and some queued", full, s)
	}
	waitLog(t, c.nodes["n1"].log, "send queue full", "peer=n2")
}

// Ensure Send refuses what it cannot send.
func TestSendErrors(t *testing.T) {
	c := newCluster(t, func(cfg *Config) { cfg.MaxPayload = 1024 }, "n1", "n2")
	n := c.nodes["n1"].net
	for _, tc := range []struct {
		peer    string
		lane    Lane
		payload []byte
		want    error
	}{
		{"n3", LaneRaft, nil, ErrUnknownPeer},
		{"n1", LaneRaft, nil, ErrUnknownPeer},
		{"n2", LaneControl, nil, ErrInvalidLane},
		{"n2", msgHello, nil, ErrInvalidLane},
		{"n2", LaneRaft, make([]byte, 1025), ErrFrameTooLarge},
	} {
		if err := n.Send(tc.peer, tc.lane, tc.payload); !errors.Is(err, tc.want) {
			t.Errorf("Send(%s, %d, %d bytes): got %v, want %v", tc.peer, tc.lane, len(tc.payload), err, tc.want)
		}
	}
	n.Close()
	if err := n.Send("n2", LaneRaft, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Send after Close: got %v, want ErrClosed", err)
	}
}

// Ensure an acceptor takes a new link from a peer while it still holds
// the old one (the peer saw the old one die first, the acceptor did
// not), closes the old, and takes frames in order from the new; and
// that the real dialer's next link replaces that one again.
func TestLinkReplaced(t *testing.T) {
	c := newCluster(t, nil, "n1", "n2")
	c.connected()
	n1, n2 := c.nodes["n1"], c.nodes["n2"]
	const count = 100
	for i := range uint64(count) {
		send(t, n1.net, "n2", LaneRaft, i)
	}
	waitFor(t, func() bool { return len(n2.received("n1", LaneRaft)) == count }, "n2's first frames")

	// A second n1 link, from the test, while n1's own is up.
	conn, err := net.Dial("tcp", n2.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := dialHandshake(conn, &local{cluster: "test", name: "n1", secret: []byte("secret")}, "n2", purposeLink, 0); err != nil {
		t.Fatal(err)
	}
	var frames []byte
	for i := range uint64(count) {
		frames = appendFrameHeader(frames, LaneRaft, 8)
		frames = append(frames, seq(count+i)...)
	}
	if _, err := conn.Write(frames); err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, n2, "n1", LaneRaft, 2*count)
	waitLog(t, n2.log, "link closed", "peer=n1", "replaced by a new connection")

	// n1 saw its link closed and redials: the test's link goes in turn.
	for _, nd := range []*node{n1, n2} {
		other := map[string]string{"n1": "n2", "n2": "n1"}[nd.name]
		want := map[string]uint64{"n1": 2, "n2": 3}[nd.name]
		waitFor(t, func() bool { s, _ := nd.net.PeerStats(other); return s.Links == want }, fmt.Sprintf("%s's link %d", nd.name, want))
	}
	if _, err := io.Copy(io.Discard, conn); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatal(err) // n2 closed the test's link
	}
	for i := range uint64(count) {
		send(t, n1.net, "n2", LaneRaft, 2*count+i)
	}
	wantSeqs(t, n2, "n1", LaneRaft, 3*count)
}
