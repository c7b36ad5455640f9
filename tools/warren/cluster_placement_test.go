package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	streamamqp "github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/message"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
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
	env3 := streamEnv(t, n3) // a node that is not a member answers the same
	waitFor(t, "n3's metadata: n1 leading, n2 its one replica", 15*time.Second, func() bool {
		meta, err := env3.StreamMetaData("s2")
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

	// n3 restarted still knows both and opens no copy.
	n3.kill()
	n3.start(t)
	for _, name := range []string{"s2", "q2"} {
		waitFor(t, "n3 to show "+name+" led by n2", 15*time.Second, func() bool {
			p, ok := n3.queuePlacement(t, name)
			return ok && p.Leader == "n2" && slices.Equal(p.Members, []string{"n1", "n2"})
		})
	}
	for _, sub := range []string{"streams", "queues"} {
		if ents, err := os.ReadDir(filepath.Join(n3.dir, sub)); err != nil || len(ents) != 0 {
			t.Fatalf("n3's %s after its restart: %v %v", sub, ents, err)
		}
	}
}

// A super stream created through the stream protocol on a cluster of
// three spreads its partitions' leaders over the three nodes; the Go
// client's super stream producer (Metadata per partition) publishes to
// each leader with confirms, and its consumer reads every message back.
func TestClusterSuperStreamLeaders(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	nodes := startStreamCluster(t)
	env := streamEnv(t, nodes[0])
	waitFor(t, "the super stream declared", 15*time.Second, func() bool {
		err := env.DeclareSuperStream("inv", stream.NewPartitionsOptions(3))
		return err == nil || err == stream.StreamAlreadyExists
	})
	leaders := map[string]bool{}
	for i := range 3 {
		name := fmt.Sprintf("inv-%d", i)
		waitFor(t, nodes[2].name+" to know "+name, 10*time.Second, func() bool {
			_, ok := nodes[2].queuePlacement(t, name)
			return ok
		})
		p, _ := nodes[2].queuePlacement(t, name)
		if len(p.Members) != 3 {
			t.Fatalf("%s: placement %+v", name, p)
		}
		leaders[p.Leader] = true
	}
	if len(leaders) != 3 {
		t.Fatalf("partition leaders %v, want three nodes", leaders)
	}

	const total = 300
	p, err := env.NewSuperStreamProducer("inv", stream.NewSuperStreamProducerOptions(
		stream.NewHashRoutingStrategy(func(m message.StreamMessage) string {
			return m.GetApplicationProperties()["key"].(string)
		})))
	if err != nil {
		t.Fatalf("NewSuperStreamProducer: %v", err)
	}
	defer p.Close()
	confirms := p.NotifyPublishConfirmation(total)
	for i := range total {
		m := streamamqp.NewMessage(fmt.Appendf(nil, "m-%04d", i))
		m.ApplicationProperties = map[string]any{"key": fmt.Sprintf("k%d", i)}
		if err := p.Send(m); err != nil {
			t.Fatalf("Send: %v", err)
		}
	}
	perPartition := map[string]int{}
	for n := 0; n < total; {
		select {
		case pc := <-confirms:
			for _, st := range pc.ConfirmationStatus {
				if !st.IsConfirmed() {
					t.Fatalf("not confirmed on %s", pc.Partition)
				}
				perPartition[pc.Partition]++
				n++
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%d of %d confirms", n, total)
		}
	}
	if len(perPartition) != 3 {
		t.Errorf("confirms per partition %v: the keys should reach all three", perPartition)
	}

	var mu sync.Mutex
	got := map[string]bool{}
	c, err := env.NewSuperStreamConsumer("inv", func(_ stream.ConsumerContext, m *streamamqp.Message) {
		mu.Lock()
		got[string(m.GetData())] = true
		mu.Unlock()
	}, stream.NewSuperStreamConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	if err != nil {
		t.Fatalf("NewSuperStreamConsumer: %v", err)
	}
	defer c.Close()
	waitFor(t, fmt.Sprintf("%d messages consumed", total), 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == total
	})
}
