package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/segment"
)

// testNode is a broker and its cluster node, in this process.
type testNode struct {
	name, dir string
	join      bool // Config.Join
	b         *queues.Broker
	n         *Node
}

type testCluster struct {
	t     testing.TB
	peers map[string]string
	nodes map[string]*testNode
}

func newTestCluster(t testing.TB, names ...string) *testCluster {
	c := &testCluster{t: t, peers: map[string]string{}, nodes: map[string]*testNode{}}
	for _, name := range names {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		c.peers[name] = ln.Addr().String()
		ln.Close()
		c.nodes[name] = &testNode{name: name, dir: t.TempDir()}
	}
	for _, name := range names {
		c.start(name)
	}
	t.Cleanup(func() {
		for _, tn := range c.nodes {
			c.stop(tn.name)
		}
	})
	return c
}

func (c *testCluster) start(name string) *testNode {
	c.t.Helper()
	tn := c.nodes[name]
	b, err := queues.Open(filepath.Join(tn.dir, "broker"), queues.Options{Clustered: true, NodeName: name})
	if err != nil {
		c.t.Fatal(err)
	}
	n, err := Start(Config{
		Name: name, Peers: c.peers, Secret: "s", Dir: filepath.Join(tn.dir, "raft"), Broker: b,
		Tick: 10 * time.Millisecond, Timeout: 300 * time.Millisecond, CommandTimeout: 5 * time.Second,
		SnapshotEntries: 10, CatchUpEntries: 1, QueueFrames: 16, Join: tn.join,
	})
	if err != nil {
		b.Close()
		c.t.Fatal(err)
	}
	tn.b, tn.n = b, n
	return tn
}

func (c *testCluster) stop(name string) {
	tn := c.nodes[name]
	if tn.n == nil {
		return
	}
	tn.n.Close()
	tn.b.Close()
	tn.n, tn.b = nil, nil
}

func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// retry runs f until the cluster applies it, as a client retries a 503:
// a change made while a leader was just lost is refused.
func retry(t testing.TB, what string, f func() error) {
	t.Helper()
	for range 100 {
		err := f()
		if err == nil {
			return
		}
		if !errors.Is(err, queues.ErrNotApplied) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: never applied", what)
}

// changesWithoutC makes 40 users, an exchange and deletes vhost doomed
// while node c is down.
func changesWithoutC(t *testing.T, c *testCluster) {
	a := c.nodes["a"]
	for i := range 40 {
		retry(t, fmt.Sprintf("user %d with c down", i), func() error { return a.b.AddUser(fmt.Sprintf("u%02d", i), "pw") })
	}
	retry(t, "declare late", func() error {
		return a.b.DeclareExchange(queues.ExchangeDef{VHost: "/", Name: "late", Type: "fanout", Durable: true})
	})
	retry(t, "delete doomed", func() error { return c.nodes["b"].b.DeleteVHost("doomed") })
}

// caughtUp waits for node c to hold what changesWithoutC made, and
// checks that it takes changes again.
func caughtUp(t *testing.T, c *testCluster, cn *testNode) {
	t.Helper()
	eventually(t, "c to catch up", func() bool {
		_, errU := cn.b.GetUser("u39")
		_, errX := cn.b.Exchange("/", "late")
		return errU == nil && errX == nil && !cn.b.VHostExists("doomed")
	})
	for i := range 40 {
		if _, err := cn.b.GetUser(fmt.Sprintf("u%02d", i)); err != nil {
			t.Errorf("c lacks u%02d: %v", i, err)
		}
	}
	if applied, err := cn.b.CatalogApplied(); err != nil || applied == 0 {
		t.Errorf("c's applied index %d %v", applied, err)
	}
	retry(t, "a change on c", func() error { return cn.b.AddUser("from-c", "pw") })
	a := c.nodes["a"]
	eventually(t, "from-c on a", func() bool {
		_, err := a.b.GetUser("from-c")
		return err == nil
	})
}

func startWithDoomed(t *testing.T) *testCluster {
	c := newTestCluster(t, "a", "b", "c")
	eventually(t, "the default user on every node", func() bool {
		for _, tn := range c.nodes {
			if _, err := tn.b.GetUser("guest"); err != nil {
				return false
			}
		}
		return true
	})
	retry(t, "add doomed", func() error { return c.nodes["a"].b.AddVHost("doomed") })
	eventually(t, "vhost doomed on c", func() bool { return c.nodes["c"].b.VHostExists("doomed") })
	return c
}

// A node restarted after missing changes catches up (from the log, or a
// snapshot when the log no longer has what it missed); what the others
// deleted meanwhile is gone.
func TestCatchUpAfterRestart(t *testing.T) {
	c := startWithDoomed(t)
	c.stop("c")
	changesWithoutC(t, c)
	caughtUp(t, c, c.start("c"))
}

// A node that missed more than the log keeps gets the catalog from a
// snapshot: the leader compacted its log long before, and the frames it
// sent while the node was down were dropped once the small queue was
// full, so the node cannot catch up from them. (A node that lost its
// disk may not come back under its name: raft's safety rests on what
// each member has acknowledged. It must be forgotten first.)
//
// A stream and a quorum queue declared while the node was down come with
// the snapshot: the node opens its copies as a replica and pulls the
// stream's log from its leader.
func TestCatchUpFromSnapshot(t *testing.T) {
	c := startWithDoomed(t)
	c.stop("c")
	a := c.nodes["a"]
	retry(t, "create stream st", func() error { return a.b.CreateStream("/", "st", nil) })
	retry(t, "declare quorum queue qq", func() error {
		_, _, _, err := a.b.DeclareQueue(queues.DeclareOptions{Def: queues.QueueDef{VHost: "/", Name: "qq", Durable: true,
			Args: map[string]any{"x-queue-type": "quorum"}}})
		return err
	})
	st, err := a.b.Stream("/", "st")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := st.Append(context.Background(), "", osiris.Message{Entry: segment.AppendSimpleEntry(nil, fmt.Appendf(nil, "m%d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	changesWithoutC(t, c)
	cn := c.start("c")
	caughtUp(t, c, cn)
	if cn.n.catalog.restored.Load() == 0 {
		t.Error("c caught up without a snapshot: the test no longer covers RestoreCatalog")
	}
	for _, name := range []string{"st", "qq"} {
		p, ok := cn.b.PlacementOf("/", name)
		if !ok || p.Leader != "a" || len(p.Members) != 3 {
			t.Fatalf("c's placement of %s: %+v %v", name, p, ok)
		}
		if _, err := cn.b.ReplicatedLog("/", name); err != nil {
			t.Fatalf("c has no copy of %s: %v", name, err)
		}
	}
	want := st.Stats().NextOffset
	eventually(t, "c's copy of st to hold the 5 messages", func() bool {
		s, err := cn.b.Stream("/", "st")
		return err == nil && s.Stats().NextOffset == want
	})
}

// With two of three nodes down, a change fails with ErrNotApplied
// within the command timeout, and the peers are reported down.
func TestNoQuorum(t *testing.T) {
	c := newTestCluster(t, "a", "b", "c")
	a := c.nodes["a"]
	eventually(t, "the default user on a", func() bool { _, err := a.b.GetUser("guest"); return err == nil })
	c.stop("b")
	c.stop("c")
	eventually(t, "b and c unreachable from a", func() bool {
		for _, p := range a.n.Peers() {
			if p.Running {
				return false
			}
		}
		return true
	})
	err := a.b.AddVHost("v")
	if !errors.Is(err, queues.ErrNotApplied) {
		t.Fatalf("AddVHost without a quorum: %v, want ErrNotApplied", err)
	}
}

// BenchmarkReplicatedChange is one catalog change (an exchange declared,
// then deleted) made on one node of three on loopback and applied there:
// the raft round trip and the syncs of log and catalog.
func BenchmarkReplicatedChange(b *testing.B) {
	c := newTestCluster(b, "a", "b", "c")
	a := c.nodes["a"]
	eventually(b, "the default user on a", func() bool { _, err := a.b.GetUser("guest"); return err == nil })
	x := queues.ExchangeDef{VHost: "/", Name: "bench", Type: "fanout", Durable: true}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			retry(b, "declare", func() error { return a.b.DeclareExchange(x) })
		} else {
			retry(b, "delete", func() error { return a.b.DeleteExchange("/", "bench", false) })
		}
	}
}
