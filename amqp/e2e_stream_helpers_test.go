package amqp

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	streamamqp "github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/message"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/streamproto"
)

// dualBroker is one broker served by the AMQP 0-9-1 server and the
// stream protocol server, each on a free loopback port: the stream tests
// check that both front ends see one entity.
type dualBroker struct {
	*testBroker
	clock  *streamClock
	sp     *streamproto.Server
	spHost string
	spPort int
	spDone chan error
}

// streamClock is the streams' clock (chunk timestamps): real time until
// set.
type streamClock struct{ ms atomic.Int64 }

func (c *streamClock) now() time.Time {
	if ms := c.ms.Load(); ms != 0 {
		return time.UnixMilli(ms)
	}
	return time.Now()
}

func (c *streamClock) set(t time.Time) { c.ms.Store(t.UnixMilli()) }

// startDual starts both servers on a broker in dir (a new temp dir when
// empty); they stop at the end of the test.
func startDual(t *testing.T, dir string) *dualBroker {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	clock := &streamClock{}
	b, err := queues.Open(dir, queues.Options{StreamOptions: osiris.Options{Now: clock.now}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	tb := &testBroker{t: t, dir: dir, broker: b, srv: NewServer(Config{Broker: b}), addr: ln.Addr().String(), done: make(chan error, 1)}
	go func() { tb.done <- tb.srv.Serve(ln) }()
	t.Cleanup(tb.stop) // runs last: closes the broker
	sln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &dualBroker{testBroker: tb, clock: clock, spHost: "127.0.0.1", spPort: sln.Addr().(*net.TCPAddr).Port, spDone: make(chan error, 1)}
	d.sp, err = streamproto.NewServer(streamproto.Config{Broker: b, Advertise: sln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	go func() { d.spDone <- d.sp.Serve(sln) }()
	t.Cleanup(d.stopStream)
	return d
}

// stopStream stops the stream server (idempotent).
func (d *dualBroker) stopStream() {
	if d.sp == nil {
		return
	}
	d.sp.Close()
	<-d.spDone
	d.sp = nil
}

// restart stops both servers and the broker and starts them again on the
// same data directory.
func (d *dualBroker) restart(t *testing.T) *dualBroker {
	t.Helper()
	d.stopStream()
	d.stop()
	return startDual(t, d.dir)
}

// env connects the real stream Go client; closed at the end of the test.
func (d *dualBroker) env(t *testing.T) *stream.Environment {
	t.Helper()
	o := stream.NewEnvironmentOptions().SetHost(d.spHost).SetPort(d.spPort).SetUser("guest").SetPassword("guest").
		SetAddressResolver(stream.AddressResolver{Host: d.spHost, Port: d.spPort})
	env, err := stream.NewEnvironment(o)
	if err != nil {
		t.Fatalf("stream.NewEnvironment: %v", err)
	}
	t.Cleanup(func() { env.Close() })
	return env
}

// declareStream declares a stream over AMQP with args added to
// x-queue-type=stream.
func declareStream(t *testing.T, ch *amqp091.Channel, name string, args amqp091.Table) {
	t.Helper()
	a := amqp091.Table{"x-queue-type": "stream"}
	for k, v := range args {
		a[k] = v
	}
	if _, err := ch.QueueDeclare(name, true, false, false, false, a); err != nil {
		t.Fatalf("declare stream %q: %v", name, err)
	}
}

// publishAll publishes ps on a confirm channel of its own and waits for
// every ack.
func publishAll(t *testing.T, c *amqp091.Connection, exchange, key string, ps ...amqp091.Publishing) {
	t.Helper()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	must(t, ch.Confirm(false))
	var dcs []*amqp091.DeferredConfirmation
	for _, p := range ps {
		dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), exchange, key, false, false, p)
		if err != nil {
			t.Fatalf("publish: %v", err)
		}
		dcs = append(dcs, dc)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for i, dc := range dcs {
		if ok, err := dc.WaitContext(ctx); !ok || err != nil {
			t.Fatalf("confirm %d: ok=%v err=%v", i, ok, err)
		}
	}
}

// texts returns publishings whose bodies are prefix-from … prefix-(to-1).
func texts(prefix string, from, to int) []amqp091.Publishing {
	var out []amqp091.Publishing
	for i := from; i < to; i++ {
		out = append(out, amqp091.Publishing{Body: []byte(fmt.Sprintf("%s-%d", prefix, i))})
	}
	return out
}

// names returns prefix-from … prefix-(to-1).
func names(prefix string, from, to int) []string {
	var out []string
	for _, p := range texts(prefix, from, to) {
		out = append(out, string(p.Body))
	}
	return out
}

// consumeStreamQ consumes stream name on a new channel of c with
// prefetch and args; the deliveries are returned with the channel.
func consumeStreamQ(t *testing.T, c *amqp091.Connection, name string, prefetch int, args amqp091.Table) (*amqp091.Channel, <-chan amqp091.Delivery) {
	t.Helper()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	must(t, ch.Qos(prefetch, 0, false))
	d, err := ch.Consume(name, "", false, false, false, false, args)
	if err != nil {
		t.Fatalf("consume %q: %v", name, err)
	}
	return ch, d
}

// offsetOf returns a delivery's x-stream-offset header.
func offsetOf(t *testing.T, d amqp091.Delivery) int64 {
	t.Helper()
	o, ok := d.Headers["x-stream-offset"].(int64)
	if !ok {
		t.Fatalf("delivery %q: x-stream-offset header %#v (%T)", d.Body, d.Headers["x-stream-offset"], d.Headers["x-stream-offset"])
	}
	return o
}

// ackAll acks deliveries one by one.
func ackAll(t *testing.T, ds []amqp091.Delivery) {
	t.Helper()
	for _, d := range ds {
		must(t, d.Ack(false))
	}
}

// wantBodies fails unless the deliveries' bodies are want.
func wantBodies(t *testing.T, what string, ds []amqp091.Delivery, want []string) {
	t.Helper()
	got := bodies(ds)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: got %q, want %q", what, got, want)
	}
}

// streamSink collects what a stream client consumer receives.
type streamSink struct {
	mu      sync.Mutex
	msgs    []*streamamqp.Message
	offsets []int64
	signal  chan struct{}
}

func (s *streamSink) handle(ctx stream.ConsumerContext, m *streamamqp.Message) {
	s.mu.Lock()
	s.msgs = append(s.msgs, m)
	s.offsets = append(s.offsets, ctx.Consumer.GetOffset())
	s.mu.Unlock()
	select {
	case s.signal <- struct{}{}:
	default:
	}
}

// wait waits for n messages and returns the first n.
func (s *streamSink) wait(t *testing.T, n int) ([]*streamamqp.Message, []int64) {
	t.Helper()
	timeout := time.After(wait)
	for {
		s.mu.Lock()
		if len(s.msgs) >= n {
			m, o := s.msgs[:n], s.offsets[:n]
			s.mu.Unlock()
			return m, o
		}
		have := len(s.msgs)
		s.mu.Unlock()
		select {
		case <-s.signal:
		case <-timeout:
			t.Fatalf("stream consumer: %d of %d messages", have, n)
		}
	}
}

// streamSubscribe attaches a stream client consumer to name.
func streamSubscribe(t *testing.T, env *stream.Environment, name string, opts *stream.ConsumerOptions) *streamSink {
	t.Helper()
	s := &streamSink{signal: make(chan struct{}, 1)}
	c, err := env.NewConsumer(name, s.handle, opts)
	if err != nil {
		t.Fatalf("stream NewConsumer(%q): %v", name, err)
	}
	t.Cleanup(func() { c.Close() })
	return s
}

// streamPublish sends msgs with the stream client and waits for their
// confirms.
func streamPublish(t *testing.T, env *stream.Environment, name string, opts *stream.ProducerOptions, msgs ...message.StreamMessage) {
	t.Helper()
	p, err := env.NewProducer(name, opts)
	if err != nil {
		t.Fatalf("stream NewProducer(%q): %v", name, err)
	}
	defer p.Close()
	confirms := p.NotifyPublishConfirmation()
	if err := p.BatchSend(msgs); err != nil {
		t.Fatalf("BatchSend: %v", err)
	}
	got := 0
	timeout := time.After(wait)
	for got < len(msgs) {
		select {
		case cs := <-confirms:
			for _, c := range cs {
				if !c.IsConfirmed() {
					t.Fatalf("stream publish %d not confirmed: %v", c.GetPublishingId(), c.GetError())
				}
				got++
			}
		case <-timeout:
			t.Fatalf("stream publish: %d of %d confirms", got, len(msgs))
		}
	}
}
