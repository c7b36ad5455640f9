package amqp

import (
	"context"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// Ensure queue.declare of a stream validates as RabbitMQ does (durable,
// not exclusive, not auto-delete, the stream arguments, no arguments of
// other queue types), with its reply texts.
func TestStreamDeclareErrors(t *testing.T) {
	d := startDual(t, "")
	c := d.dial(t)
	const res = "queue 's' in vhost '/'"
	declare := func(durable, autoDelete, exclusive bool, args amqp091.Table) func(ch *amqp091.Channel) error {
		return func(ch *amqp091.Channel) error {
			a := amqp091.Table{"x-queue-type": "stream"}
			for k, v := range args {
				a[k] = v
			}
			_, err := ch.QueueDeclare("s", durable, autoDelete, exclusive, false, a)
			return err
		}
	}
	for _, tc := range []struct {
		name string
		code int
		text string
		f    func(ch *amqp091.Channel) error
	}{
		{"non-durable", 406, "PRECONDITION_FAILED - invalid property 'non-durable' for " + res, declare(false, false, false, nil)},
		{"exclusive", 406, "PRECONDITION_FAILED - invalid property 'exclusive-owner' for " + res, declare(true, false, true, nil)},
		{"auto-delete", 406, "PRECONDITION_FAILED - invalid property 'auto-delete' for " + res, declare(true, true, false, nil)},
		{"max-age unit", 406, "PRECONDITION_FAILED - invalid arg 'x-max-age' for " + res + ": invalid_max_age",
			declare(true, false, false, amqp091.Table{"x-max-age": "7W"})},
		{"max-age type", 406, "PRECONDITION_FAILED - invalid arg 'x-max-age' for " + res + ": {unacceptable_type,signedint}",
			declare(true, false, false, amqp091.Table{"x-max-age": int32(7)})},
		{"max-length-bytes", 406, "PRECONDITION_FAILED - invalid arg 'x-max-length-bytes' for " + res + ": {value_negative,-1}",
			declare(true, false, false, amqp091.Table{"x-max-length-bytes": int64(-1)})},
		{"max-length-bytes type", 406, "PRECONDITION_FAILED - invalid arg 'x-max-length-bytes' for " + res + ": \"expected integer, got longstr\"",
			declare(true, false, false, amqp091.Table{"x-max-length-bytes": "big"})},
		{"segment size", 406, "PRECONDITION_FAILED - Exceeded max value for x-stream-max-segment-size-bytes",
			declare(true, false, false, amqp091.Table{"x-stream-max-segment-size-bytes": int64(4_000_000_000)})},
		{"filter size", 406, "PRECONDITION_FAILED - Invalid value for x-stream-filter-size-bytes",
			declare(true, false, false, amqp091.Table{"x-stream-filter-size-bytes": int64(300)})},
		{"initial cluster size", 406, "PRECONDITION_FAILED - invalid arg 'x-initial-cluster-size' for " + res + ": {value_zero,0}",
			declare(true, false, false, amqp091.Table{"x-initial-cluster-size": int32(0)})},
		{"leader locator", 406, "PRECONDITION_FAILED - invalid arg 'x-queue-leader-locator' for " + res + ": invalid_queue_locator_arg",
			declare(true, false, false, amqp091.Table{"x-queue-leader-locator": "nearest"})},
		{"classic argument", 406, "PRECONDITION_FAILED - invalid arg 'x-message-ttl' for " + res + " of queue type rabbit_stream_queue",
			declare(true, false, false, amqp091.Table{"x-message-ttl": int32(1000)})},
		{"server-named", 406, "PRECONDITION_FAILED - Cannot declare a server-named queue for type rabbit_stream_queue",
			func(ch *amqp091.Channel) error {
				_, err := ch.QueueDeclare("", true, false, false, false, amqp091.Table{"x-queue-type": "stream"})
				return err
			}},
		{"reserved name", 403, "ACCESS_REFUSED - queue name 'amq.s' contains reserved prefix 'amq.*'",
			func(ch *amqp091.Channel) error {
				_, err := ch.QueueDeclare("amq.s", true, false, false, false, amqp091.Table{"x-queue-type": "stream"})
				return err
			}},
	} {
		t.Run(tc.name, func(t *testing.T) { chanErr(t, c, tc.code, tc.text, tc.f) })
	}
	if _, ok := d.broker.LookupStream("/", "s"); ok {
		t.Fatal("a refused declare created the stream")
	}
}

// Ensure a declared stream applies its arguments, redeclares
// equivalently, and refuses inequivalent redeclares as RabbitMQ does.
func TestStreamDeclareEquivalence(t *testing.T) {
	d := startDual(t, "")
	c, ch := d.channel(t)
	args := amqp091.Table{"x-queue-type": "stream", "x-max-length-bytes": int32(1 << 20), "x-max-age": "1h",
		"x-stream-max-segment-size-bytes": int64(1 << 16), "x-stream-filter-size-bytes": int32(32)}
	q, err := ch.QueueDeclare("eq", true, false, false, false, args)
	if err != nil || q.Name != "eq" || q.Messages != 0 || q.Consumers != 0 {
		t.Fatalf("declare: %+v %v", q, err)
	}
	s, ok := d.broker.LookupStream("/", "eq")
	if !ok {
		t.Fatal("no stream")
	}
	if cfg := s.Config(); cfg.MaxLengthBytes != 1<<20 || cfg.MaxAge != time.Hour || cfg.MaxSegmentSize != 1<<16 || cfg.FilterSize != 32 {
		t.Fatalf("stream config %+v", cfg)
	}
	// Integer types compare as one class.
	same := amqp091.Table{"x-queue-type": "stream", "x-max-length-bytes": int64(1 << 20), "x-max-age": "1h",
		"x-stream-max-segment-size-bytes": int32(1 << 16), "x-stream-filter-size-bytes": int64(32)}
	if _, err := ch.QueueDeclare("eq", true, false, false, false, same); err != nil {
		t.Fatalf("equivalent redeclare: %v", err)
	}
	publishAll(t, c, "", "eq", texts("m", 0, 3)...)
	if q, err := ch.QueueDeclare("eq", true, false, false, false, same); err != nil || q.Messages != 3 {
		t.Fatalf("redeclare count: %+v %v", q, err)
	}
	const res = "queue 'eq' in vhost '/'"
	for _, tc := range []struct {
		name string
		code int
		text string
		f    func(ch *amqp091.Channel) error
	}{
		{"no type", 406, "PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for " + res + ": received 'classic' but current is 'stream'",
			func(ch *amqp091.Channel) error {
				_, err := ch.QueueDeclare("eq", true, false, false, false, amqp091.Table{"x-max-length-bytes": int64(1 << 20)})
				return err
			}},
		{"max-length-bytes", 406, "PRECONDITION_FAILED - inequivalent arg 'x-max-length-bytes' for " + res + ": received '2048' but current is '1048576'",
			func(ch *amqp091.Channel) error {
				a := amqp091.Table{}
				for k, v := range same {
					a[k] = v
				}
				a["x-max-length-bytes"] = int64(2048)
				_, err := ch.QueueDeclare("eq", true, false, false, false, a)
				return err
			}},
		{"max-age absent", 406, "PRECONDITION_FAILED - inequivalent arg 'x-max-age' for " + res + ": received none but current is the value '1h' of type 'longstr'",
			func(ch *amqp091.Channel) error {
				a := amqp091.Table{}
				for k, v := range same {
					if k != "x-max-age" {
						a[k] = v
					}
				}
				_, err := ch.QueueDeclare("eq", true, false, false, false, a)
				return err
			}},
		{"durable", 406, "PRECONDITION_FAILED - inequivalent arg 'durable' for " + res + ": received 'false' but current is 'true'",
			func(ch *amqp091.Channel) error {
				_, err := ch.QueueDeclare("eq", false, false, false, false, same)
				return err
			}},
		{"exclusive", 405, "RESOURCE_LOCKED - cannot obtain exclusive access to locked " + res + ". It could be originally declared on another connection or the exclusive property value does not match that of the original declaration.",
			func(ch *amqp091.Channel) error {
				_, err := ch.QueueDeclare("eq", true, false, true, false, same)
				return err
			}},
	} {
		t.Run(tc.name, func(t *testing.T) { chanErr(t, c, tc.code, tc.text, tc.f) })
	}
	// A classic queue and a stream cannot share a name.
	ch2, err := c.Channel()
	must(t, err)
	if _, err := ch2.QueueDeclare("classic-q", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	env := d.env(t)
	_ = env.DeclareStream("classic-q", nil) // "already exists", which the client takes for success
	if ok, err := env.StreamExists("classic-q"); err != nil || ok {
		t.Fatalf("the stream client made a stream of a classic queue's name: %v %v", ok, err)
	}
	chanErr(t, c, 406, "", func(ch *amqp091.Channel) error {
		_, err := ch.QueueDeclare("classic-q", true, false, false, false, amqp091.Table{"x-queue-type": "stream"})
		return err
	})
	if ok, err := env.StreamExists("eq"); err != nil || !ok {
		t.Fatalf("the stream client does not see the AMQP stream: %v %v", ok, err)
	}
}

// Ensure a mandatory publish routed to a stream is not returned, and a
// publish to a stream that goes away is nacked or dropped, not hung.
func TestStreamPublishMandatory(t *testing.T) {
	d := startDual(t, "")
	c, ch := d.channel(t)
	declareStream(t, ch, "mand", nil)
	returns := ch.NotifyReturn(make(chan amqp091.Return, 1))
	must(t, ch.Confirm(false))
	dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", "mand", true, false, amqp091.Publishing{Body: []byte("x")})
	must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if ok, err := dc.WaitContext(ctx); !ok || err != nil {
		t.Fatalf("confirm: %v %v", ok, err)
	}
	select {
	case r := <-returns:
		t.Fatalf("returned: %+v", r)
	case <-time.After(100 * time.Millisecond):
	}
	_ = c
}
