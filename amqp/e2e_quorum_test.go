package amqp

import (
	"context"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

func qqArgs(kv ...any) amqp091.Table {
	t := amqp091.Table{"x-queue-type": "quorum"}
	for i := 0; i < len(kv); i += 2 {
		t[kv[i].(string)] = kv[i+1]
	}
	return t
}

// Ensure quorum queue declares are refused with RabbitMQ's texts and that
// a quorum queue is accepted, redeclared equivalently, and refused as a
// classic one.
func TestE2EQuorumDeclare(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c := tb.dial(t)
	declare := func(name string, durable, autoDelete, exclusive bool, args amqp091.Table) func(ch *amqp091.Channel) error {
		return func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclare(name, durable, autoDelete, exclusive, false, args)
			return err
		}
	}
	chanErr(t, c, 406, "PRECONDITION_FAILED - invalid property 'non-durable' for queue 'q' in vhost '/'",
		declare("q", false, false, false, qqArgs()))
	chanErr(t, c, 406, "PRECONDITION_FAILED - invalid property 'exclusive-owner' for queue 'q' in vhost '/'",
		declare("q", true, false, true, qqArgs()))
	chanErr(t, c, 406, "PRECONDITION_FAILED - invalid property 'auto-delete' for queue 'q' in vhost '/'",
		declare("q", true, true, false, qqArgs()))
	chanErr(t, c, 406, "PRECONDITION_FAILED - Cannot declare a server-named queue for type rabbit_quorum_queue",
		declare("", true, false, false, qqArgs()))
	chanErr(t, c, 406, "PRECONDITION_FAILED - invalid arg 'x-max-priority' for queue 'q' in vhost '/' of queue type rabbit_quorum_queue",
		declare("q", true, false, false, qqArgs("x-max-priority", int32(5))))
	chanOK(t, c, declare("q", true, false, false, qqArgs("x-delivery-limit", int32(3),
		"x-dead-letter-strategy", "at-most-once", "x-quorum-initial-group-size", int32(3), "x-consumer-timeout", int32(1000))))
	chanOK(t, c, declare("q", true, false, false, qqArgs("x-delivery-limit", int64(3),
		"x-dead-letter-strategy", "at-most-once", "x-quorum-initial-group-size", int32(3), "x-consumer-timeout", int32(1000))))
	chanOK(t, c, declare("p", true, false, false, qqArgs()))
	chanErr(t, c, 406, "PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'p' in vhost '/': received 'classic' but current is 'quorum'",
		declare("p", true, false, false, amqp091.Table{"x-queue-type": "classic"}))
	chanOK(t, c, declare("c", true, false, false, nil))
	chanErr(t, c, 406, "",
		declare("c", true, false, false, qqArgs()))
}

// qqSetup declares a quorum queue with args on a new connection and
// returns the channel.
func qqSetup(t *testing.T, tb *testBroker, name string, args amqp091.Table) (*amqp091.Connection, *amqp091.Channel) {
	t.Helper()
	c, ch := tb.channel(t)
	if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
	return c, ch
}

func publishTo(t *testing.T, ch *amqp091.Channel, key string, p amqp091.Publishing) {
	t.Helper()
	if err := ch.PublishWithContext(context.Background(), "", key, false, false, p); err != nil {
		t.Fatal(err)
	}
}

// wantDeliveryCount checks a delivery's x-delivery-count header (absent
// for 0) and redelivered flag.
func wantDeliveryCount(t *testing.T, d amqp091.Delivery, n int64) {
	t.Helper()
	v, has := d.Headers["x-delivery-count"]
	if n == 0 {
		if has || d.Redelivered {
			t.Fatalf("first delivery: redelivered %v headers %v", d.Redelivered, d.Headers)
		}
		return
	}
	if v != n || !d.Redelivered {
		t.Fatalf("x-delivery-count %T %v redelivered %v, want %d", v, v, d.Redelivered, n)
	}
}

// Ensure x-delivery-count counts reject(requeue), nack(requeue) and a
// channel closed before the ack, and that other headers stay.
func TestE2EQuorumDeliveryCount(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c, ch := qqSetup(t, tb, "q", qqArgs())
	publishTo(t, ch, "q", amqp091.Publishing{Body: []byte("m"), Headers: amqp091.Table{"app": "v"}})
	ds, err := ch.Consume("q", "", false, false, false, false, nil)
	must(t, err)
	d := recv(t, ds)
	wantDeliveryCount(t, d, 0)
	must(t, d.Reject(true))
	d = recv(t, ds)
	wantDeliveryCount(t, d, 1)
	if d.Headers["app"] != "v" {
		t.Fatalf("headers %v", d.Headers)
	}
	must(t, d.Nack(false, true))
	d = recv(t, ds)
	wantDeliveryCount(t, d, 2)
	must(t, ch.Close())

	ch2, err := c.Channel()
	must(t, err)
	ds2, err := ch2.Consume("q", "", false, false, false, false, nil)
	must(t, err)
	d = recv(t, ds2)
	wantDeliveryCount(t, d, 3)
	// A closed connection counts too.
	c.Close()
	_, ch3 := tb.channel(t)
	d, ok, err := ch3.Get("q", false)
	must(t, err)
	if !ok {
		t.Fatal("basic.get: empty")
	}
	wantDeliveryCount(t, d, 4)
	if d.Headers["app"] != "v" {
		t.Fatalf("headers %v", d.Headers)
	}
	must(t, d.Ack(false))
}

// Ensure a message returned past x-delivery-limit is dead-lettered with
// reason delivery_limit and RabbitMQ's x-death, or dropped without a
// dead-letter exchange, and that -1 is unlimited.
func TestE2EQuorumDeliveryLimit(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := tb.channel(t)
	_, err := ch.QueueDeclare("dead", true, false, false, false, nil)
	must(t, err)
	must(t, ch.ExchangeDeclare("dlx", "fanout", true, false, false, false, nil))
	must(t, ch.QueueBind("dead", "", "dlx", false, nil))
	_, err = ch.QueueDeclare("src", true, false, false, false, qqArgs("x-delivery-limit", int32(2), "x-dead-letter-exchange", "dlx"))
	must(t, err)
	from := time.Now()
	publishTo(t, ch, "src", amqp091.Publishing{Body: []byte("m")})
	ds, err := ch.Consume("src", "", false, false, false, false, nil)
	must(t, err)
	for i := range int64(3) {
		d := recv(t, ds)
		wantDeliveryCount(t, d, i)
		must(t, d.Reject(true))
	}
	none(t, ds)
	var d amqp091.Delivery
	deadline := time.Now().Add(wait)
	for {
		var ok bool
		d, ok, err = ch.Get("dead", true)
		must(t, err)
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not dead-lettered")
		}
		time.Sleep(5 * time.Millisecond)
	}
	checkDeaths(t, d, from, time.Now(), xDeath{count: 1, reason: "delivery_limit", queue: "src", exchange: "", keys: []string{"src"}})
	if d.Headers["x-first-death-reason"] != "delivery_limit" || d.Headers["x-last-death-queue"] != "src" {
		t.Fatalf("headers %v", d.Headers)
	}

	// Without a dead-letter exchange: dropped.
	_, err = ch.QueueDeclare("drop", true, false, false, false, qqArgs("x-delivery-limit", int32(1)))
	must(t, err)
	publishTo(t, ch, "drop", amqp091.Publishing{Body: []byte("m")})
	for i := range 2 {
		d, ok, err := ch.Get("drop", false)
		must(t, err)
		if !ok {
			t.Fatalf("get %d: empty", i)
		}
		must(t, d.Nack(false, true))
	}
	q, err := ch.QueueDeclarePassive("drop", true, false, false, false, qqArgs("x-delivery-limit", int32(1)))
	must(t, err)
	if q.Messages != 0 {
		t.Fatalf("drop has %d messages", q.Messages)
	}

	// -1: unlimited.
	_, err = ch.QueueDeclare("unl", true, false, false, false, qqArgs("x-delivery-limit", int32(-1)))
	must(t, err)
	publishTo(t, ch, "unl", amqp091.Publishing{Body: []byte("m")})
	for i := range int64(25) {
		d, ok, err := ch.Get("unl", false)
		must(t, err)
		if !ok {
			t.Fatalf("get %d: empty", i)
		}
		wantDeliveryCount(t, d, i)
		must(t, d.Reject(true))
	}
}

// Ensure publisher confirms work on a quorum queue and that the queue
// keeps its type and messages (transient ones too) across a restart.
func TestE2EQuorumConfirmRestart(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := qqSetup(t, tb, "q", qqArgs("x-delivery-limit", int32(5)))
	must(t, ch.Confirm(false))
	confirmOne(t, ch, "", "q", false, amqp091.Publishing{Body: []byte("m1"), DeliveryMode: amqp091.Persistent})
	confirmOne(t, ch, "", "q", false, amqp091.Publishing{Body: []byte("m2")}) // transient: kept too
	tb = tb.restart(t)
	_, ch = tb.channel(t)
	q, err := ch.QueueDeclare("q", true, false, false, false, qqArgs("x-delivery-limit", int32(5)))
	must(t, err)
	if q.Messages != 2 {
		t.Fatalf("%d messages after restart", q.Messages)
	}
	if b, ok := tb.broker.Queue("/", "q"); ok != nil || !b.Quorum() {
		t.Fatalf("recovered queue: %v", ok)
	}
	d, ok, err := ch.Get("q", true)
	must(t, err)
	if !ok || string(d.Body) != "m1" {
		t.Fatalf("get %v %q", ok, d.Body)
	}
}

// Ensure a quorum consumer on a channel with global qos fails as in
// RabbitMQ ≤4.2 (540, the connection closes).
func TestE2EQuorumGlobalQos(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	qqSetup(t, tb, "q", qqArgs())
	c := tb.dial(t)
	chanErr(t, c, 540, "NOT_IMPLEMENTED - queue 'q' in vhost '/' does not support global qos", func(ch *amqp091.Channel) error {
		if err := ch.Qos(5, 0, true); err != nil {
			return err
		}
		_, err := ch.Consume("q", "", false, false, false, false, nil)
		return err
	})
	// Per-consumer qos is fine.
	_, ch := tb.channel(t)
	must(t, ch.Qos(5, 0, false))
	_, err := ch.Consume("q", "", false, false, false, false, nil)
	must(t, err)
}
