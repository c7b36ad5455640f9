package amqp

import (
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// consumeOn opens a channel with prefetch on c and consumes q with args.
func consumeOn(t *testing.T, c *amqp091.Connection, q string, prefetch int, args amqp091.Table) (*amqp091.Channel, <-chan amqp091.Delivery) {
	t.Helper()
	ch, err := c.Channel()
	must(t, err)
	if prefetch > 0 {
		must(t, ch.Qos(prefetch, 0, false))
	}
	d, err := ch.Consume(q, "", false, false, false, false, args)
	must(t, err)
	return ch, d
}

func publishBody(t *testing.T, ch *amqp091.Channel, q, body string) {
	t.Helper()
	must(t, ch.Publish("", q, false, false, amqp091.Publishing{Body: []byte(body)}))
}

func TestConsumerPriority(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c, pub := tb.channel(t)
	_, err := pub.QueueDeclare("prio", false, false, false, false, nil)
	must(t, err)
	_, low := consumeOn(t, c, "prio", 1, nil) // registered first
	highCh, high := consumeOn(t, c, "prio", 1, amqp091.Table{"x-priority": int32(10)})

	publishBody(t, pub, "prio", "m1")
	m1 := recv(t, high)
	if string(m1.Body) != "m1" {
		t.Fatalf("high got %q", m1.Body)
	}
	none(t, low)
	publishBody(t, pub, "prio", "m2") // high is full: low gets it
	if m := recv(t, low); string(m.Body) != "m2" {
		t.Fatalf("low got %q", m.Body)
	}
	publishBody(t, pub, "prio", "m3") // both full
	none(t, high)
	must(t, m1.Ack(false))
	if m := recv(t, high); string(m.Body) != "m3" {
		t.Fatalf("high got %q", m.Body)
	}
	_ = highCh

	// Negative priorities rank below the default.
	_, err = pub.QueueDeclare("prio2", false, false, false, false, nil)
	must(t, err)
	_, neg := consumeOn(t, c, "prio2", 0, amqp091.Table{"x-priority": int64(-5)})
	_, def := consumeOn(t, c, "prio2", 0, nil)
	for i := 0; i < 3; i++ {
		publishBody(t, pub, "prio2", "x")
	}
	recvN(t, def, 3)
	none(t, neg)
}

func TestConsumerPriorityRoundRobinWithinLevel(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c, pub := tb.channel(t)
	_, err := pub.QueueDeclare("rr", false, false, false, false, nil)
	must(t, err)
	_, low := consumeOn(t, c, "rr", 0, amqp091.Table{"x-priority": int16(-1)})
	_, a := consumeOn(t, c, "rr", 0, amqp091.Table{"x-priority": int8(3)})
	_, b := consumeOn(t, c, "rr", 0, amqp091.Table{"x-priority": int8(3)})
	for i := 0; i < 4; i++ {
		publishBody(t, pub, "rr", "x")
	}
	recvN(t, a, 2)
	recvN(t, b, 2)
	none(t, low)
}

func TestConsumerArgErrors(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c, pub := tb.channel(t)
	_, err := pub.QueueDeclare("q", false, false, false, false, nil)
	must(t, err)
	chanErr(t, c, 406, "PRECONDITION_FAILED - invalid arg 'x-priority' for queue 'q' in vhost '/': {unacceptable_type,longstr}", func(ch *amqp091.Channel) error {
		_, err := ch.Consume("q", "", false, false, false, false, amqp091.Table{"x-priority": "high"})
		return err
	})
	chanErr(t, c, 406, "", func(ch *amqp091.Channel) error {
		_, err := ch.Consume("q", "", false, false, false, false, amqp091.Table{"x-consumer-timeout": int32(1000)})
		return err
	})
}

func TestSingleActiveConsumer(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c, pub := tb.channel(t)
	_, err := pub.QueueDeclare("sac", false, false, false, false, amqp091.Table{"x-single-active-consumer": true})
	must(t, err)
	ch1, first := consumeOn(t, c, "sac", 0, nil)
	_, second := consumeOn(t, c, "sac", 0, amqp091.Table{"x-priority": int32(5)}) // no preemption
	_, third := consumeOn(t, c, "sac", 0, nil)
	for i := 0; i < 3; i++ {
		publishBody(t, pub, "sac", "m")
	}
	recvN(t, first, 3)
	none(t, second)
	none(t, third)

	// Exclusive consumers are refused on a SAC queue.
	chanErr(t, c, 403, "", func(ch *amqp091.Channel) error {
		_, err := ch.Consume("sac", "", false, true, false, false, nil)
		return err
	})

	// The active one goes: its unacked messages go to the next one (the
	// highest priority).
	must(t, ch1.Close())
	ds := recvN(t, second, 3)
	for _, d := range ds {
		if !d.Redelivered {
			t.Fatal("requeued message not redelivered")
		}
		must(t, d.Ack(false))
	}
	none(t, third)
}

func TestSingleActiveConsumerGet(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := tb.channel(t)
	_, err := ch.QueueDeclare("sacget", false, false, false, false, amqp091.Table{"x-single-active-consumer": true})
	must(t, err)
	publishBody(t, ch, "sacget", "m")
	m, ok, err := ch.Get("sacget", false)
	must(t, err)
	if !ok || string(m.Body) != "m" {
		t.Fatalf("get: %v %q", ok, m.Body)
	}
	must(t, m.Ack(false))
}

func TestConsumerTimeout(t *testing.T) {
	tb := startBroker(t, brokerOpts{cfg: Config{ConsumerTimeout: 200 * time.Millisecond}})
	c, pub := tb.channel(t)
	_, err := pub.QueueDeclare("slow", false, false, false, false, nil)
	must(t, err)

	// A consumer that acks in time keeps its channel.
	okCh, okD := consumeOn(t, c, "slow", 0, nil)
	okClosed := okCh.NotifyClose(make(chan *amqp091.Error, 1))
	for i := 0; i < 3; i++ {
		publishBody(t, pub, "slow", "fast")
		must(t, recv(t, okD).Ack(false))
		time.Sleep(100 * time.Millisecond)
	}
	select {
	case e := <-okClosed:
		t.Fatalf("acking channel closed: %v", e)
	default:
	}
	must(t, okCh.Close())

	ch, d := consumeOn(t, c, "slow", 0, nil)
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	publishBody(t, pub, "slow", "late")
	start := time.Now()
	if m := recv(t, d); string(m.Body) != "late" {
		t.Fatalf("got %q", m.Body)
	}
	e := closeReason(t, closed)
	if el := time.Since(start); el < 150*time.Millisecond {
		t.Fatalf("closed after %v", el)
	}
	want := "PRECONDITION_FAILED - delivery acknowledgement on channel "
	if e.Code != 406 || !strings.HasPrefix(e.Reason, want) || !strings.Contains(e.Reason, " timed out. Timeout value used: 200 ms. This timeout value can be configured, see consumers doc guide to learn more") {
		t.Fatalf("got %d %q", e.Code, e.Reason)
	}
	// The message was requeued.
	m, ok, err := pub.Get("slow", true)
	must(t, err)
	if !ok || string(m.Body) != "late" || !m.Redelivered {
		t.Fatalf("get after timeout: %v %q %v", ok, m.Body, m.Redelivered)
	}
	// The connection still works.
	ch2, err := c.Channel()
	must(t, err)
	_, err = ch2.QueueDeclarePassive("slow", false, false, false, false, nil)
	must(t, err)
}

func TestDirectReplyTo(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	cc, client := tb.channel(t)
	_, server := tb.channel(t)
	_, err := server.QueueDeclare("rpc", false, false, false, false, nil)
	must(t, err)
	reqs, err := server.Consume("rpc", "", true, false, false, false, nil)
	must(t, err)

	// Without the reply consumer: 406.
	chanErr(t, cc, 406, "PRECONDITION_FAILED - fast reply consumer does not exist", func(ch *amqp091.Channel) error {
		return ch.Publish("", "rpc", false, false, amqp091.Publishing{ReplyTo: "amq.rabbitmq.reply-to", Body: []byte("x")})
	})
	chanErr(t, cc, 406, "PRECONDITION_FAILED - reply consumer cannot acknowledge", func(ch *amqp091.Channel) error {
		_, err := ch.Consume("amq.rabbitmq.reply-to", "", false, false, false, false, nil)
		return err
	})
	chanErr(t, cc, 406, "PRECONDITION_FAILED - reply consumer already set", func(ch *amqp091.Channel) error {
		if _, err := ch.Consume("amq.rabbitmq.reply-to", "", true, false, false, false, nil); err != nil {
			return err
		}
		_, err := ch.Consume("amq.rabbitmq.reply-to", "", true, false, false, false, nil)
		return err
	})

	replies, err := client.Consume("amq.rabbitmq.reply-to", "", true, false, false, false, nil)
	must(t, err)
	for i := 0; i < 3; i++ {
		must(t, client.Publish("", "rpc", false, false, amqp091.Publishing{ReplyTo: "amq.rabbitmq.reply-to", CorrelationId: "c", Body: []byte("ping")}))
		req := recv(t, reqs)
		if !strings.HasPrefix(req.ReplyTo, "amq.rabbitmq.reply-to.") || len(req.ReplyTo) <= len("amq.rabbitmq.reply-to.") {
			t.Fatalf("reply-to %q", req.ReplyTo)
		}
		must(t, server.Publish("", req.ReplyTo, true, false, amqp091.Publishing{CorrelationId: req.CorrelationId, Body: []byte("pong")}))
		rep := recv(t, replies)
		if string(rep.Body) != "pong" || rep.CorrelationId != "c" || rep.RoutingKey != req.ReplyTo {
			t.Fatalf("reply %q %q %q", rep.Body, rep.CorrelationId, rep.RoutingKey)
		}
	}

	// Declaring the pseudo-queue or a live reply address: (0, 1).
	for _, name := range []string{"amq.rabbitmq.reply-to", req0ReplyTo(t, client, reqs)} {
		q, err := server.QueueDeclarePassive(name, false, false, false, false, nil)
		must(t, err)
		if q.Messages != 0 || q.Consumers != 1 {
			t.Fatalf("declare %s: %+v", name, q)
		}
	}

	// The requester leaves: a mandatory reply is still routed (no return).
	must(t, client.Publish("", "rpc", false, false, amqp091.Publishing{ReplyTo: "amq.rabbitmq.reply-to", Body: []byte("last")}))
	req := recv(t, reqs)
	must(t, client.Close())
	time.Sleep(50 * time.Millisecond)
	chanErr(t, tb.dial(t), 404, "", func(ch *amqp091.Channel) error {
		_, err := ch.QueueDeclarePassive(req.ReplyTo, false, false, false, false, nil)
		return err
	})
	returns := server.NotifyReturn(make(chan amqp091.Return, 1))
	must(t, server.Confirm(false))
	conf := server.NotifyPublish(make(chan amqp091.Confirmation, 1))
	must(t, server.Publish("", req.ReplyTo, true, false, amqp091.Publishing{Body: []byte("late")}))
	select {
	case c := <-conf:
		if !c.Ack {
			t.Fatal("nack")
		}
	case <-time.After(wait):
		t.Fatal("no confirm")
	}
	select {
	case r := <-returns:
		t.Fatalf("unexpected return %q", r.ReplyText)
	case <-time.After(100 * time.Millisecond):
	}
}

// req0ReplyTo sends a request and returns its rewritten reply-to.
func req0ReplyTo(t *testing.T, client *amqp091.Channel, reqs <-chan amqp091.Delivery) string {
	t.Helper()
	must(t, client.Publish("", "rpc", false, false, amqp091.Publishing{ReplyTo: "amq.rabbitmq.reply-to", Body: []byte("q")}))
	return recv(t, reqs).ReplyTo
}

func TestSingleActiveConsumerQuorumGet(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c, ch := tb.channel(t)
	_, err := ch.QueueDeclare("qsac", true, false, false, false, amqp091.Table{"x-queue-type": "quorum", "x-single-active-consumer": true})
	must(t, err)
	chanErr(t, c, 405, "RESOURCE_LOCKED - cannot obtain access to locked queue 'qsac' in vhost '/'. basic.get operations are not supported by quorum queues with single active consumer", func(ch *amqp091.Channel) error {
		_, _, err := ch.Get("qsac", false)
		return err
	})
}
