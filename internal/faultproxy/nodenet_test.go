package faultproxy_test

import (
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/warren-mq/warren/cluster/nodenet"
	"github.com/warren-mq/warren/internal/faultproxy"
)

// pair is two nodes whose one link (n1 dials n2) runs through a proxy.
type pair struct {
	proxy  *faultproxy.Proxy
	events map[string]chan string // node → "+peer" / "-peer"
}

func newPair(t *testing.T) *pair {
	var lns [2]net.Listener
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
	}
	proxy, err := faultproxy.New("127.0.0.1:0", lns[1].Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	p := &pair{proxy: proxy, events: map[string]chan string{}}
	for i, name := range []string{"n1", "n2"} {
		events := make(chan string, 100)
		p.events[name] = events
		n, err := nodenet.New(nodenet.Config{
			Cluster: "test",
			Name:    name,
			// n1 reaches n2 through the proxy.
			Peers:             map[string]string{"n1": lns[0].Addr().String(), "n2": proxy.Addr()},
			Listener:          lns[i],
			Timeout:           time.Second,
			HeartbeatInterval: 100 * time.Millisecond,
			HandshakeTimeout:  time.Second,
			RedialMax:         100 * time.Millisecond,
			OnReachable:       func(peer string) { events <- "+" + peer },
			OnUnreachable:     func(peer string) { events <- "-" + peer },
			Logger:            slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
	}
	p.want(t, "n1", "+n2")
	p.want(t, "n2", "+n1")
	return p
}

// want waits for node's next reachability event to be e.
func (p *pair) want(t *testing.T, node, e string) {
	t.Helper()
	select {
	case got := <-p.events[node]:
		if got != e {
			t.Fatalf("%s: event %q, want %q", node, got, e)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no event in 10s, want %q", node, e)
	}
}

// Ensure nodes linked through the proxy see a one-way partition as
// unreachability on both sides (the side that hears nothing first, then
// the other, whose redials cannot finish a handshake), and reconnect
// after Heal.
func TestNodenetOneWayPartition(t *testing.T) {
	p := newPair(t)
	p.proxy.Blackhole(faultproxy.Upstream) // n1 → n2 swallowed
	p.want(t, "n2", "-n1")
	p.want(t, "n1", "-n2")
	p.proxy.Heal()
	p.want(t, "n1", "+n2")
	p.want(t, "n2", "+n1")
}

// Ensure nodes see a dropped link as unreachability and reconnect after
// Heal.
func TestNodenetDrop(t *testing.T) {
	p := newPair(t)
	p.proxy.Drop()
	p.want(t, "n1", "-n2")
	p.want(t, "n2", "-n1")
	p.proxy.Heal()
	p.want(t, "n1", "+n2")
	p.want(t, "n2", "+n1")
}
