package amqp

import (
	"context"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// Helpers of the e2e_semantics_* tests: TTL, dead-lettering, limits and
// priorities of classic queues.

// declareArgs declares a queue with arguments on ch.
func declareArgs(t *testing.T, ch *amqp091.Channel, name string, durable bool, args amqp091.Table) {
	t.Helper()
	if _, err := ch.QueueDeclare(name, durable, false, false, false, args); err != nil {
		t.Fatalf("declare %s: %v", name, err)
	}
}

// confirmed publishes p on a confirm channel and returns whether the
// broker acked (true) or nacked (false) it.
func confirmed(t *testing.T, ch *amqp091.Channel, exchange, key string, p amqp091.Publishing) bool {
	t.Helper()
	dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), exchange, key, false, false, p)
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	ok, err := dc.WaitContext(ctx)
	if err != nil {
		t.Fatalf("confirm: %v", err)
	}
	return ok
}

// mustConfirm publishes bodies (with p's other fields) and requires acks.
func mustConfirm(t *testing.T, ch *amqp091.Channel, exchange, key string, p amqp091.Publishing, bodies ...string) {
	t.Helper()
	for _, b := range bodies {
		p.Body = []byte(b)
		if !confirmed(t, ch, exchange, key, p) {
			t.Fatalf("publish %q nacked", b)
		}
	}
}

// messages returns a queue's ready count from a passive declare.
func messages(t *testing.T, ch *amqp091.Channel, name string) int {
	t.Helper()
	q, err := ch.QueueDeclarePassive(name, false, false, false, false, nil)
	if err != nil {
		t.Fatalf("passive declare %s: %v", name, err)
	}
	return q.Messages
}

// waitMessages polls the ready count of a queue until it is n.
func waitMessages(t *testing.T, ch *amqp091.Channel, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		got := messages(t, ch, name)
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue %s has %d messages, want %d", name, got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// getBodies basic.gets (no-ack) everything ready.
func getBodies(t *testing.T, ch *amqp091.Channel, name string) []string {
	t.Helper()
	var out []string
	for {
		d, ok, err := ch.Get(name, true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		out = append(out, string(d.Body))
	}
}

// TestSemanticsQueueTTL: x-message-ttl expires messages with no consumer
// and no get: declare-ok counts drop by themselves, nothing is delivered.
func TestSemanticsQueueTTL(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := confirmChannel(t, tb)
	declareArgs(t, ch, "ttl", false, amqp091.Table{"x-message-ttl": int32(100)})
	start := time.Now()
	mustConfirm(t, ch, "", "ttl", amqp091.Publishing{}, "a", "b", "c")
	if n := messages(t, ch, "ttl"); n != 3 && time.Since(start) < 80*time.Millisecond {
		t.Fatalf("%d messages before the TTL", n)
	}
	waitMessages(t, ch, "ttl", 0)
	// The broker stamps enqueue times in milliseconds: allow for the
	// truncation.
	if el := time.Since(start); el < 98*time.Millisecond {
		t.Fatalf("expired after %v", el)
	}
	ds, err := ch.Consume("ttl", "", true, false, false, false, nil)
	must(t, err)
	none(t, ds)
}

// TestSemanticsMessageTTL: the expiration property expires a message
// wherever it is in the queue (not only at the head): get-ok's
// message-count and declare-ok exclude it at once, and the effective TTL
// is the smaller of queue and message TTL.
func TestSemanticsMessageTTL(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := confirmChannel(t, tb)
	declareArgs(t, ch, "mttl", false, amqp091.Table{"x-message-ttl": int32(60_000)})
	mustConfirm(t, ch, "", "mttl", amqp091.Publishing{}, "head")
	mustConfirm(t, ch, "", "mttl", amqp091.Publishing{Expiration: "50"}, "short")
	mustConfirm(t, ch, "", "mttl", amqp091.Publishing{Expiration: "600000"}, "long")
	if n := messages(t, ch, "mttl"); n != 3 {
		t.Fatalf("%d messages, want 3", n)
	}
	waitMessages(t, ch, "mttl", 2)
	d, ok, err := ch.Get("mttl", true)
	if err != nil || !ok || string(d.Body) != "head" || d.MessageCount != 1 {
		t.Fatalf("get %q count %d ok %v err %v", d.Body, d.MessageCount, ok, err)
	}
	d, ok, err = ch.Get("mttl", true)
	if err != nil || !ok || string(d.Body) != "long" || d.MessageCount != 0 || d.Expiration != "600000" {
		t.Fatalf("get %q count %d exp %q", d.Body, d.MessageCount, d.Expiration)
	}
	// The minimum wins: the queue's 40 ms beats the message's minute.
	declareArgs(t, ch, "mttl2", false, amqp091.Table{"x-message-ttl": int32(40)})
	mustConfirm(t, ch, "", "mttl2", amqp091.Publishing{Expiration: "60000"}, "x")
	waitMessages(t, ch, "mttl2", 0)
	// Purge counts only what has not expired.
	mustConfirm(t, ch, "", "mttl", amqp091.Publishing{Expiration: "30"}, "e1", "e2")
	mustConfirm(t, ch, "", "mttl", amqp091.Publishing{}, "kept")
	time.Sleep(60 * time.Millisecond)
	n, err := ch.QueuePurge("mttl", false)
	if err != nil || n != 1 {
		t.Fatalf("purge %d %v, want 1", n, err)
	}
}

// TestSemanticsTTLRequeue: a requeued message keeps its expiry instant: a
// nack with requeue after it expired drops it rather than redelivering.
func TestSemanticsTTLRequeue(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := confirmChannel(t, tb)
	declareArgs(t, ch, "rq", false, amqp091.Table{"x-message-ttl": int32(150)})
	mustConfirm(t, ch, "", "rq", amqp091.Publishing{}, "m", "n")
	_, cch := tb.channel(t)
	ds, err := cch.Consume("rq", "c", false, false, false, false, nil)
	must(t, err)
	got := recvN(t, ds, 2)
	must(t, got[1].Nack(false, true)) // n: before its expiry, back and redelivered
	d := recv(t, ds)
	if string(d.Body) != "n" || !d.Redelivered {
		t.Fatalf("redelivered %q %v", d.Body, d.Redelivered)
	}
	time.Sleep(200 * time.Millisecond)
	must(t, got[0].Nack(false, true)) // m: expired meanwhile
	must(t, d.Nack(false, true))      // n: too
	none(t, ds)
	if n := messages(t, ch, "rq"); n != 0 {
		t.Fatalf("%d messages", n)
	}
}

// TestSemanticsTTLZero: with x-message-ttl 0 a message reaches a consumer
// that can take it at once and expires otherwise.
func TestSemanticsTTLZero(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := confirmChannel(t, tb)
	declareArgs(t, ch, "z", false, amqp091.Table{"x-message-ttl": int32(0)})
	mustConfirm(t, ch, "", "z", amqp091.Publishing{}, "nobody")
	if n := messages(t, ch, "z"); n != 0 {
		t.Fatalf("%d messages", n)
	}
	_, cch := tb.channel(t)
	must(t, cch.Qos(1, 0, false))
	ds, err := cch.Consume("z", "c", false, false, false, false, nil)
	must(t, err)
	mustConfirm(t, ch, "", "z", amqp091.Publishing{}, "taken")
	d := recv(t, ds)
	if string(d.Body) != "taken" {
		t.Fatalf("got %q", d.Body)
	}
	mustConfirm(t, ch, "", "z", amqp091.Publishing{}, "full1", "full2")
	waitMessages(t, ch, "z", 0)
	must(t, d.Ack(false))
	none(t, ds)
}

// TestSemanticsQueueExpires: x-expires deletes a queue unused that long;
// a consumer keeps it, and the period restarts when it leaves.
func TestSemanticsQueueExpires(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c, ch := confirmChannel(t, tb)
	args := amqp091.Table{"x-expires": int32(150)}
	declareArgs(t, ch, "xq", false, args)
	mustConfirm(t, ch, "", "xq", amqp091.Publishing{}, "m")
	_, cch := tb.channel(t)
	_, err := cch.Consume("xq", "c", false, false, false, false, nil)
	must(t, err)
	time.Sleep(250 * time.Millisecond)
	if n := messages(t, ch, "xq"); n != 0 { // delivered, unacked
		t.Fatalf("%d messages", n)
	}
	must(t, cch.Cancel("c", false))
	time.Sleep(60 * time.Millisecond)
	declareArgs(t, ch, "xq", false, args) // a redeclare restarts the period
	redeclared := time.Now()
	// Watch through the broker: a passive declare would count as a use.
	deadline := time.Now().Add(wait)
	for {
		if _, err := tb.broker.Queue("/", "xq"); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("queue not expired")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if el := time.Since(redeclared); el < 140*time.Millisecond {
		t.Fatalf("expired %v after the redeclare", el)
	}
	pch, err := c.Channel()
	must(t, err)
	_, err = pch.QueueDeclarePassive("xq", false, false, false, false, nil)
	amqpErr(t, err, 404, "NOT_FOUND - no queue 'xq' in vhost '/'")
}
