package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// A stream declared with x-initial-cluster-size 2 and a quorum queue
// with x-quorum-initial-group-size 2 on n1, in a cluster of three: n1
// leads both and n2 (the node holding the fewest so far, by name) is the
// other member; n3 knows them but holds no copy. Metadata lists n2 as
// the only replica. n1 killed, the leadership of both moves to n2, the
// only member left; with two members both are needed to commit, so the
// messages are read back and new ones confirmed once n1 is back.
func TestClusterPlacementSize(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	nodes := startStreamCluster(t)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	_, ch1 := amqpChannel(t, n1)
	if _, err := ch1.QueueDeclare("s2", true, false, false, false,
		amqp091.Table{"x-queue-type": "stream", "x-initial-cluster-size": int32(2)}); err != nil {
		t.Fatal(err)
	}
	if _, err := ch1.QueueDeclare("q2", true, false, false, false,
		amqp091.Table{"x-queue-type": "quorum", "x-quorum-initial-group-size": int32(2)}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"s2", "q2"} {
		for _, n := range nodes {
			waitFor(t, n.name+" to know "+name, 10*time.Second, func() bool {
				_, ok := n.queuePlacement(t, name)
				return ok
			})
			if p, _ := n.queuePlacement(t, name); p.Leader != "n1" || !slices.Equal(p.Members, []string{"n1", "n2"}) {
				t.Fatalf("%s's placement of %s: %+v, want n1 leading n1, n2", n.name, name, p)
			}
		}
	}
	for _, sub := range []string{"streams", "queues"} {
		ents, err := os.ReadDir(filepath.Join(n3.dir, sub))
		if err != nil || len(ents) != 0 {
			t.Fatalf("n3's %s: %v %v, want no copy", sub, ents, err)
		}
	}

	env1 := streamEnv(t, n1)
	_, n1Port, _ := net.SplitHostPort(n1.stream)
	_, n2Port, _ := net.SplitHostPort(n2.stream)
	waitFor(t, "metadata: n1 leading, n2 its one replica", 15*time.Second, func() bool {
		meta, err := env1.StreamMetaData("s2")
		return err == nil && meta.Leader != nil && meta.Leader.Port == n1Port &&
			len(meta.Replicas) == 1 && meta.Replicas[0].Port == n2Port
	})
	publishConfirmed(t, env1, "s2", 0, 300)
	publishQueueConfirmed(t, n1, "q2", 0, 200)

	n1.kill()
	killed := time.Now()
	for _, name := range []string{"s2", "q2"} {
		leader := waitLeader(t, []*clusterNode{n2, n3}, name, "n1")
		if leader != "n2" {
			t.Fatalf("%s: leader %s after n1's kill, want n2", name, leader)
		}
	}
	t.Logf("n2 leads both %v after n1's kill", time.Since(killed).Round(100*time.Millisecond))
	env2 := streamEnv(t, n2)
	waitFor(t, "metadata: n2 leading", 15*time.Second, func() bool {
		meta, err := env2.StreamMetaData("s2")
		return err == nil && meta.Leader != nil && meta.Leader.Port == n2Port
	})

	n1.start(t)
	for i, m := range consumeAll(t, n2, "s2", 300) {
		if want := fmt.Sprintf("m-%04d", i); m != want {
			t.Fatalf("s2 on n2: message %d = %q, want %q", i, m, want)
		}
	}
	checkRun(t, "q2 on n2", consumeQueue(t, n2, "q2", 200, true), 0)
	publishConfirmed(t, env2, "s2", 300, 400)
	publishQueueConfirmed(t, n2, "q2", 200, 250)
	if meta, err := env2.StreamMetaData("s2"); err != nil || len(meta.Replicas) > 1 {
		t.Fatalf("metadata after n1's return: %+v %v", meta, err)
	}
}
