package queues

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

// A quorum queue declared in a cluster is every node's: its record
// (members, leader, epoch) is the same everywhere, the leader runs it,
// the others know it (declare, bindings) and refuse to take its messages
// or consumers, naming the leader; a leader move and a deletion reach
// every node.
func TestReplicatedQuorumQueues(t *testing.T) {
	bs, _ := openCluster(t, 3)
	b1, b2, b3 := bs[0], bs[1], bs[2]
	quorum := map[string]any{"x-queue-type": "quorum"}
	q, _, _, err := b1.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "qq", Durable: true, Args: quorum}})
	must(t, err)
	if q == nil || !q.Def().LogState || q.Def().Type != QueueQuorum {
		t.Fatalf("declare on n1: queue %v", q)
	}
	for i, b := range bs {
		def, p, ok := b.PlacedQueue("/", "qq")
		if !ok || p.Leader != "n1" || p.Epoch != 1 || !slices.Equal(p.Members, []string{"n1", "n2", "n3"}) || def.Type != QueueQuorum {
			t.Fatalf("node %d: placement %+v %v", i+1, p, ok)
		}
		if _, err := os.Stat(b.queueDir(true, def.ID)); err != nil {
			t.Fatalf("node %d: its copy of the log: %v", i+1, err)
		}
	}

	// Another node answers a redeclare, checks equivalence, and refuses
	// what only the leader can do.
	q2, _, _, err := b2.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "qq", Durable: true, Args: quorum}})
	if err != nil || q2 != nil {
		t.Fatalf("redeclare on n2: %v, %v", q2, err)
	}
	_, _, _, err = b2.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "qq", Durable: true,
		Args: map[string]any{"x-queue-type": "quorum", "x-max-length": int32(5)}}})
	if code(err) != CodePreconditionFailed {
		t.Fatalf("inequivalent redeclare on n2: %v", err)
	}
	if _, err := b2.Queue("/", "qq"); code(err) != CodeNotFound || !strings.Contains(err.Error(), "led by node 'n1'") {
		t.Fatalf("n2.Queue: %v", err)
	}
	must(t, b2.Bind(BindingDef{VHost: "/", Source: "amq.direct", DestKind: DestQueue, Dest: "qq", Key: "k"}))
	for i, b := range bs {
		names, err := b.Route("/", "amq.direct", []string{"k"}, nil, nil)
		if err != nil || !slices.Equal(names, []string{"qq"}) {
			t.Fatalf("node %d routes k to %v, %v", i+1, names, err)
		}
	}
	d, ok := b2.Destination("/", "qq")
	if !ok {
		t.Fatal("n2: no destination qq")
	}
	var pubErr error
	Publish([]Destination{d}, &Publishing{Record: EncodeRecord(nil, &Message{Body: []byte("x")})}, func(err error) { pubErr = err })
	if code(pubErr) != CodeNotFound {
		t.Fatalf("publish on n2: %v", pubErr)
	}

	// The leadership moves to n2 (what the coordinator does when n1 is
	// lost): n1 stops running the queue.
	must(t, b3.MoveQueueLeader("/", "qq", "n2", 2))
	if _, err := b1.Queue("/", "qq"); code(err) != CodeNotFound || !strings.Contains(err.Error(), "led by node 'n2'") {
		t.Fatalf("n1.Queue after the move: %v", err)
	}
	must(t, b3.MoveQueueLeader("/", "qq", "n3", 2)) // stale epoch: no change
	if _, p, _ := b1.PlacedQueue("/", "qq"); p.Leader != "n2" || p.Epoch != 2 {
		t.Fatalf("placement after a stale move: %+v", p)
	}

	// Deleted anywhere, it is gone everywhere, with its copies.
	var dirs []string
	for _, b := range bs {
		def, _, _ := b.PlacedQueue("/", "qq")
		dirs = append(dirs, b.queueDir(true, def.ID))
	}
	if _, err := b3.DeleteQueue("/", "qq", nil, false, false); err != nil {
		t.Fatal(err)
	}
	for i, b := range bs {
		if _, _, ok := b.PlacedQueue("/", "qq"); ok {
			t.Fatalf("node %d still has qq", i+1)
		}
		if _, err := os.Stat(dirs[i]); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("node %d: its copy is still there: %v", i+1, err)
		}
		if names, _ := b.Route("/", "amq.direct", []string{"k"}, nil, nil); len(names) != 0 {
			t.Fatalf("node %d still routes to %v", i+1, names)
		}
	}
}

// code is err's AMQP reply code, 0 for none.
func code(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return int(e.Code)
	}
	return 0
}
