package queues

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// x-initial-cluster-size and x-quorum-initial-group-size choose how many
// nodes hold a stream or quorum queue: the declaring node (its leader)
// and the nodes holding the fewest of that kind, ties by name; every
// node by default or when the size is above the node count; below 1 is
// refused. A node that is not a member knows the placement (declare,
// bindings, routing) but holds no copy and cannot be made leader.
func TestInitialClusterSize(t *testing.T) {
	bs, _ := openCluster(t, 3)
	n1, n2, n3 := bs[0], bs[1], bs[2]
	members := func(name string) string {
		t.Helper()
		p, ok := n2.PlacementOf("/", name)
		if !ok {
			t.Fatalf("no placement of %s", name)
		}
		return p.Leader + ":" + strings.Join(p.Members, ",")
	}
	must(t, n1.CreateStream("/", "s1", map[string]string{"initial-cluster-size": "2"}))
	must(t, n1.CreateStream("/", "s2", map[string]string{"initial-cluster-size": "2"}))
	must(t, n3.CreateStream("/", "s3", map[string]string{"initial-cluster-size": "1"}))
	must(t, n2.CreateStream("/", "all", map[string]string{"initial-cluster-size": "7"}))
	must(t, n2.CreateStream("/", "default", nil))
	_, _, _, err := n3.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "q1", Durable: true,
		Args: map[string]any{"x-queue-type": "quorum", "x-quorum-initial-group-size": int32(2)}}})
	must(t, err)
	_, _, _, err = n3.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "q2", Durable: true,
		Args: map[string]any{"x-queue-type": "quorum", "x-quorum-initial-group-size": int64(2)}}})
	must(t, err)
	for name, want := range map[string]string{
		"s1": "n1:n1,n2", "s2": "n1:n1,n3", "s3": "n3:n3", "all": "n2:n1,n2,n3", "default": "n2:n1,n2,n3",
		"q1": "n3:n1,n3", "q2": "n3:n2,n3",
	} {
		if got := members(name); got != want {
			t.Errorf("%s: leader:members %s, want %s", name, got, want)
		}
	}
	if err := n1.CreateStream("/", "zero", map[string]string{"initial-cluster-size": "0"}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("initial-cluster-size 0: %v", err)
	}
	_, _, _, err = n1.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "qz", Durable: true,
		Args: map[string]any{"x-queue-type": "quorum", "x-quorum-initial-group-size": int32(0)}}})
	if code(err) != CodePreconditionFailed {
		t.Errorf("x-quorum-initial-group-size 0: %v", err)
	}

	// n3 is no member of s1, n2 none of q1: no copy, no directory, but
	// the declare, the bindings and the routing work there.
	streamDirs := func(b *Broker) int {
		ents, _ := os.ReadDir(b.dataDir + "/streams")
		return len(ents)
	}
	if got := streamDirs(n3); got != 4 { // s2, s3, all, default
		t.Errorf("n3 holds %d stream directories, want 4", got)
	}
	if _, err := n3.Stream("/", "s1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("n3's copy of s1: %v", err)
	}
	if _, err := n2.ReplicatedLog("/", "q1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("n2's copy of q1: %v", err)
	}
	if _, _, _, err := n3.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "s1", Durable: true,
		Args: map[string]any{"x-queue-type": "stream", "x-initial-cluster-size": int64(2)}}}); err != nil {
		t.Errorf("redeclare of s1 on n3: %v", err)
	}
	if _, _, _, err := n3.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "s1", Durable: true}}); code(err) != CodePreconditionFailed {
		t.Errorf("redeclare of s1 as a classic queue on n3: %v", err)
	}
	must(t, n3.Bind(BindingDef{VHost: "/", Source: "amq.direct", DestKind: DestQueue, Dest: "s1", Key: "k"}))
	must(t, n2.Bind(BindingDef{VHost: "/", Source: "amq.direct", DestKind: DestQueue, Dest: "q1", Key: "k"}))
	for i, b := range bs {
		names, err := b.Route("/", "amq.direct", []string{"k"}, nil, nil)
		slices.Sort(names)
		if err != nil || !slices.Equal(names, []string{"q1", "s1"}) {
			t.Errorf("n%d routes k to %v, %v", i+1, names, err)
		}
	}
	if d, ok := n3.Destination("/", "s1"); !ok || d.away == nil {
		t.Errorf("n3's destination s1: %+v %v", d, ok)
	}

	// Leadership never goes to a node that is not a member.
	must(t, n2.MoveStreamLeader("/", "s1", "n3", 2))
	must(t, n1.MoveQueueLeader("/", "q1", "n2", 2))
	if got := members("s1"); got != "n1:n1,n2" {
		t.Errorf("s1 after a move to a non-member: %s", got)
	}
	if got := members("q1"); got != "n3:n1,n3" {
		t.Errorf("q1 after a move to a non-member: %s", got)
	}
	must(t, n2.MoveStreamLeader("/", "s1", "n2", 2))
	if got := members("s1"); got != "n2:n1,n2" {
		t.Errorf("s1 after a move to n2: %s", got)
	}

	// Deleted from a node that is not a member, it is gone everywhere.
	must(t, n3.DeleteStream("/", "s1"))
	if _, err := n2.DeleteQueue("/", "q1", nil, false, false); err != nil {
		t.Fatal(err)
	}
	for i, b := range bs {
		if _, ok := b.PlacementOf("/", "s1"); ok {
			t.Errorf("n%d still places s1", i+1)
		}
		if _, ok := b.PlacementOf("/", "q1"); ok {
			t.Errorf("n%d still places q1", i+1)
		}
		if names, _ := b.Route("/", "amq.direct", []string{"k"}, nil, nil); len(names) != 0 {
			t.Errorf("n%d still routes k to %v", i+1, names)
		}
	}
}

// Super stream partitions (CreateStreamBalanced) spread their leaders:
// each goes to the node leading the fewest streams, this node first on
// a tie, then by name; a partition with a balanced leader locator does
// the same through CreateStream.
func TestCreateStreamBalanced(t *testing.T) {
	bs, _ := openCluster(t, 3)
	n2 := bs[1]
	var leaders []string
	for i := range 3 {
		name := fmt.Sprintf("ss-%d", i)
		must(t, n2.CreateStreamBalanced("/", name, nil))
		p, _ := n2.PlacementOf("/", name)
		leaders = append(leaders, p.Leader)
	}
	if !slices.Equal(leaders, []string{"n2", "n1", "n3"}) {
		t.Errorf("partition leaders %v, want n2, n1, n3", leaders)
	}
	must(t, bs[0].CreateStream("/", "local", nil)) // client-local: n1
	must(t, bs[0].CreateStream("/", "bal", map[string]string{"queue-leader-locator": "balanced"}))
	for name, want := range map[string]string{"local": "n1", "bal": "n2"} {
		if p, _ := n2.PlacementOf("/", name); p.Leader != want {
			t.Errorf("%s led by %s, want %s", name, p.Leader, want)
		}
	}
}
