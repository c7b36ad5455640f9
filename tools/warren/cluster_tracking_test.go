package main

import (
	"fmt"
	"sync"
	"testing"
	"time"

	streamamqp "github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
	"github.com/warren-mq/warren/internal/histcheck"
)

// A named consumer's stored offset and a named producer's deduplication
// survive the loss of the stream's leader: they travel in the log's
// tracking, so the new leader answers QueryOffset with the stored
// offset, and a producer of the same name re-sending ids 500..1099
// adds only 1000..1099: every copy then holds exactly 1100 messages in
// order. An auto-committing consumer after the failover stores its last
// offset through the new leader too.
func TestClusterStreamTrackingFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	nodes := startStreamCluster(t)
	c := &proxiedCluster{nodes: nodes} // for streamLeader; no proxies here
	n1 := nodes[0]
	const name = "ts"
	env1 := streamEnv(t, n1) // declared here: n1 leads it
	waitFor(t, "the stream declared", 15*time.Second, func() bool {
		err := env1.DeclareStream(name, &stream.StreamOptions{})
		return err == nil || err == stream.StreamAlreadyExists
	})
	waitFor(t, "metadata with n1 leading two replicas", 15*time.Second, func() bool {
		meta, err := env1.StreamMetaData(name)
		return err == nil && c.streamLeader(env1, name) == n1 && len(meta.Replicas) == 2
	})
	var h histcheck.History
	publishIDs(t, env1, name, "p-%04d", &h, 0, 1000) // producer "test-producer"

	// The consumer "reader" reads everything and stores the offset of
	// p-0599, where the client puts it (a replica, by Metadata).
	var mu sync.Mutex
	var got []string
	stored := int64(-1)
	cons, err := env1.NewConsumer(name, func(ctx stream.ConsumerContext, m *streamamqp.Message) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, string(m.GetData()))
		if string(m.GetData()) == "p-0599" {
			stored = ctx.Consumer.GetOffset()
			if err := ctx.Consumer.StoreOffset(); err != nil {
				t.Errorf("store offset: %v", err)
			}
		}
	}, stream.NewConsumerOptions().SetConsumerName("reader").SetManualCommit().
		SetOffset(stream.OffsetSpecification{}.First()))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the consumer to read 1000 messages", 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= 1000
	})
	cons.Close()
	mu.Lock()
	want := stored
	mu.Unlock()
	t.Logf("stored offset %d for p-0599", want)

	// Every copy holds the offset: QueryOffset on a node answers from
	// its own copy.
	envs := map[*clusterNode]*stream.Environment{n1: env1}
	for _, n := range nodes[1:] {
		envs[n] = streamEnv(t, n)
	}
	for _, n := range nodes {
		waitFor(t, n.name+"'s copy to hold the stored offset", 10*time.Second, func() bool {
			o, err := envs[n].QueryOffset("reader", name)
			return err == nil && o == want
		})
	}

	n1.kill()
	killed := time.Now()
	envA := envs[nodes[1]]
	var lead *clusterNode
	waitFor(t, "a new leader", 30*time.Second, func() bool {
		lead = c.streamLeader(envA, name)
		return lead != nil && lead != n1
	})
	t.Logf("%s leads %v after the kill", lead.name, time.Since(killed).Round(100*time.Millisecond))
	envL := envs[lead]
	if o, err := envL.QueryOffset("reader", name); err != nil || o != want {
		t.Errorf("QueryOffset through the new leader: %d, %v; want %d", o, err, want)
	}
	if seq, err := envL.QuerySequence("test-producer", name); err != nil || seq != 999 {
		t.Errorf("QuerySequence through the new leader: %d, %v; want 999", seq, err)
	}

	// The same producer name re-sends 500..1099: 500..999 are duplicates.
	publishIDs(t, envL, name, "p-%04d", &h, 500, 1100)
	n1.start(t)
	for _, n := range nodes {
		checkCopy(t, &h, name, n, readAll(t, n, name, 1100), func(i int) string { return fmt.Sprintf("p-%04d", i) }, 1100)
	}
	// A consumer resuming after the stored offset reads from p-0600.
	var resumed []string
	rc, err := envL.NewConsumer(name, func(_ stream.ConsumerContext, m *streamamqp.Message) {
		mu.Lock()
		resumed = append(resumed, string(m.GetData()))
		mu.Unlock()
	}, stream.NewConsumerOptions().SetConsumerName("reader").SetManualCommit().
		SetOffset(stream.OffsetSpecification{}.Offset(want+1)))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	waitFor(t, "the resumed consumer to read 500 messages", 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(resumed) >= 500
	})
	mu.Lock()
	if resumed[0] != "p-0600" || resumed[499] != "p-1099" {
		t.Errorf("resumed consumer read %q … %q, want p-0600 … p-1099", resumed[0], resumed[499])
	}
	mu.Unlock()
	// An auto-committing consumer (every 100 messages, and on close)
	// after the failover: its last offset reaches the new leader.
	var autoLast int64
	autoN := 0
	ac, err := envL.NewConsumer(name, func(ctx stream.ConsumerContext, m *streamamqp.Message) {
		mu.Lock()
		autoN++
		autoLast = ctx.Consumer.GetOffset()
		mu.Unlock()
	}, stream.NewConsumerOptions().SetConsumerName("auto").
		SetAutoCommit(stream.NewAutoCommitStrategy().SetCountBeforeStorage(100).SetFlushInterval(time.Second)).
		SetOffset(stream.OffsetSpecification{}.First()))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the auto-committing consumer to read 1100 messages", 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return autoN >= 1100
	})
	ac.Close()
	mu.Lock()
	last := autoLast
	mu.Unlock()
	waitFor(t, "the auto-committed offset through the new leader", 10*time.Second, func() bool {
		o, err := envL.QueryOffset("auto", name)
		return err == nil && o == last
	})
	for _, v := range h.Check() {
		t.Errorf("history: %+v", v)
	}
}
