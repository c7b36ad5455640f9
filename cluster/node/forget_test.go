package node

import (
	"context"
	"errors"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/warren-mq/warren/cluster/nodenet"
	"github.com/warren-mq/warren/queues"
)

// Ensure a node that lost its disk is forgotten for good: Forget refuses
// a running node, itself and strangers; once the node is down it leaves
// the catalog's raft group and the peers, the two left change the
// catalog together and not alone, a restart keeps all of it, and the
// node started again under its name with an empty directory is refused
// by its peers without disturbing them.
func TestForget(t *testing.T) {
	c := newTestCluster(t, "a", "b", "c")
	eventually(t, "the default user on every node", func() bool {
		for _, tn := range c.nodes {
			if _, err := tn.b.GetUser("guest"); err != nil {
				return false
			}
		}
		return true
	})
	a, b := c.nodes["a"], c.nodes["b"]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	eventually(t, "a reaches c", func() bool { return slices.Contains(a.n.Peers(), Peer{"c", true}) })
	if err := a.n.Forget(ctx, "c"); !errors.Is(err, ErrNodeRunning) {
		t.Fatalf("forget a running node: %v, want ErrNodeRunning", err)
	}
	if err := a.n.Forget(ctx, "a"); !errors.Is(err, ErrForgetSelf) {
		t.Fatalf("forget itself: %v, want ErrForgetSelf", err)
	}
	if err := a.n.Forget(ctx, "zz"); !errors.Is(err, ErrUnknownNode) {
		t.Fatalf("forget a stranger: %v, want ErrUnknownNode", err)
	}

	c.stop("c")
	c.nodes["c"].dir = t.TempDir() // its disk is lost
	eventually(t, "c down for a", func() bool { return slices.Contains(a.n.Peers(), Peer{"c", false}) })
	if err := a.n.Forget(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if err := a.n.Forget(ctx, "c"); !errors.Is(err, ErrUnknownNode) {
		t.Fatalf("forget twice: %v, want ErrUnknownNode", err)
	}
	two := []uint64{NodeID("a"), NodeID("b")}
	slices.Sort(two)
	for _, tn := range []*testNode{a, b} {
		eventually(t, tn.name+" applies the removal", func() bool {
			m, err := tn.n.host.Members(CatalogGroup)
			return err == nil && slices.Equal(m, two) && tn.b.NodeForgotten("c")
		})
		if got := tn.n.Peers(); len(got) != 1 || got[0].Name == "c" {
			t.Fatalf("%s's peers: %v", tn.name, got)
		}
	}
	retry(t, "a change on b", func() error { return b.b.AddUser("after", "pw") })

	// Under its old name with an empty directory: refused, and harmless.
	nc := c.start("c")
	dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
	_, err := nc.n.net.Dial(dctx, "a", nodenet.LaneStream)
	dcancel()
	if !errors.Is(err, nodenet.ErrForgotten) {
		t.Fatalf("the new c dialing a: %v, want ErrForgotten", err)
	}
	retry(t, "a change on a with the new c up", func() error { return a.b.AddUser("after2", "pw") })
	if _, err := nc.b.GetUser("after2"); err == nil {
		t.Fatal("the forgotten node got a catalog change")
	}
	c.stop("c")

	// Two of two: with b down, a changes nothing.
	c.stop("b")
	if err := a.b.AddVHost("v"); !errors.Is(err, queues.ErrNotApplied) {
		t.Fatalf("a change with one of two members: %v, want ErrNotApplied", err)
	}
	// Restarts keep the membership and the forgotten node.
	c.stop("a")
	a, b = c.start("a"), c.start("b")
	retry(t, "a change after restarts", func() error { return a.b.AddUser("restarted", "pw") })
	for _, tn := range []*testNode{a, b} {
		m, err := tn.n.host.Members(CatalogGroup)
		if err != nil || !slices.Equal(m, two) {
			t.Fatalf("%s after a restart: members %v %v", tn.name, m, err)
		}
		if got := tn.n.Peers(); len(got) != 1 || got[0].Name == "c" {
			t.Fatalf("%s's peers after a restart: %v", tn.name, got)
		}
	}
}

// Ensure a node with a new name and an empty directory joins a running
// cluster (after a node was forgotten, the others restarted with it in
// their peers): it asks to be added, catches up with the catalog, takes
// changes, and counts for the majority.
func TestJoin(t *testing.T) {
	c := newTestCluster(t, "a", "b", "c")
	eventually(t, "the default user on every node", func() bool {
		for _, tn := range c.nodes {
			if _, err := tn.b.GetUser("guest"); err != nil {
				return false
			}
		}
		return true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.stop("c")
	eventually(t, "c down for a", func() bool { return slices.Contains(c.nodes["a"].n.Peers(), Peer{"c", false}) })
	if err := c.nodes["a"].n.Forget(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	retry(t, "a user before d", func() error { return c.nodes["a"].b.AddUser("before-d", "pw") })

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.peers["d"] = ln.Addr().String()
	ln.Close()
	c.nodes["d"] = &testNode{name: "d", dir: t.TempDir(), join: true}
	for _, name := range []string{"a", "b"} {
		c.stop(name)
		c.start(name)
	}
	d := c.start("d")
	three := []uint64{NodeID("a"), NodeID("b"), NodeID("d")}
	slices.Sort(three)
	eventually(t, "d to join and catch up", func() bool {
		m, err := d.n.host.Members(CatalogGroup)
		_, errU := d.b.GetUser("before-d")
		return err == nil && slices.Equal(m, three) && errU == nil
	})
	retry(t, "a change on d", func() error { return d.b.AddUser("from-d", "pw") })
	a := c.nodes["a"]
	eventually(t, "from-d on a", func() bool { _, err := a.b.GetUser("from-d"); return err == nil })
	// Three members again: one down is fine.
	c.stop("b")
	retry(t, "a change with b down", func() error { return a.b.AddUser("b-down", "pw") })
	// A restart of d keeps it a member (its group has state: Join is
	// ignored).
	c.stop("d")
	d = c.start("d")
	retry(t, "a change on d after its restart", func() error { return d.b.AddUser("d-restarted", "pw") })
}
