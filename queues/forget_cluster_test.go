package queues

import (
	"slices"
	"strings"
	"testing"
)

// Ensure forgetting a node records it on every node, drops it from every
// stream's and quorum queue's members (keeping leaders and epochs, and
// the open logs) while counting it as lost for majorities, keeps it out of what is declared after, refuses a
// leader move to it, tells the hook, and travels in catalog snapshots.
func TestForgetNode(t *testing.T) {
	bs, _ := openCluster(t, 3)
	b1 := bs[0]
	var told []string
	bs[1].SetOnForget(func(node string) { told = append(told, node) })
	quorum := map[string]any{"x-queue-type": "quorum"}
	_, _, _, err := b1.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "qq", Durable: true, Args: quorum}})
	must(t, err)
	must(t, b1.CreateStream("/", "s", nil))
	// n3 leads a queue of its own when it is lost.
	_, _, _, err = bs[2].DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "led-by-n3", Durable: true, Args: quorum}})
	must(t, err)

	must(t, b1.ForgetNode("n3"))
	must(t, b1.ForgetNode("n3")) // again: nothing changes
	two := []string{"n1", "n2"}
	for i, b := range bs {
		if got := b.ForgottenNodes(); !slices.Equal(got, []string{"n3"}) || !b.NodeForgotten("n3") || b.NodeForgotten("n2") {
			t.Fatalf("node %d: forgotten %v", i+1, got)
		}
		_, p, _ := b.PlacedQueue("/", "qq")
		if !slices.Equal(p.Members, two) || p.Leader != "n1" || p.Epoch != 1 || p.Lost != 1 {
			t.Fatalf("node %d: quorum queue placement %+v", i+1, p)
		}
		s, ok := b.PlacementOf("/", "s")
		if !ok || !slices.Equal(s.Members, two) || s.Leader != "n1" || s.Epoch != 1 || s.Lost != 1 {
			t.Fatalf("node %d: stream placement %+v", i+1, s)
		}
	}
	// The record keeps the lost leader until the coordinator moves the
	// leadership to a member left.
	if _, p, _ := b1.PlacedQueue("/", "led-by-n3"); !slices.Equal(p.Members, two) || p.Leader != "n3" {
		t.Fatalf("a queue n3 led: placement %+v", p)
	}
	must(t, b1.MoveQueueLeader("/", "led-by-n3", "n2", 2))
	if _, p, _ := b1.PlacedQueue("/", "led-by-n3"); p.Leader != "n2" || p.Epoch != 2 || p.Lost != 1 {
		t.Fatalf("a queue n3 led, moved: placement %+v", p)
	}
	if !slices.Equal(told, []string{"n3", "n3"}) {
		t.Fatalf("the hook was told %v, want n3 twice (each apply)", told)
	}
	if _, err := b1.Queue("/", "qq"); err != nil {
		t.Fatalf("the leader no longer runs the queue: %v", err)
	}

	// What is declared after leaves n3 out; leadership cannot go to it.
	_, _, _, err = bs[1].DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "qq2", Durable: true, Args: quorum}})
	must(t, err)
	if _, p, _ := b1.PlacedQueue("/", "qq2"); !slices.Equal(p.Members, two) || p.Lost != 0 {
		t.Fatalf("a queue declared after: members %v", p.Members)
	}
	must(t, b1.MoveQueueLeader("/", "qq", "n3", 5))
	if _, p, _ := b1.PlacedQueue("/", "qq"); p.Leader != "n1" {
		t.Fatalf("leadership moved to a forgotten node: %+v", p)
	}
	// A node restarted with the old peer list still leaves n3 out.
	bs[2].SetClusterNodes([]string{"n1", "n2", "n3"})
	must(t, bs[2].CreateStream("/", "s2", nil))
	if s, _ := b1.PlacementOf("/", "s2"); !slices.Equal(s.Members, two) {
		t.Fatalf("a stream declared after: members %v", s.Members)
	}

	snap, err := b1.CatalogSnapshot()
	must(t, err)
	if !strings.Contains(string(snap), `"forgotten":["n3"]`) {
		t.Fatalf("snapshot without the forgotten node: %s", snap)
	}
	fresh, _ := openCluster(t, 1)
	must(t, fresh[0].RestoreCatalog(snap))
	if !fresh[0].NodeForgotten("n3") {
		t.Fatal("a node restored from the snapshot does not know n3 is forgotten")
	}
}

// A forgotten node's classic queues go with it (they had no other copy),
// as RabbitMQ's forget_cluster_node removes them; the others' stay.
func TestForgetNodeClassicQueues(t *testing.T) {
	bs, _ := openCluster(t, 3)
	declareQ(t, bs[2], "on-n3", true)
	declareQ(t, bs[0], "on-n1", true)
	must(t, bs[0].execErr(&cmdForgetNode{Node: "n3"}))
	for i, b := range bs[:2] {
		if _, _, ok := b.PlacedQueue("/", "on-n3"); ok {
			t.Errorf("node %d still knows n3's classic queue", i+1)
		}
		if _, _, ok := b.PlacedQueue("/", "on-n1"); !ok {
			t.Errorf("node %d lost n1's classic queue", i+1)
		}
	}
}
