package amqp

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	streamamqp "github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/message"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
)

// A super stream is a direct exchange with x-super-stream and its
// partition bindings, so both protocols see the same thing: these tests
// make one with one client and use it with the other.

// partitionBodies reads n messages of each partition from first with the
// stream client and returns their bodies by partition.
func partitionBodies(t *testing.T, env *stream.Environment, n map[string]int) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for p, k := range n {
		sink := streamSubscribe(t, env, p, stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
		msgs, _ := sink.wait(t, k)
		for _, m := range msgs {
			out[p] = append(out[p], string(m.GetData()))
		}
	}
	return out
}

// Ensure a super stream created through the stream protocol is a durable
// direct exchange with x-super-stream to AMQP 0-9-1 (passive and
// equivalent declares pass, an inequivalent one is 406), AMQP publishes to
// it route by binding key to the partitions, and deleting it through the
// stream protocol removes exchange and partitions.
func TestSuperStreamFromStreamProtocolSeenOverAMQP(t *testing.T) {
	d := startDual(t, "")
	env := d.env(t)
	if err := env.DeclareSuperStream("orders", stream.NewBindingsOptions([]string{"eu", "us", "asia"})); err != nil {
		t.Fatalf("DeclareSuperStream: %v", err)
	}
	c, ch := d.channel(t)
	must(t, ch.ExchangeDeclarePassive("orders", "direct", true, false, false, false, nil))
	must(t, ch.ExchangeDeclare("orders", "direct", true, false, false, false, amqp091.Table{"x-super-stream": true}))
	for _, p := range []string{"orders-eu", "orders-us", "orders-asia"} {
		q, err := ch.QueueDeclarePassive(p, true, false, false, false, nil)
		if err != nil || q.Messages != 0 {
			t.Fatalf("partition %s over AMQP: %+v, %v", p, q, err)
		}
	}
	for _, k := range []string{"eu", "us", "asia"} {
		publishAll(t, c, "orders", k, texts("amqp-"+k, 0, 3)...)
	}
	// A key no partition is bound with reaches none: mandatory returns it.
	ret := ch.NotifyReturn(make(chan amqp091.Return, 1))
	must(t, ch.Publish("orders", "mars", true, false, amqp091.Publishing{Body: []byte("lost")}))
	select {
	case r := <-ret:
		if r.ReplyCode != 312 || r.Exchange != "orders" || r.RoutingKey != "mars" {
			t.Fatalf("return %+v", r)
		}
	case <-time.After(wait):
		t.Fatal("unroutable publish not returned")
	}
	got := partitionBodies(t, env, map[string]int{"orders-eu": 3, "orders-us": 3, "orders-asia": 3})
	for _, k := range []string{"eu", "us", "asia"} {
		if want := names("amqp-"+k, 0, 3); !slices.Equal(got["orders-"+k], want) {
			t.Fatalf("orders-%s holds %v, want %v", k, got["orders-"+k], want)
		}
	}
	// An inequivalent redeclare is refused as for any exchange.
	err := ch.ExchangeDeclare("orders", "fanout", true, false, false, false, nil)
	var ae *amqp091.Error
	if !errors.As(err, &ae) || ae.Code != amqp091.PreconditionFailed {
		t.Fatalf("fanout redeclare: %v", err)
	}

	if err := env.DeleteSuperStream("orders"); err != nil {
		t.Fatalf("DeleteSuperStream: %v", err)
	}
	ch2, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	err = ch2.ExchangeDeclarePassive("orders", "direct", true, false, false, false, nil)
	if !errors.As(err, &ae) || ae.Code != amqp091.NotFound {
		t.Fatalf("exchange after DeleteSuperStream: %v", err)
	}
	ch3, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	_, err = ch3.QueueDeclarePassive("orders-eu", true, false, false, false, nil)
	if !errors.As(err, &ae) || ae.Code != amqp091.NotFound {
		t.Fatalf("partition after DeleteSuperStream: %v", err)
	}
}

// Ensure a super stream declared over AMQP 0-9-1 as RabbitMQ documents it
// (direct exchange with x-super-stream, stream queues bound with
// x-stream-partition-order, here bound out of order) is a super stream to
// the stream protocol: Partitions in order, Route, the Go client's super
// stream producer (key routing) and consumer, across a restart; deleting
// only the exchange over AMQP leaves the streams, as in RabbitMQ.
func TestSuperStreamFromAMQPSeenByStreamClient(t *testing.T) {
	d := startDual(t, "")
	c, ch := d.channel(t)
	must(t, ch.ExchangeDeclare("invoices", "direct", true, false, false, false, amqp091.Table{"x-super-stream": true}))
	parts := []string{"invoices-0", "invoices-1", "invoices-2"}
	for _, p := range parts {
		declareStream(t, ch, p, nil)
	}
	for _, i := range []int{2, 0, 1} {
		must(t, ch.QueueBind(parts[i], fmt.Sprintf("k%d", i), "invoices", false, amqp091.Table{"x-stream-partition-order": int32(i)}))
	}

	env := d.env(t)
	if got, err := env.QueryPartitions("invoices"); err != nil || !slices.Equal(got, parts) {
		t.Fatalf("partitions %v, %v", got, err)
	}
	if got, err := env.QueryRoute("invoices", "k1"); err != nil || !slices.Equal(got, []string{"invoices-1"}) {
		t.Fatalf("route k1 %v, %v", got, err)
	}
	if got, err := env.QueryRoute("invoices", "k9"); err != nil || len(got) != 0 {
		t.Fatalf("route k9 %v, %v", got, err)
	}

	// The stream client's super stream producer routes by key; AMQP
	// publishes to the exchange land in the same partitions.
	p, err := env.NewSuperStreamProducer("invoices", stream.NewSuperStreamProducerOptions(
		stream.NewKeyRoutingStrategy(func(m message.StreamMessage) string {
			return m.GetApplicationProperties()["key"].(string)
		})))
	if err != nil {
		t.Fatalf("NewSuperStreamProducer: %v", err)
	}
	confirms := p.NotifyPublishConfirmation(9)
	for i := 0; i < 3; i++ {
		for k := 0; k < 3; k++ {
			m := streamamqp.NewMessage([]byte(fmt.Sprintf("sp-k%d-%d", k, i)))
			m.ApplicationProperties = map[string]any{"key": fmt.Sprintf("k%d", k)}
			if err := p.Send(m); err != nil {
				t.Fatalf("Send: %v", err)
			}
		}
	}
	for n := 0; n < 9; {
		select {
		case pc := <-confirms:
			for _, st := range pc.ConfirmationStatus {
				if !st.IsConfirmed() {
					t.Fatalf("not confirmed on %s", pc.Partition)
				}
				n++
			}
		case <-time.After(wait):
			t.Fatalf("%d of 9 confirms", n)
		}
	}
	must(t, p.Close())
	publishAll(t, c, "invoices", "k0", texts("amqp-k0", 0, 2)...)

	want := map[string][]string{
		"invoices-0": {"sp-k0-0", "sp-k0-1", "sp-k0-2", "amqp-k0-0", "amqp-k0-1"},
		"invoices-1": {"sp-k1-0", "sp-k1-1", "sp-k1-2"},
		"invoices-2": {"sp-k2-0", "sp-k2-1", "sp-k2-2"},
	}
	var mu sync.Mutex
	got := map[string][]string{}
	all := make(chan struct{}, 1)
	consumer, err := env.NewSuperStreamConsumer("invoices", func(ctx stream.ConsumerContext, m *streamamqp.Message) {
		mu.Lock()
		defer mu.Unlock()
		s := ctx.Consumer.GetStreamName()
		got[s] = append(got[s], string(m.GetData()))
		if len(got["invoices-0"])+len(got["invoices-1"])+len(got["invoices-2"]) == 11 {
			all <- struct{}{}
		}
	}, stream.NewSuperStreamConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	if err != nil {
		t.Fatalf("NewSuperStreamConsumer: %v", err)
	}
	select {
	case <-all:
	case <-time.After(wait):
		mu.Lock()
		t.Fatalf("super stream consumer got %v", got)
	}
	must(t, consumer.Close())
	mu.Lock()
	for s, w := range want {
		if !slices.Equal(got[s], w) {
			t.Fatalf("%s: got %v, want %v", s, got[s], w)
		}
	}
	mu.Unlock()

	d = d.restart(t)
	env = d.env(t)
	if got, err := env.QueryPartitions("invoices"); err != nil || !slices.Equal(got, parts) {
		t.Fatalf("partitions after restart %v, %v", got, err)
	}
	_, ch = d.channel(t)
	must(t, ch.ExchangeDelete("invoices", false, false))
	if _, err := env.QueryPartitions("invoices"); !errors.Is(err, stream.StreamDoesNotExist) {
		t.Fatalf("partitions without the exchange: %v", err)
	}
	for _, s := range parts {
		if ok, err := env.StreamExists(s); err != nil || !ok {
			t.Fatalf("stream %s after exchange.delete: %v, %v", s, ok, err)
		}
	}
	if got := partitionBodies(t, env, map[string]int{"invoices-0": 5}); !slices.Equal(got["invoices-0"], want["invoices-0"]) {
		t.Fatalf("invoices-0 after exchange.delete: %v", got)
	}
}
