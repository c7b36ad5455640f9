package amqp1

import (
	"net"
	"sync"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
	amqp091 "github.com/rabbitmq/amqp091-go"
	streamamqp "github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/message"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/warren-mq/warren/streamproto"
)

// Interoperation with RabbitMQ's property mapping ("Conversions between
// protocols"; mc_amqpl and mc_amqp), in the directions the other tests
// leave out: a fully dressed message from AMQP 1.0 to AMQP 0-9-1 and
// back, over a classic queue and a stream, and between AMQP 1.0 and the
// stream protocol.

var interopTime = time.UnixMilli(1_700_000_000_000)

// dressed10 is an AMQP 1.0 message with every property RabbitMQ maps.
func dressed10() *goamqp.Message {
	m := goamqp.NewMessage([]byte("payload"))
	m.Header = &goamqp.MessageHeader{Durable: true, Priority: 5, TTL: time.Minute}
	m.Properties = &goamqp.MessageProperties{
		MessageID:       "mid",
		UserID:          []byte("guest"),
		Subject:         ptr("subj"),
		ReplyTo:         ptr("/queues/replies%20q"),
		CorrelationID:   "cid",
		ContentType:     ptr("application/json"),
		ContentEncoding: ptr("gzip"),
		CreationTime:    &interopTime,
		GroupID:         ptr("grp"),
	}
	m.ApplicationProperties = map[string]any{"s": "str", "l": int64(1 << 40), "b": true, "d": 2.5}
	m.Annotations = goamqp.Annotations{"x-basic-type": "order", "x-custom": "xv"}
	return m
}

// check091 asserts a dressed10 message as an AMQP 0-9-1 delivery, as
// mc_amqpl:convert_from(mc_amqp) maps it.
func check091(t *testing.T, d amqp091.Delivery) {
	t.Helper()
	equal(t, "body", string(d.Body), "payload")
	equal(t, "delivery-mode, priority, expiration", []any{d.DeliveryMode, d.Priority, d.Expiration}, []any{uint8(2), uint8(5), "60000"})
	equal(t, "message-id, correlation-id", []string{d.MessageId, d.CorrelationId}, []string{"mid", "cid"})
	equal(t, "user-id", d.UserId, "guest")
	equal(t, "reply-to (the /queues/ prefix removed, unquoted)", d.ReplyTo, "replies q")
	equal(t, "content-type, content-encoding", []string{d.ContentType, d.ContentEncoding}, []string{"application/json", "gzip"})
	equal(t, "timestamp (creation-time)", d.Timestamp.Unix(), interopTime.Unix())
	equal(t, "app-id (group-id)", d.AppId, "grp")
	equal(t, "type (x-basic-type)", d.Type, "order")
	for k, v := range map[string]any{"s": "str", "l": int64(1 << 40), "b": true, "d": 2.5, "x-custom": "xv"} {
		if d.Headers[k] != v {
			t.Errorf("header %s: %#v, want %#v (all: %v)", k, d.Headers[k], v, d.Headers)
		}
	}
	for _, k := range []string{"x-basic-type", "x-exchange", "x-routing-key"} {
		if _, ok := d.Headers[k]; ok {
			t.Errorf("header %s present (RabbitMQ keeps it out): %v", k, d.Headers)
		}
	}
}

// Ensure a message sent over AMQP 1.0 with every property RabbitMQ maps
// reads over AMQP 0-9-1 converted as mc_amqpl does, from a classic queue
// and from a stream (where it is stored as AMQP 1.0 and converted on the
// way out).
func TestInterop10To091(t *testing.T) {
	tb := startBroker(t, Config{})
	ch := tb.channel(t)
	declare(t, ch, "c", nil)
	declare(t, ch, "s", amqp091.Table{"x-queue-type": "stream"})
	_, s := tb.dial(t, nil)
	for _, q := range []string{"c", "s"} {
		snd, err := s.NewSender(ctxT(t), "/queues/"+q, nil)
		if err != nil {
			t.Fatal(err)
		}
		sendAccepted(t, snd, dressed10())
	}
	t.Run("classic", func(t *testing.T) {
		d := get(t, ch, "c", 1)[0]
		check091(t, d)
		equal(t, "exchange, routing key", []string{d.Exchange, d.RoutingKey}, []string{"", "c"})
	})
	t.Run("stream", func(t *testing.T) {
		if err := ch.Qos(1, 0, false); err != nil {
			t.Fatal(err)
		}
		ds, err := ch.Consume("s", "", false, false, false, false, amqp091.Table{"x-stream-offset": "first"})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case d := <-ds:
			check091(t, d)
			equal(t, "exchange, routing key", []string{d.Exchange, d.RoutingKey}, []string{"", "s"})
			equal(t, "x-stream-offset", d.Headers["x-stream-offset"], int64(0))
		case <-time.After(wait):
			t.Fatal("no delivery from the stream")
		}
	})
}

// dressed091 is an AMQP 0-9-1 message with every property RabbitMQ maps.
func dressed091() amqp091.Publishing {
	return amqp091.Publishing{
		ContentType: "text/plain", ContentEncoding: "utf-8", DeliveryMode: 2, Priority: 4,
		CorrelationId: "cid", ReplyTo: "replies q", Expiration: "60000", MessageId: "mid",
		Timestamp: interopTime, Type: "order", UserId: "guest", AppId: "app",
		Headers: amqp091.Table{"s": "str", "i": int32(7), "b": true, "x-custom": "xv"},
		Body:    []byte("payload"),
	}
}

// check10 asserts a dressed091 message as an AMQP 1.0 message, as
// mc_amqpl:convert_to(mc_amqp) maps it.
func check10(t *testing.T, m *goamqp.Message, key string) {
	t.Helper()
	equal(t, "body", string(m.GetData()), "payload")
	if h := m.Header; h == nil || !h.Durable || h.Priority != 4 || h.TTL != time.Minute {
		t.Errorf("header %+v, want durable, priority 4, ttl 60 s", h)
	}
	p := m.Properties
	if p == nil {
		t.Fatal("no properties")
	}
	equal(t, "message-id, correlation-id", []any{p.MessageID, p.CorrelationID}, []any{"mid", "cid"})
	equal(t, "user-id", string(p.UserID), "guest")
	equal(t, "reply-to", deref(p.ReplyTo), "/queues/replies%20q")
	equal(t, "content-type, content-encoding", []string{deref(p.ContentType), deref(p.ContentEncoding)}, []string{"text/plain", "utf-8"})
	if p.CreationTime == nil || !p.CreationTime.Equal(interopTime) {
		t.Errorf("creation-time %v, want %v", p.CreationTime, interopTime)
	}
	equal(t, "group-id (app-id)", deref(p.GroupID), "app")
	equal(t, "application properties", m.ApplicationProperties, map[string]any{"s": "str", "i": int32(7), "b": true})
	for k, v := range map[string]any{"x-basic-type": "order", "x-custom": "xv", "x-exchange": "", "x-routing-key": key} {
		if m.Annotations[k] != v {
			t.Errorf("annotation %s: %#v, want %#v (all: %v)", k, m.Annotations[k], v, m.Annotations)
		}
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// Ensure a message published over AMQP 0-9-1 with every property
// RabbitMQ maps reads over AMQP 1.0 converted as mc_amqpl does, from a
// classic queue and from a stream.
func TestInterop091To10(t *testing.T) {
	tb := startBroker(t, Config{})
	ch := tb.channel(t)
	declare(t, ch, "c", nil)
	declare(t, ch, "s", amqp091.Table{"x-queue-type": "stream"})
	publish091(t, ch, "c", 1, dressed091())
	if err := ch.Publish("", "s", false, false, dressed091()); err != nil {
		t.Fatal(err)
	}
	waitReady(t, tb, "c", 1)
	_, s := tb.dial(t, nil)
	for _, q := range []string{"c", "s"} {
		t.Run(q, func(t *testing.T) {
			var opts goamqp.ReceiverOptions
			if q == "s" {
				opts.Filters = []goamqp.LinkFilter{goamqp.NewLinkFilter(streamOffsetFilter, 0, "first")}
			}
			rcv, err := s.NewReceiver(ctxT(t), "/queues/"+q, &opts)
			if err != nil {
				t.Fatal(err)
			}
			m, err := rcv.Receive(ctxT(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			if q == "c" {
				// publish091 numbers its bodies.
				equal(t, "body", string(m.GetData()), "m0")
				m.Data = [][]byte{[]byte("payload")}
			}
			check10(t, m, q)
			rcv.AcceptMessage(ctxT(t), m)
		})
	}
}

// startStream serves the stream protocol on tb's broker and connects the
// stream Go client.
func (tb *testBroker) startStream(t *testing.T) *stream.Environment {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sp, err := streamproto.NewServer(streamproto.Config{Broker: tb.broker, Advertise: ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- sp.Serve(ln) }()
	t.Cleanup(func() { sp.Close(); <-done })
	port := ln.Addr().(*net.TCPAddr).Port
	env, err := stream.NewEnvironment(stream.NewEnvironmentOptions().SetHost("127.0.0.1").SetPort(port).
		SetUser("guest").SetPassword("guest").SetAddressResolver(stream.AddressResolver{Host: "127.0.0.1", Port: port}))
	if err != nil {
		t.Fatalf("stream.NewEnvironment: %v", err)
	}
	t.Cleanup(func() { env.Close() })
	return env
}

// streamRead reads n messages of a stream from the first with the
// stream Go client.
func streamRead(t *testing.T, env *stream.Environment, name string, n int) []*streamamqp.Message {
	t.Helper()
	var mu sync.Mutex
	var got []*streamamqp.Message
	enough := make(chan struct{})
	c, err := env.NewConsumer(name, func(_ stream.ConsumerContext, m *streamamqp.Message) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, m)
		if len(got) == n {
			close(enough)
		}
	}, stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	if err != nil {
		t.Fatalf("NewConsumer: %v", err)
	}
	defer c.Close()
	select {
	case <-enough:
	case <-time.After(wait):
		t.Fatalf("stream consumer: fewer than %d messages", n)
	}
	mu.Lock()
	defer mu.Unlock()
	return got[:n]
}

// Ensure what AMQP 1.0 publishes to a stream, straight or through an
// exchange, reads with the stream Go client as sent (a stream stores the
// AMQP 1.0 message), with RabbitMQ's x-exchange and x-routing-key
// annotations.
func TestInterop10ToStreamClient(t *testing.T) {
	tb := startBroker(t, Config{})
	ch := tb.channel(t)
	declare(t, ch, "s", amqp091.Table{"x-queue-type": "stream"})
	if err := ch.QueueBind("s", "k", "amq.direct", false, nil); err != nil {
		t.Fatal(err)
	}
	env := tb.startStream(t)
	_, s := tb.dial(t, nil)
	for _, addr := range []string{"/queues/s", "/exchanges/amq.direct/k"} {
		snd, err := s.NewSender(ctxT(t), addr, nil)
		if err != nil {
			t.Fatal(err)
		}
		sendAccepted(t, snd, dressed10())
	}
	for i, m := range streamRead(t, env, "s", 2) {
		equal(t, "body", string(m.GetData()), "payload")
		if h := m.Header; h == nil || !h.Durable || h.Priority != 5 || h.TTL != time.Minute {
			t.Errorf("header %+v", h)
		}
		p := m.Properties
		if p == nil {
			t.Fatal("no properties")
		}
		equal(t, "properties", []any{p.MessageID, string(p.UserID), p.Subject, p.ReplyTo, p.CorrelationID, p.ContentType, p.ContentEncoding, p.CreationTime.UnixMilli(), p.GroupID},
			[]any{"mid", "guest", "subj", "/queues/replies%20q", "cid", "application/json", "gzip", interopTime.UnixMilli(), "grp"})
		equal(t, "application properties", m.ApplicationProperties, map[string]any{"s": "str", "l": int64(1 << 40), "b": true, "d": 2.5})
		wantX, wantK := "", "s"
		if i == 1 {
			wantX, wantK = "amq.direct", "k"
		}
		for k, v := range map[string]any{"x-exchange": wantX, "x-routing-key": wantK, "x-basic-type": "order", "x-custom": "xv"} {
			if m.Annotations[k] != v {
				t.Errorf("message %d annotation %s: %#v, want %#v (all: %v)", i, k, m.Annotations[k], v, m.Annotations)
			}
		}
	}
}

// Ensure what the stream Go client publishes reads over AMQP 1.0 as
// sent, with its offset, and over AMQP 0-9-1 converted.
func TestInteropStreamClientTo10(t *testing.T) {
	tb := startBroker(t, Config{})
	ch := tb.channel(t)
	declare(t, ch, "s", amqp091.Table{"x-queue-type": "stream"})
	env := tb.startStream(t)
	p, err := env.NewProducer("s", nil)
	if err != nil {
		t.Fatal(err)
	}
	confirms := p.NotifyPublishConfirmation()
	var msgs []message.StreamMessage
	for i := range 2 {
		m := streamamqp.NewMessage([]byte("sc" + string(rune('0'+i))))
		m.Properties = &streamamqp.MessageProperties{
			MessageID: "mid", UserID: []byte("guest"), Subject: "subj", ReplyTo: "/queues/replies%20q",
			CorrelationID: "cid", ContentType: "text/plain", ContentEncoding: "utf-8", CreationTime: interopTime, GroupID: "grp",
		}
		m.ApplicationProperties = map[string]any{"s": "str", "l": int64(i), "b": true}
		m.Annotations = streamamqp.Annotations{"x-custom": "xv"}
		msgs = append(msgs, m)
	}
	if err := p.BatchSend(msgs); err != nil {
		t.Fatal(err)
	}
	for got := 0; got < 2; {
		select {
		case cs := <-confirms:
			for _, c := range cs {
				if !c.IsConfirmed() {
					t.Fatalf("not confirmed: %v", c.GetError())
				}
				got++
			}
		case <-time.After(wait):
			t.Fatal("no confirms")
		}
	}
	p.Close()

	_, s := tb.dial(t, nil)
	rcv, err := s.NewReceiver(ctxT(t), "/queues/s", &goamqp.ReceiverOptions{Credit: 10,
		Filters: []goamqp.LinkFilter{goamqp.NewLinkFilter(streamOffsetFilter, 0, "first")}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		m, err := rcv.Receive(ctxT(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		equal(t, "body", string(m.GetData()), "sc"+string(rune('0'+i)))
		p := m.Properties
		if p == nil {
			t.Fatal("no properties")
		}
		equal(t, "properties", []any{p.MessageID, string(p.UserID), deref(p.Subject), deref(p.ReplyTo), p.CorrelationID, deref(p.ContentType), deref(p.ContentEncoding), deref(p.CreationTime).UnixMilli(), deref(p.GroupID)},
			[]any{"mid", "guest", "subj", "/queues/replies%20q", "cid", "text/plain", "utf-8", interopTime.UnixMilli(), "grp"})
		equal(t, "application properties", m.ApplicationProperties, map[string]any{"s": "str", "l": int64(i), "b": true})
		equal(t, "annotations", []any{m.Annotations["x-custom"], m.Annotations["x-stream-offset"]}, []any{"xv", int64(i)})
		rcv.AcceptMessage(ctxT(t), m)
	}
	// And over AMQP 0-9-1, converted.
	if err := ch.Qos(2, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume("s", "", false, false, false, false, amqp091.Table{"x-stream-offset": "first"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-ds:
		equal(t, "0-9-1 body", string(d.Body), "sc0")
		equal(t, "0-9-1 properties", []any{d.MessageId, d.UserId, d.ReplyTo, d.CorrelationId, d.ContentType, d.ContentEncoding, d.Timestamp.Unix(), d.AppId},
			[]any{"mid", "guest", "replies q", "cid", "text/plain", "utf-8", interopTime.Unix(), "grp"})
		for k, v := range map[string]any{"s": "str", "l": int64(0), "b": true, "x-custom": "xv", "x-stream-offset": int64(0)} {
			if d.Headers[k] != v {
				t.Errorf("0-9-1 header %s: %#v, want %#v (all: %v)", k, d.Headers[k], v, d.Headers)
			}
		}
	case <-time.After(wait):
		t.Fatal("no 0-9-1 delivery")
	}
}

// Ensure an AMQP 1.0 message keeps its whole properties section through
// classic and quorum queues and through dead-lettering, for AMQP 1.0
// consumers: the fields 0-9-1 properties cannot carry (to, subject,
// absolute-expiry-time, group-sequence, reply-to-group-id), the
// milliseconds of creation-time and the types of ids, as RabbitMQ 4.x
// (which keeps the 1.0 message) returns them.
func TestRoundTrip10ThroughQueues(t *testing.T) {
	tb := startBroker(t, Config{})
	ch := tb.channel(t)
	declare(t, ch, "dead", nil)
	declare(t, ch, "cq", amqp091.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dead"})
	declare(t, ch, "qq", amqp091.Table{"x-queue-type": "quorum"})
	_, s := tb.dial(t, nil)
	to, subject, replyTo, group, rgroup := "/queues/somewhere", "the-subject", "/queues/replies", "g", "rg"
	ctype := "application/json"
	created := time.UnixMilli(1_700_000_000_123).UTC()
	expires := time.UnixMilli(1_800_000_000_456).UTC()
	seq := uint32(42)
	props := &goamqp.MessageProperties{
		MessageID:          uint64(77),
		CorrelationID:      goamqp.UUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		To:                 &to,
		Subject:            &subject,
		ReplyTo:            &replyTo,
		ContentType:        &ctype,
		CreationTime:       &created,
		AbsoluteExpiryTime: &expires,
		GroupID:            &group,
		GroupSequence:      &seq,
		ReplyToGroupID:     &rgroup,
	}
	check := func(t *testing.T, what string, p *goamqp.MessageProperties) {
		t.Helper()
		if p == nil {
			t.Fatalf("%s: no properties", what)
		}
		got := []any{p.MessageID, p.CorrelationID, *p.To, *p.Subject, *p.ReplyTo, *p.ContentType, p.CreationTime.UTC(), p.AbsoluteExpiryTime.UTC(), *p.GroupID, *p.GroupSequence, *p.ReplyToGroupID}
		want := []any{uint64(77), props.CorrelationID, to, subject, replyTo, ctype, created, expires, group, seq, rgroup}
		equal(t, what, got, want)
	}
	receive := func(t *testing.T, q string) (*goamqp.Receiver, *goamqp.Message) {
		t.Helper()
		rcv, err := s.NewReceiver(ctxT(t), "/queues/"+q, nil)
		if err != nil {
			t.Fatal(err)
		}
		m, err := rcv.Receive(ctxT(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		return rcv, m
	}
	for _, q := range []string{"cq", "qq"} {
		snd, err := s.NewSender(ctxT(t), "/queues/"+q, nil)
		if err != nil {
			t.Fatal(err)
		}
		m := goamqp.NewMessage([]byte("body"))
		m.Properties = props
		sendAccepted(t, snd, m)
		rcv, got := receive(t, q)
		check(t, q, got.Properties)
		if q == "cq" {
			// Dead-lettered, it keeps them too.
			if err := rcv.RejectMessage(ctxT(t), got, nil); err != nil {
				t.Fatal(err)
			}
			_, dl := receive(t, "dead")
			check(t, "dead-lettered", dl.Properties)
			if string(dl.GetData()) != "body" {
				t.Fatalf("dead-lettered body %q", dl.GetData())
			}
		}
	}
}
