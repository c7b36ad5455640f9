package mgmt

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
)

func streamEnv(t *testing.T, tb *testBroker) *stream.Environment {
	t.Helper()
	env, err := stream.NewEnvironment(stream.NewEnvironmentOptions().SetUri("rabbitmq-stream://guest:guest@" + tb.streamAd + "/%2F"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.Close() })
	return env
}

func TestSuperStreamsThroughTheAPI(t *testing.T) {
	tb := startBroker(t)
	want(t, tb.guest("PUT", "/api/stream/super-streams/%2F/invoices", map[string]any{"partitions": 3, "arguments": map[string]any{"max-length-bytes": 1 << 20}}), 201)
	want(t, tb.guest("PUT", "/api/stream/super-streams/%2F/invoices", map[string]any{"partitions": 3}), 400)
	want(t, tb.guest("PUT", "/api/stream/super-streams/%2F/regions", map[string]any{"binding-keys": "eu,us"}), 201)
	want(t, tb.guest("PUT", "/api/stream/super-streams/%2F/bad", map[string]any{}), 400)
	want(t, tb.guest("PUT", "/api/stream/super-streams/%2F/bad", map[string]any{"partitions": 2, "binding_keys": "a"}), 400)

	env := streamEnv(t, tb)
	parts, err := env.QueryPartitions("invoices")
	if err != nil || !slices.Equal(parts, []string{"invoices-0", "invoices-1", "invoices-2"}) {
		t.Fatalf("QueryPartitions %v %v", parts, err)
	}
	route, err := env.QueryRoute("regions", "us")
	if err != nil || !slices.Equal(route, []string{"regions-us"}) {
		t.Fatalf("QueryRoute %v %v", route, err)
	}
	ss := tb.guest("GET", "/api/stream/super-streams/%2F", nil).list(t)
	if len(ss) != 2 || ss[0]["name"] != "invoices" || fmt.Sprint(ss[0]["binding_keys"]) != "[0 1 2]" ||
		ss[1]["name"] != "regions" || fmt.Sprint(ss[1]["partitions"]) != "[regions-eu regions-us]" {
		t.Fatalf("super streams %v", ss)
	}
	q := tb.guest("GET", "/api/queues/%2F/invoices-1", nil).obj(t)
	if q["type"] != "stream" || num(t, q["arguments"].(map[string]any)["x-max-length-bytes"]) != 1<<20 {
		t.Fatalf("partition %v", q)
	}
	want(t, tb.guest("DELETE", "/api/stream/super-streams/%2F/invoices", nil), 204)
	want(t, tb.guest("GET", "/api/queues/%2F/invoices-1", nil), 404)
	want(t, tb.guest("GET", "/api/stream/super-streams/%2F/invoices", nil), 404)
	if _, err := env.QueryPartitions("invoices"); err == nil {
		t.Fatal("partitions of a deleted super stream")
	}
}

func TestStreamOffsetsAndProducers(t *testing.T) {
	tb := startBroker(t)
	env := streamEnv(t, tb)
	if err := env.DeclareStream("events", nil); err != nil {
		t.Fatal(err)
	}
	p, err := env.NewProducer("events", stream.NewProducerOptions().SetProducerName("billing"))
	if err != nil {
		t.Fatal(err)
	}
	confirms := p.NotifyPublishConfirmation()
	for i := range 10 {
		m := amqp.NewMessage(fmt.Appendf(nil, "e%d", i))
		m.SetPublishingId(int64(i + 1))
		if err := p.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	// Two duplicates: dropped by deduplication, counted.
	for i := range 2 {
		m := amqp.NewMessage([]byte("dup"))
		m.SetPublishingId(int64(i + 1))
		if err := p.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	// The client keys confirms by publishing id: a duplicate's confirm is
	// one it already had.
	confirmed := 0
	for confirmed < 10 {
		select {
		case cs := <-confirms:
			confirmed += len(cs)
		case <-time.After(wait):
			t.Fatalf("%d confirmed", confirmed)
		}
	}
	var prods []map[string]any
	deadline := time.Now().Add(wait)
	for {
		prods = tb.guest("GET", "/api/stream/producers/%2F/events", nil).list(t)
		if len(prods) == 1 && num(t, prods[0]["duplicates"]) == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(prods) != 1 || prods[0]["reference"] != "billing" || num(t, prods[0]["last_publishing_id"]) != 10 || num(t, prods[0]["duplicates"]) != 2 {
		t.Fatalf("producers %v", prods)
	}

	// A consumer stores offset 4; the API lists it with its lag.
	got := make(chan int64, 100)
	c, err := env.NewConsumer("events", func(ctx stream.ConsumerContext, m *amqp.Message) {
		if ctx.Consumer.GetOffset() == 4 {
			if err := ctx.Consumer.StoreOffset(); err != nil {
				t.Errorf("StoreOffset: %v", err)
			}
		}
		got <- ctx.Consumer.GetOffset()
	}, stream.NewConsumerOptions().SetConsumerName("reader").SetOffset(stream.OffsetSpecification{}.First()).SetManualCommit())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		select {
		case <-got:
		case <-time.After(wait):
			t.Fatalf("consumed %d", i)
		}
	}
	c.Close()
	var offs []map[string]any
	deadline = time.Now().Add(wait)
	for {
		offs = tb.guest("GET", "/api/stream/offsets/%2F/events", nil).list(t)
		if len(offs) == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The lag is in offsets up to the last one, and tracking chunks
	// take offsets too (as in RabbitMQ).
	last := num(t, tb.guest("GET", "/api/queues/%2F/events", nil).obj(t)["stream"].(map[string]any)["last_offset"])
	if len(offs) != 1 || offs[0]["reference"] != "reader" || num(t, offs[0]["offset"]) != 4 || num(t, offs[0]["lag"]) != last-4 || last < 9 {
		t.Fatalf("offsets %v", offs)
	}

	// Reset: the client reads back what the operator set.
	for _, c := range []struct {
		body any
		want int64
	}{
		{map[string]any{"offset": 7}, 7},
		{map[string]any{"offset": "first"}, 0},
		{map[string]any{"offset": "last"}, -1},
		{map[string]any{"offset": "next"}, -2},
		{map[string]any{"timestamp": time.Now().Add(-time.Hour).UnixMilli()}, 0},
	} {
		switch c.want {
		case -1:
			c.want = num(t, tb.guest("GET", "/api/queues/%2F/events", nil).obj(t)["stream"].(map[string]any)["last_offset"])
		case -2:
			c.want = num(t, tb.guest("GET", "/api/queues/%2F/events", nil).obj(t)["stream"].(map[string]any)["next_offset"])
		}
		want(t, tb.guest("PUT", "/api/stream/offsets/%2F/events/reader", c.body), 204)
		o, err := env.QueryOffset("reader", "events")
		if err != nil || o != c.want {
			t.Fatalf("after reset to %v: QueryOffset %d %v, want %d", c.body, o, err, c.want)
		}
	}
	want(t, tb.guest("PUT", "/api/stream/offsets/%2F/events/reader", map[string]any{"offset": "middle"}), 400)
	want(t, tb.guest("PUT", "/api/stream/offsets/%2F/events/reader", map[string]any{"offset": -1}), 400)
	want(t, tb.guest("PUT", "/api/stream/offsets/%2F/nope/reader", map[string]any{"offset": 1}), 404)
	want(t, tb.guest("GET", "/api/stream/offsets/%2F/nope", nil), 404)
	if all := tb.guest("GET", "/api/stream/offsets", nil).list(t); len(all) != 1 {
		t.Fatalf("all offsets %v", all)
	}
}

func TestConsumerGroupsListed(t *testing.T) {
	tb := startBroker(t)
	env := streamEnv(t, tb)
	if err := env.DeclareStream("orders", nil); err != nil {
		t.Fatal(err)
	}
	var consumers []*stream.Consumer
	for range 2 {
		c, err := env.NewConsumer("orders", func(stream.ConsumerContext, *amqp.Message) {},
			stream.NewConsumerOptions().SetConsumerName("app").SetSingleActiveConsumer(
				stream.NewSingleActiveConsumer(func(string, bool) stream.OffsetSpecification { return stream.OffsetSpecification{}.First() })))
		if err != nil {
			t.Fatal(err)
		}
		consumers = append(consumers, c)
	}
	var gs []map[string]any
	deadline := time.Now().Add(wait)
	for {
		gs = tb.guest("GET", "/api/stream/consumer-groups/%2F", nil).list(t)
		if len(gs) == 1 && num(t, gs[0]["consumers"]) == 2 && gs[0]["members"].([]any)[0].(map[string]any)["active"] == true || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(gs) != 1 || gs[0]["stream"] != "orders" || gs[0]["reference"] != "app" || num(t, gs[0]["partition_index"]) != -1 {
		t.Fatalf("groups %v", gs)
	}
	members := gs[0]["members"].([]any)
	if len(members) != 2 || members[0].(map[string]any)["active"] != true || members[1].(map[string]any)["active"] != false {
		t.Fatalf("members %v", members)
	}
	for _, c := range consumers {
		c.Close()
	}
}
