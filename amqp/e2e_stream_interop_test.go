package amqp

import (
	"reflect"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	streamamqp "github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/message"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
)

// Ensure a message published over AMQP 0-9-1 to a stream reads with the
// stream Go client as RabbitMQ converts it (mc_amqpl): properties,
// application properties from the headers, annotations, body.
func TestStreamInteropAMQPToStreamClient(t *testing.T) {
	d := startDual(t, "")
	c, ch := d.channel(t)
	declareStream(t, ch, "s1", nil)
	ts := time.Unix(1_700_000_000, 0)
	publishAll(t, c, "", "s1", amqp091.Publishing{
		ContentType:     "application/json",
		ContentEncoding: "utf-8",
		MessageId:       "m-1",
		CorrelationId:   "urn:uuid:0f8fad5b-d9cb-469f-a165-70867728950e",
		DeliveryMode:    amqp091.Persistent,
		Priority:        3,
		Expiration:      "60000",
		Timestamp:       ts,
		Type:            "order",
		AppId:           "app",
		ReplyTo:         "replies q",
		Headers: amqp091.Table{
			"s": "str", "i": int32(42), "b": true, "l": int64(1 << 40),
			"x-custom": "xv", "arr": []any{"a"}, "dec": amqp091.Decimal{Scale: 1, Value: 5},
		},
		Body: []byte(`{"n":1}`),
	})

	env := d.env(t)
	sink := streamSubscribe(t, env, "s1", stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	msgs, offsets := sink.wait(t, 1)
	m := msgs[0]
	if offsets[0] != 0 {
		t.Fatalf("offset %d", offsets[0])
	}
	if string(m.GetData()) != `{"n":1}` {
		t.Fatalf("body %q", m.GetData())
	}
	p := m.Properties
	if p == nil {
		t.Fatal("no properties")
	}
	wantUUID := streamamqp.UUID{0x0f, 0x8f, 0xad, 0x5b, 0xd9, 0xcb, 0x46, 0x9f, 0xa1, 0x65, 0x70, 0x86, 0x77, 0x28, 0x95, 0x0e}
	if p.ContentType != "application/json" || p.ContentEncoding != "utf-8" || p.MessageID != "m-1" ||
		p.CorrelationID != wantUUID || !p.CreationTime.Equal(ts) || p.GroupID != "app" || p.ReplyTo != "/queues/replies%20q" {
		t.Fatalf("properties %+v", p)
	}
	want := map[string]any{"s": "str", "i": int32(42), "b": true, "l": int64(1 << 40)}
	if len(m.ApplicationProperties) != len(want) {
		t.Fatalf("application properties %v, want %v (arrays and x- headers are not application properties)", m.ApplicationProperties, want)
	}
	for k, v := range want {
		if m.ApplicationProperties[k] != v {
			t.Fatalf("application property %s: got %#v, want %#v", k, m.ApplicationProperties[k], v)
		}
	}
	for k, v := range map[string]any{"x-exchange": "", "x-routing-key": "s1", "x-basic-type": "order", "x-custom": "xv"} {
		if m.Annotations[k] != v {
			t.Fatalf("annotation %s: got %#v, want %#v (all: %v)", k, m.Annotations[k], v, m.Annotations)
		}
	}
	// The array and the decimal, which application properties cannot
	// hold, travel as an opaque binary annotation the Go client decodes
	// (it knows no AMQP 1.0 decimal).
	if b, ok := m.Annotations["x-opt-warren-amqp091-headers"].([]byte); !ok || len(b) == 0 {
		t.Fatalf("annotation x-opt-warren-amqp091-headers: %#v", m.Annotations["x-opt-warren-amqp091-headers"])
	}
	h := m.Header
	if h == nil || !h.Durable || h.Priority != 3 || h.TTL != time.Minute || !h.FirstAcquirer {
		t.Fatalf("header %+v", h)
	}
}

// Ensure a message published with the stream Go client consumes over
// AMQP 0-9-1 with its properties, application properties as headers,
// body, and the x-stream-offset header.
func TestStreamInteropStreamClientToAMQP(t *testing.T) {
	d := startDual(t, "")
	env := d.env(t)
	if err := env.DeclareStream("s2", nil); err != nil {
		t.Fatal(err)
	}
	created := time.UnixMilli(1_700_000_000_500)
	var msgs []message.StreamMessage
	for i := range 3 {
		m := streamamqp.NewMessage([]byte("body-" + string(rune('a'+i))))
		m.Properties = &streamamqp.MessageProperties{
			MessageID:       "sm-" + string(rune('a'+i)),
			CorrelationID:   uint64(100 + i),
			ContentType:     "text/plain",
			ContentEncoding: "identity",
			ReplyTo:         "/queues/answers",
			CreationTime:    created,
			GroupID:         "streamapp",
			UserID:          []byte("guest"),
		}
		m.ApplicationProperties = map[string]any{"k": "v", "n": int64(7 + i), "flag": true, "f": 2.5}
		msgs = append(msgs, m)
	}
	streamPublish(t, env, "s2", nil, msgs...)

	c, ch := d.channel(t)
	if q, err := ch.QueueDeclarePassive("s2", true, false, false, false, nil); err != nil || q.Messages != 3 {
		t.Fatalf("passive declare: %+v, %v", q, err)
	}
	_, deliveries := consumeStreamQ(t, c, "s2", 10, amqp091.Table{"x-stream-offset": "first"})
	ds := recvN(t, deliveries, 3)
	for i, dl := range ds {
		l := string(rune('a' + i))
		if string(dl.Body) != "body-"+l {
			t.Fatalf("delivery %d body %q", i, dl.Body)
		}
		if dl.Exchange != "" || dl.RoutingKey != "s2" || dl.Redelivered {
			t.Fatalf("delivery %d: exchange %q routing key %q redelivered %v", i, dl.Exchange, dl.RoutingKey, dl.Redelivered)
		}
		if dl.MessageId != "sm-"+l || dl.CorrelationId != "10"+string(rune('0'+i)) || dl.ContentType != "text/plain" ||
			dl.ContentEncoding != "identity" || dl.ReplyTo != "answers" || !dl.Timestamp.Equal(created.Truncate(time.Second)) ||
			dl.AppId != "streamapp" || dl.UserId != "guest" || dl.DeliveryMode != 0 || dl.Type != "" {
			t.Fatalf("delivery %d properties: %+v", i, dl)
		}
		want := amqp091.Table{"k": "v", "n": int64(7 + i), "flag": true, "f": 2.5, "x-stream-offset": int64(i)}
		if len(dl.Headers) != len(want) {
			t.Fatalf("delivery %d headers %v, want %v", i, dl.Headers, want)
		}
		for k, v := range want {
			if dl.Headers[k] != v {
				t.Fatalf("delivery %d header %s: got %#v, want %#v", i, k, dl.Headers[k], v)
			}
		}
	}
	ackAll(t, ds)
}

// Ensure an AMQP 0-9-1 round trip through a stream keeps what RabbitMQ
// keeps, and more: properties back as they were (delivery-mode 1 for a
// message published without one), headers sorted, plus x-stream-offset;
// a byte array comes back a byte array, and the headers RabbitMQ drops
// (arrays and tables outside x- headers, decimals) come back with their
// types (internal/msgconv).
func TestStreamInteropAMQPRoundTrip(t *testing.T) {
	d := startDual(t, "")
	c, ch := d.channel(t)
	declareStream(t, ch, "rt", nil)
	ts := time.Unix(1_700_000_123, 0)
	dec := amqp091.Decimal{Scale: 2, Value: -1234}
	in := amqp091.Publishing{
		ContentType: "text/plain", ContentEncoding: "gzip", MessageId: "urn:uuid:0f8fad5b-d9cb-469f-a165-70867728950e",
		CorrelationId: "c", Priority: 9, Expiration: "100000", Timestamp: ts, Type: "t", AppId: "a",
		ReplyTo: "amq.rabbitmq.reply-to.x", DeliveryMode: amqp091.Persistent,
		Headers: amqp091.Table{"z": "last", "a": int32(1), "CC": []any{"other"}, "x-h": int64(5),
			"tbl": amqp091.Table{"k": "v"}, "arr": []any{"s", int32(2)}, "bin": []byte{0, 1}, "when": ts,
			"dec": dec, "x-dec": amqp091.Table{"d": dec, "n": int32(3)}},
		Body: []byte("payload"),
	}
	plain := amqp091.Publishing{Body: []byte("plain")}
	publishAll(t, c, "", "rt", in, plain)
	_, deliveries := consumeStreamQ(t, c, "rt", 10, amqp091.Table{"x-stream-offset": "first"})
	ds := recvN(t, deliveries, 2)
	got := ds[0]
	if got.ContentType != in.ContentType || got.ContentEncoding != in.ContentEncoding || got.MessageId != in.MessageId ||
		got.CorrelationId != in.CorrelationId || got.Priority != in.Priority || got.Expiration != in.Expiration ||
		!got.Timestamp.Equal(ts) || got.Type != in.Type || got.AppId != in.AppId || got.ReplyTo != in.ReplyTo ||
		got.DeliveryMode != 2 || string(got.Body) != "payload" || got.RoutingKey != "rt" {
		t.Fatalf("round trip: %+v", got)
	}
	want := amqp091.Table{"z": "last", "a": int32(1), "CC": []any{"other"}, "x-h": int64(5),
		"tbl": amqp091.Table{"k": "v"}, "arr": []any{"s", int32(2)}, "bin": []byte{0, 1}, "when": ts.UTC(),
		"dec": dec, "x-dec": amqp091.Table{"d": dec, "n": int32(3)}, "x-stream-offset": int64(0)}
	if g, ok := got.Headers["when"].(time.Time); ok {
		got.Headers["when"] = g.UTC()
	}
	if !reflect.DeepEqual(got.Headers, want) {
		t.Fatalf("headers\n got %#v\nwant %#v", got.Headers, want)
	}
	if ds[1].DeliveryMode != 1 || len(ds[1].Headers) != 1 || offsetOf(t, ds[1]) != 1 {
		t.Fatalf("plain message: delivery mode %d, headers %v", ds[1].DeliveryMode, ds[1].Headers)
	}
}

// Ensure a stream is one entity for both protocols: created by the
// stream client, AMQP declares it passively, publishes to it through the
// default exchange and a binding, and deletes it; created over AMQP, the
// stream client publishes to it and sees its deletion.
func TestStreamInteropSameEntity(t *testing.T) {
	d := startDual(t, "")
	env := d.env(t)
	c, ch := d.channel(t)

	if err := env.DeclareStream("from-stream", &stream.StreamOptions{MaxLengthBytes: stream.ByteCapacity{}.GB(1)}); err != nil {
		t.Fatal(err)
	}
	// The stream protocol's arguments are the queue's (the client sends
	// queue-leader-locator least-leaders by default): an equivalent
	// redeclare passes, another fails.
	equivalent := amqp091.Table{"x-queue-type": "stream", "x-max-length-bytes": int64(1_000_000_000), "x-queue-leader-locator": "least-leaders"}
	if _, err := ch.QueueDeclare("from-stream", true, false, false, false, equivalent); err != nil {
		t.Fatalf("redeclare: %v", err)
	}
	chanErr(t, c, 406, "PRECONDITION_FAILED - inequivalent arg 'x-queue-leader-locator' for queue 'from-stream' in vhost '/': "+
		"received none but current is the value 'least-leaders' of type 'longstr'", func(ch *amqp091.Channel) error {
		_, err := ch.QueueDeclare("from-stream", true, false, false, false, amqp091.Table{"x-queue-type": "stream", "x-max-length-bytes": int64(1_000_000_000)})
		return err
	})
	must(t, ch.ExchangeDeclare("ex", "direct", true, false, false, false, nil))
	must(t, ch.QueueBind("from-stream", "rk", "ex", false, nil))
	publishAll(t, c, "", "from-stream", texts("default", 0, 2)...)
	publishAll(t, c, "ex", "rk", texts("bound", 0, 2)...)
	sink := streamSubscribe(t, env, "from-stream", stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	msgs, _ := sink.wait(t, 4)
	for i, want := range []struct{ body, exchange, key string }{
		{"default-0", "", "from-stream"}, {"default-1", "", "from-stream"}, {"bound-0", "ex", "rk"}, {"bound-1", "ex", "rk"},
	} {
		m := msgs[i]
		if string(m.GetData()) != want.body || m.Annotations["x-exchange"] != want.exchange || m.Annotations["x-routing-key"] != want.key {
			t.Fatalf("message %d: %q %v", i, m.GetData(), m.Annotations)
		}
	}
	// An AMQP consumer sees the exchange and routing key of each.
	_, deliveries := consumeStreamQ(t, c, "from-stream", 10, amqp091.Table{"x-stream-offset": "first"})
	ds := recvN(t, deliveries, 4)
	if ds[2].Exchange != "ex" || ds[2].RoutingKey != "rk" || ds[0].Exchange != "" || ds[0].RoutingKey != "from-stream" {
		t.Fatalf("deliveries: %+v / %+v", ds[0], ds[2])
	}
	ackAll(t, ds)

	// Deleted over AMQP: gone for the stream client, and its binding too.
	ch2, err := c.Channel()
	must(t, err)
	if _, err := ch2.QueueDelete("from-stream", false, false, false); err != nil {
		t.Fatal(err)
	}
	if ok, err := env.StreamExists("from-stream"); err != nil || ok {
		t.Fatalf("StreamExists after queue.delete: %v, %v", ok, err)
	}
	chanErr(t, c, 404, "NOT_FOUND - no queue 'from-stream' in vhost '/'", func(ch *amqp091.Channel) error {
		_, err := ch.QueueDeclarePassive("from-stream", true, false, false, false, nil)
		return err
	})

	// Created over AMQP: the stream client publishes and deletes.
	declareStream(t, ch2, "from-amqp", amqp091.Table{"x-max-age": "7D", "x-stream-max-segment-size-bytes": int64(1 << 20)})
	streamPublish(t, env, "from-amqp", nil, streamamqp.NewMessage([]byte("hello")))
	_, deliveries = consumeStreamQ(t, c, "from-amqp", 1, amqp091.Table{"x-stream-offset": "first"})
	if got := recv(t, deliveries); string(got.Body) != "hello" {
		t.Fatalf("got %q", got.Body)
	}
	if err := env.DeleteStream("from-amqp"); err != nil {
		t.Fatal(err)
	}
	chanErr(t, c, 404, "NOT_FOUND - no queue 'from-amqp' in vhost '/'", func(ch *amqp091.Channel) error {
		_, err := ch.QueueDeclarePassive("from-amqp", true, false, false, false, nil)
		return err
	})
}

// Ensure a stream and its bindings survive a restart: publishing through
// the binding still reaches it.
func TestStreamRestartKeepsBindings(t *testing.T) {
	d := startDual(t, "")
	c, ch := d.channel(t)
	declareStream(t, ch, "durable-s", amqp091.Table{"x-max-length-bytes": int64(1 << 30)})
	must(t, ch.ExchangeDeclare("fan", "fanout", true, false, false, false, nil))
	must(t, ch.QueueBind("durable-s", "", "fan", false, nil))
	publishAll(t, c, "fan", "", texts("before", 0, 1)...)
	c.Close()

	d = d.restart(t)
	c, ch = d.channel(t)
	if _, err := ch.QueueDeclare("durable-s", true, false, false, false,
		amqp091.Table{"x-queue-type": "stream", "x-max-length-bytes": int64(1 << 30)}); err != nil {
		t.Fatalf("redeclare after restart: %v", err)
	}
	publishAll(t, c, "fan", "", texts("after", 0, 1)...)
	_, deliveries := consumeStreamQ(t, c, "durable-s", 5, amqp091.Table{"x-stream-offset": "first"})
	ds := recvN(t, deliveries, 2)
	wantBodies(t, "after restart", ds, []string{"before-0", "after-0"})
	env := d.env(t)
	msgs, _ := streamSubscribe(t, env, "durable-s", stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First())).wait(t, 2)
	if string(msgs[1].GetData()) != "after-0" || msgs[1].Annotations["x-exchange"] != "fan" {
		t.Fatalf("stream client after restart: %q %v", msgs[1].GetData(), msgs[1].Annotations)
	}
}
