package streamproto

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/message"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
	"github.com/spaolacci/murmur3"
	"github.com/warren-mq/warren/queues"
)

// ssMessage is a message carrying its routing key as an application
// property, as super stream applications do.
func ssMessage(key string, i int) message.StreamMessage {
	m := amqp.NewMessage([]byte(fmt.Sprintf("%s/%03d", key, i)))
	m.ApplicationProperties = map[string]any{"key": key}
	return m
}

func ssKey(m message.StreamMessage) string { return m.GetApplicationProperties()["key"].(string) }

// ssPublish sends msgs through a super stream producer and waits for every
// confirm.
func ssPublish(t *testing.T, env *stream.Environment, name string, strategy stream.RoutingStrategy, msgs []message.StreamMessage) {
	t.Helper()
	p, err := env.NewSuperStreamProducer(name, stream.NewSuperStreamProducerOptions(strategy))
	if err != nil {
		t.Fatalf("NewSuperStreamProducer: %v", err)
	}
	defer p.Close()
	confirms := p.NotifyPublishConfirmation(len(msgs))
	for _, m := range msgs {
		if err := p.Send(m); err != nil {
			t.Fatalf("Send: %v", err)
		}
	}
	got := 0
	timeout := time.After(15 * time.Second)
	for got < len(msgs) {
		select {
		case pc := <-confirms:
			for _, c := range pc.ConfirmationStatus {
				if !c.IsConfirmed() {
					t.Fatalf("message not confirmed on %s", pc.Partition)
				}
				got++
			}
		case <-timeout:
			t.Fatalf("%d of %d confirms", got, len(msgs))
		}
	}
}

// ssReadPartition reads n bodies from one partition from first.
func ssReadPartition(t *testing.T, env *stream.Environment, partition string, n int) []string {
	t.Helper()
	got, _ := consume(t, env, partition, stream.OffsetSpecification{}.First(), n)
	return got
}

// Ensure a super stream declared by the Go client has its partitions in
// order, that hash routing lands every key on the partition the client's
// MurmurHash3 picks (all of a key's messages there, in order), and that a
// super stream consumer reads every partition.
func TestSuperStreamHashRouting(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	env := newEnv(t, tb)
	if err := env.DeclareSuperStream("orders", stream.NewPartitionsOptions(3)); err != nil {
		t.Fatalf("DeclareSuperStream: %v", err)
	}
	parts, err := env.QueryPartitions("orders")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"orders-0", "orders-1", "orders-2"}
	if !slices.Equal(parts, want) {
		t.Fatalf("partitions %v, want %v", parts, want)
	}
	for i, p := range want {
		if r, err := env.QueryRoute("orders", fmt.Sprint(i)); err != nil || !slices.Equal(r, []string{p}) {
			t.Fatalf("route %d = %v, %v", i, r, err)
		}
	}
	const keys, perKey = 20, 10
	var msgs []message.StreamMessage
	for i := 0; i < perKey; i++ {
		for k := 0; k < keys; k++ {
			msgs = append(msgs, ssMessage(fmt.Sprintf("k%02d", k), i))
		}
	}
	ssPublish(t, env, "orders", stream.NewHashRoutingStrategy(ssKey), msgs)

	// Where each key should be, computed independently of the client.
	expect := map[string][]string{}
	for k := 0; k < keys; k++ {
		key := fmt.Sprintf("k%02d", k)
		h := murmur3.Sum32WithSeed([]byte(key), 104729)
		p := want[h%3]
		for i := 0; i < perKey; i++ {
			expect[p] = append(expect[p], fmt.Sprintf("%s/%03d", key, i))
		}
	}
	total := 0
	for _, p := range want {
		got := ssReadPartition(t, env, p, len(expect[p]))
		// Per key order is kept; the interleaving of keys follows the sends.
		slices.Sort(got)
		exp := slices.Clone(expect[p])
		slices.Sort(exp)
		if !slices.Equal(got, exp) {
			t.Fatalf("partition %s holds %v, want %v", p, got, exp)
		}
		if st, err := env.StreamStats(p); err != nil {
			t.Fatal(err)
		} else if c, _ := st.CommittedChunkId(); c < 0 {
			t.Fatalf("partition %s empty", p)
		}
		total += len(got)
	}
	if total != keys*perKey {
		t.Fatalf("%d messages in partitions", total)
	}

	// A super stream consumer gets everything, each key in order.
	var mu sync.Mutex
	perKeySeen := map[string][]string{}
	count := 0
	done := make(chan struct{})
	c, err := env.NewSuperStreamConsumer("orders", func(ctx stream.ConsumerContext, m *amqp.Message) {
		mu.Lock()
		defer mu.Unlock()
		key := m.ApplicationProperties["key"].(string)
		perKeySeen[key] = append(perKeySeen[key], string(m.GetData()))
		count++
		if count == keys*perKey {
			close(done)
		}
	}, stream.NewSuperStreamConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	if err != nil {
		t.Fatalf("NewSuperStreamConsumer: %v", err)
	}
	defer c.Close()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatalf("super stream consumer got %d of %d", count, keys*perKey)
	}
	mu.Lock()
	defer mu.Unlock()
	for key, seen := range perKeySeen {
		if !slices.IsSorted(seen) || len(seen) != perKey {
			t.Fatalf("key %s: %v", key, seen)
		}
	}
}

// Ensure key routing follows the binding keys through Route, an unknown key
// routes nowhere, and deleting the super stream deletes its partitions.
func TestSuperStreamKeyRoutingAndDelete(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	env := newEnv(t, tb)
	if err := env.DeclareSuperStream("regions", stream.NewBindingsOptions([]string{"eu", "us", "asia"})); err != nil {
		t.Fatalf("DeclareSuperStream: %v", err)
	}
	parts, err := env.QueryPartitions("regions")
	if err != nil || !slices.Equal(parts, []string{"regions-eu", "regions-us", "regions-asia"}) {
		t.Fatalf("partitions %v, %v", parts, err)
	}
	if r, err := env.QueryRoute("regions", "us"); err != nil || !slices.Equal(r, []string{"regions-us"}) {
		t.Fatalf("route us = %v, %v", r, err)
	}
	if r, err := env.QueryRoute("regions", "mars"); err != nil || len(r) != 0 {
		t.Fatalf("route mars = %v, %v", r, err)
	}
	var msgs []message.StreamMessage
	for i := 0; i < 5; i++ {
		for _, k := range []string{"eu", "us", "asia"} {
			msgs = append(msgs, ssMessage(k, i))
		}
	}
	ssPublish(t, env, "regions", stream.NewKeyRoutingStrategy(ssKey), msgs)
	for _, k := range []string{"eu", "us", "asia"} {
		got := ssReadPartition(t, env, "regions-"+k, 5)
		want := []string{k + "/000", k + "/001", k + "/002", k + "/003", k + "/004"}
		if !slices.Equal(got, want) {
			t.Fatalf("regions-%s holds %v", k, got)
		}
	}
	// Declaring it again is accepted by the client (0x05 is swallowed);
	// the partitions are untouched.
	if err := env.DeclareSuperStream("regions", stream.NewBindingsOptions([]string{"eu", "us", "asia"})); err != nil {
		t.Fatalf("redeclare: %v", err)
	}
	if err := env.DeleteSuperStream("regions"); err != nil {
		t.Fatalf("DeleteSuperStream: %v", err)
	}
	if _, err := env.QueryPartitions("regions"); !errors.Is(err, stream.StreamDoesNotExist) {
		t.Fatalf("partitions after delete: %v", err)
	}
	for _, k := range []string{"eu", "us", "asia"} {
		if ok, err := env.StreamExists("regions-" + k); err != nil || ok {
			t.Fatalf("partition regions-%s exists=%v after delete (%v)", k, ok, err)
		}
	}
	if err := env.DeleteSuperStream("regions"); !errors.Is(err, stream.StreamDoesNotExist) {
		t.Fatalf("delete twice: %v", err)
	}
}

// Ensure a super stream whose partition name is taken is refused whole
// (nothing half-made is left), and super streams survive a restart.
func TestSuperStreamValidationAndRestart(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	env := newEnv(t, tb)
	if err := env.DeclareStream("taken-1", nil); err != nil {
		t.Fatal(err)
	}
	err := env.DeclareSuperStream("taken", stream.NewPartitionsOptions(3))
	if err != nil {
		t.Fatalf("the client swallows 0x05, got %v", err)
	}
	if _, err := env.QueryPartitions("taken"); !errors.Is(err, stream.StreamDoesNotExist) {
		t.Fatalf("half-made super stream: %v", err)
	}
	for _, p := range []string{"taken-0", "taken-2"} {
		if ok, _ := env.StreamExists(p); ok {
			t.Fatalf("partition %s left behind", p)
		}
	}
	if err := env.DeclareSuperStream("kept", stream.NewPartitionsOptions(2)); err != nil {
		t.Fatal(err)
	}
	env.Close()
	dir := tb.dir
	tb.stop()
	tb2 := startBroker(t, brokerOpts{dir: dir})
	env2 := newEnv(t, tb2)
	if parts, err := env2.QueryPartitions("kept"); err != nil || !slices.Equal(parts, []string{"kept-0", "kept-1"}) {
		t.Fatalf("after restart %v, %v", parts, err)
	}
}

// Ensure super stream commands check permissions on the super stream and
// every partition.
func TestSuperStreamPermissions(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	if err := tb.broker.AddUser("limited", "pw"); err != nil {
		t.Fatal(err)
	}
	// May configure and use only names starting with "mine".
	if err := tb.broker.SetPermissions("limited", "/", queues.Permissions{Configure: "^mine", Write: "^mine", Read: "^mine"}); err != nil {
		t.Fatal(err)
	}
	admin := newEnv(t, tb)
	if err := admin.DeclareSuperStream("theirs", stream.NewPartitionsOptions(2)); err != nil {
		t.Fatal(err)
	}
	env := newEnv(t, tb, func(o *stream.EnvironmentOptions) { o.SetUser("limited").SetPassword("pw") })
	if err := env.DeclareSuperStream("mine", stream.NewPartitionsOptions(2)); err != nil {
		t.Fatalf("allowed declare: %v", err)
	}
	if parts, err := env.QueryPartitions("mine"); err != nil || len(parts) != 2 {
		t.Fatalf("own partitions %v, %v", parts, err)
	}
	if r, err := env.QueryRoute("mine", "1"); err != nil || !slices.Equal(r, []string{"mine-1"}) {
		t.Fatalf("own route %v, %v", r, err)
	}
	if err := env.DeclareSuperStream("other", stream.NewPartitionsOptions(2)); !errors.Is(err, stream.CodeAccessRefused) {
		t.Fatalf("declare without configure permission: %v", err)
	}
	if _, err := env.QueryPartitions("theirs"); !errors.Is(err, stream.CodeAccessRefused) {
		t.Fatalf("partitions without permission: %v", err)
	}
	if _, err := env.QueryRoute("theirs", "0"); !errors.Is(err, stream.CodeAccessRefused) {
		t.Fatalf("route without permission: %v", err)
	}
	if err := env.DeleteSuperStream("theirs"); !errors.Is(err, stream.CodeAccessRefused) {
		t.Fatalf("delete without permission: %v", err)
	}
	if parts, err := admin.QueryPartitions("theirs"); err != nil || len(parts) != 2 {
		t.Fatalf("refused delete changed the super stream: %v, %v", parts, err)
	}
}
