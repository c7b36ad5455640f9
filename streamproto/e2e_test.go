package streamproto

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/message"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
)

// newEnv connects the real Go stream client to tb.
func newEnv(t *testing.T, tb *testBroker, opts ...func(*stream.EnvironmentOptions)) *stream.Environment {
	t.Helper()
	o := stream.NewEnvironmentOptions().SetHost(tb.host).SetPort(tb.port).SetUser("guest").SetPassword("guest").
		SetAddressResolver(stream.AddressResolver{Host: tb.host, Port: tb.port})
	for _, f := range opts {
		f(o)
	}
	env, err := stream.NewEnvironment(o)
	if err != nil {
		t.Fatalf("NewEnvironment: %v", err)
	}
	t.Cleanup(func() { env.Close() })
	return env
}

// publish sends bodies with confirms and waits for all of them.
func publish(t *testing.T, env *stream.Environment, name string, bodies []string, po *stream.ProducerOptions) {
	t.Helper()
	p, err := env.NewProducer(name, po)
	if err != nil {
		t.Fatalf("NewProducer: %v", err)
	}
	defer p.Close()
	confirms := p.NotifyPublishConfirmation()
	var msgs []message.StreamMessage
	for _, b := range bodies {
		msgs = append(msgs, amqp.NewMessage([]byte(b)))
	}
	if err := p.BatchSend(msgs); err != nil {
		t.Fatalf("BatchSend: %v", err)
	}
	got := 0
	timeout := time.After(10 * time.Second)
	for got < len(bodies) {
		select {
		case cs := <-confirms:
			for _, c := range cs {
				if !c.IsConfirmed() {
					t.Fatalf("message %d not confirmed", c.GetPublishingId())
				}
				got++
			}
		case <-timeout:
			t.Fatalf("%d of %d confirms", got, len(bodies))
		}
	}
}

// consume reads n messages from spec and returns their bodies and offsets.
func consume(t *testing.T, env *stream.Environment, name string, spec stream.OffsetSpecification, n int) ([]string, []int64) {
	t.Helper()
	var mu sync.Mutex
	var bodies []string
	var offsets []int64
	done := make(chan struct{})
	c, err := env.NewConsumer(name, func(ctx stream.ConsumerContext, m *amqp.Message) {
		mu.Lock()
		defer mu.Unlock()
		bodies = append(bodies, string(m.GetData()))
		offsets = append(offsets, ctx.Consumer.GetOffset())
		if len(bodies) == n {
			close(done)
		}
	}, stream.NewConsumerOptions().SetOffset(spec))
	if err != nil {
		t.Fatalf("NewConsumer: %v", err)
	}
	defer c.Close()
	if n == 0 {
		return nil, nil
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("got %d of %d messages", len(bodies), n)
	}
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(bodies), slices.Clone(offsets)
}

func seq(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

// Ensure a stream declared with the Go client takes confirmed messages
// and replays them in order from first, with their offsets.
func TestGoClientPublishConsume(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	env := newEnv(t, tb)
	if err := env.DeclareStream("s1", nil); err != nil {
		t.Fatalf("DeclareStream: %v", err)
	}
	want := seq("m", 0, 100)
	publish(t, env, "s1", want, nil)
	got, offsets := consume(t, env, "s1", stream.OffsetSpecification{}.First(), 100)
	if !slices.Equal(got, want) {
		t.Fatalf("got %v", got)
	}
	for i, o := range offsets {
		if o != int64(i) {
			t.Fatalf("offset %d at position %d", o, i)
		}
	}
}
