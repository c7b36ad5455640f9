package amqp

import (
	"fmt"
	"slices"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warren-mq/warren/amqp/wire"
)

// TestConfirmsFanoutExactlyOnce publishes many messages routed to two
// queues each and checks that every sequence number is acked exactly
// once, and that both queues hold every message in order.
func TestConfirmsFanoutExactlyOnce(t *testing.T) {
	const n = 1000
	tb := startBroker(t, brokerOpts{})
	_, ch := confirmChannel(t, tb)
	for _, q := range []string{"fa", "fb"} {
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		must(t, ch.QueueBind(q, "", "amq.fanout", false, nil))
	}
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, n))
	want := strs("c", n)
	for i, b := range want {
		mode := amqp091.Transient
		if i%2 == 0 {
			mode = amqp091.Persistent
		}
		publish(t, ch, "amq.fanout", "", amqp091.Publishing{Body: []byte(b), DeliveryMode: mode})
	}
	seen := make([]bool, n+1)
	var sum uint64
	timeout := time.After(wait)
	for i := 0; i < n; i++ {
		select {
		case c := <-confirms:
			if !c.Ack || c.DeliveryTag < 1 || c.DeliveryTag > n || seen[c.DeliveryTag] {
				t.Fatalf("confirmation %+v (seen before: %v)", c, c.DeliveryTag <= n && seen[c.DeliveryTag])
			}
			seen[c.DeliveryTag] = true
			sum += c.DeliveryTag
		case <-timeout:
			t.Fatalf("%d of %d confirmations", i, n)
		}
	}
	if sum != n*(n+1)/2 {
		t.Fatalf("confirmed tags sum to %d", sum)
	}
	select {
	case c := <-confirms:
		t.Fatalf("extra confirmation %+v", c)
	case <-time.After(100 * time.Millisecond):
	}
	for _, q := range []string{"fa", "fb"} {
		info, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
		if err != nil || info.Messages != n {
			t.Fatalf("%s: %+v %v", q, info, err)
		}
		if got := drain(t, ch, q); !slices.Equal(got, want) {
			t.Fatalf("%s: %d messages, out of order or altered", q, len(got))
		}
	}
}

// TestConfirmAcksCoalesced reads the acks on the wire, as a client
// applies them (a multiple ack settles every tag up to its own): each
// tag is settled exactly once, never nacked. Publishes alternate between
// a durable queue (persistent, fsync) and a transient one, so they
// complete out of order and acks get coalesced.
func TestConfirmAcksCoalesced(t *testing.T) {
	const n = 500
	tb := startBroker(t, brokerOpts{})
	c := rawDial(t, tb.addr)
	c.open(0)
	c.openChannel(1)
	c.send(1, &wire.ConfirmSelect{})
	c.expect(1, "confirm.select-ok")
	c.send(1, &wire.QueueDeclare{Queue: "co", Durable: true})
	c.expect(1, "queue.declare-ok")
	c.send(1, &wire.QueueDeclare{Queue: "cot"})
	c.expect(1, "queue.declare-ok")
	persistent, err := wire.AppendProperties(nil, &wire.Properties{DeliveryMode: 2})
	must(t, err)
	var b []byte
	for i := 0; i < n; i++ {
		q, props := "co", persistent
		if i%2 == 1 {
			q, props = "cot", []byte{0, 0}
		}
		b = wire.AppendMethodFrame(b, 1, &wire.BasicPublish{RoutingKey: q})
		body := []byte(fmt.Sprint(i))
		b = wire.AppendHeaderFrame(b, 1, wire.ClassBasic, uint64(len(body)), props)
		b = wire.AppendBodyFrames(b, 1, body, 131072)
	}
	c.write(b)
	acked := make([]bool, n+1)
	left, frames, multiples := n, 0, 0
	for left > 0 {
		m := c.expect(1, "basic.ack").(*wire.BasicAck)
		frames++
		if m.DeliveryTag < 1 || m.DeliveryTag > n {
			t.Fatalf("ack of tag %d", m.DeliveryTag)
		}
		if !m.Multiple {
			if acked[m.DeliveryTag] {
				t.Fatalf("tag %d acked twice", m.DeliveryTag)
			}
			acked[m.DeliveryTag] = true
			left--
			continue
		}
		multiples++
		newly := 0
		for tag := uint64(1); tag <= m.DeliveryTag; tag++ {
			if !acked[tag] {
				acked[tag] = true
				newly++
			}
		}
		if newly == 0 {
			t.Fatalf("multiple ack of %d settles nothing", m.DeliveryTag)
		}
		left -= newly
	}
	t.Logf("%d publishes confirmed by %d acks (%d multiple)", n, frames, multiples)
	// Completions of one log write go out as one multiple ack: far fewer
	// acks than publishes (RabbitMQ coalesces the same way).
	if frames > n/4 || multiples == 0 {
		t.Fatalf("%d publishes confirmed by %d acks (%d multiple): not coalesced", n, frames, multiples)
	}
	// Nothing more: the next frame answers the next method.
	for _, q := range []string{"co", "cot"} {
		c.send(1, &wire.QueueDeclare{Queue: q, Passive: true})
		if m := c.expect(1, "queue.declare-ok").(*wire.QueueDeclareOk); m.MessageCount != n/2 {
			t.Fatalf("%s: declare-ok count %d", q, m.MessageCount)
		}
	}
}

// TestConfirmSelectNoWait: with nowait, confirm.select gets no
// select-ok (amqp091-go would hang on one, rabbitmq/amqp091-go#198), yet
// confirms are on.
func TestConfirmSelectNoWait(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c := rawDial(t, tb.addr)
	c.open(0)
	c.openChannel(1)
	c.send(1, &wire.ConfirmSelect{NoWait: true})
	c.send(1, &wire.BasicQos{PrefetchCount: 1})
	c.expect(1, "basic.qos-ok")
	c.send(1, &wire.QueueDeclare{Queue: "nw", Exclusive: true})
	c.expect(1, "queue.declare-ok")
	c.publishRaw(1, "", "nw", []byte("x"), 131072)
	if m := c.expect(1, "basic.ack").(*wire.BasicAck); m.DeliveryTag != 1 || m.Multiple {
		t.Fatalf("ack %+v", m)
	}
	// Selecting again (with a reply this time) is fine.
	c.send(1, &wire.ConfirmSelect{})
	c.expect(1, "confirm.select-ok")
}

func TestConfirmAndTxExclusive(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c := tb.dial(t)
	chanErr(t, c, 406, "PRECONDITION_FAILED - cannot switch from tx to confirm mode", func(ch *amqp091.Channel) error {
		if err := ch.Tx(); err != nil {
			return err
		}
		return ch.Confirm(false)
	})
	chanErr(t, c, 406, "PRECONDITION_FAILED - cannot switch from confirm to tx mode", func(ch *amqp091.Channel) error {
		if err := ch.Confirm(false); err != nil {
			return err
		}
		return ch.Tx()
	})
	// Repeating the same mode is fine.
	chanOK(t, c, func(ch *amqp091.Channel) error {
		if err := ch.Tx(); err != nil {
			return err
		}
		return ch.Tx()
	})
	chanOK(t, c, func(ch *amqp091.Channel) error {
		if err := ch.Confirm(false); err != nil {
			return err
		}
		return ch.Confirm(false)
	})
}

// TestTxAcks: acks in a transaction take effect at commit; a rollback
// puts them back among the channel's unacked deliveries (not requeued
// while the channel lives), and a channel closed with acks uncommitted
// requeues those messages.
func TestTxAcks(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, pch := confirmChannel(t, tb)
	if _, err := pch.QueueDeclare("txa", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	publishConfirmed(t, pch, "", "txa", true, "m1", "m2", "m3")

	_, ch := tb.channel(t)
	must(t, ch.Tx())
	must(t, ch.Qos(1, 0, false))
	ds, err := ch.Consume("txa", "c", false, false, false, false, nil)
	must(t, err)
	d1 := recv(t, ds)
	if string(d1.Body) != "m1" || d1.DeliveryTag != 1 {
		t.Fatalf("got %q tag %d", d1.Body, d1.DeliveryTag)
	}
	must(t, d1.Ack(false))
	must(t, ch.TxRollback())
	// Not settled: the prefetch slot stays taken and nothing is requeued.
	none(t, ds)
	if q, _ := pch.QueueDeclarePassive("txa", true, false, false, false, nil); q.Messages != 2 {
		t.Fatalf("%d ready after rollback, want 2", q.Messages)
	}
	// Tag 1 is still outstanding: acking it again is no error.
	must(t, d1.Ack(false))
	none(t, ds) // buffered until commit
	must(t, ch.TxCommit())
	d2 := recv(t, ds)
	if string(d2.Body) != "m2" || d2.DeliveryTag != 2 || d2.Redelivered {
		t.Fatalf("after commit %q tag %d redelivered %v", d2.Body, d2.DeliveryTag, d2.Redelivered)
	}
	// A nack with requeue in a transaction, committed, requeues.
	must(t, d2.Nack(false, true))
	must(t, ch.TxCommit())
	d2 = recv(t, ds)
	if string(d2.Body) != "m2" || !d2.Redelivered {
		t.Fatalf("requeued %q redelivered %v", d2.Body, d2.Redelivered)
	}
	// Acked in the transaction, never committed: the channel's close
	// requeues it.
	must(t, d2.Ack(false))
	must(t, ch.Close())
	_, och := tb.channel(t)
	for _, want := range []string{"m2", "m3"} {
		d, ok, err := och.Get("txa", false)
		if err != nil || !ok || string(d.Body) != want || d.Redelivered != (want == "m2") {
			t.Fatalf("get: %q redelivered %v ok=%v err=%v, want %s", d.Body, d.Redelivered, ok, err, want)
		}
		must(t, d.Ack(false))
	}
	if _, ok, _ := och.Get("txa", false); ok {
		t.Fatal("m1 came back after its committed ack")
	}
}

// TestTxCommitAcrossQueues: publishes to two queues in one transaction
// are invisible until commit and delivered together by it.
func TestTxCommitAcrossQueues(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := tb.channel(t)
	for _, q := range []string{"tx1", "tx2"} {
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	_, cch := tb.channel(t)
	d1, err := cch.Consume("tx1", "", true, false, false, false, nil)
	must(t, err)
	d2, err := cch.Consume("tx2", "", true, false, false, false, nil)
	must(t, err)
	must(t, ch.Tx())
	publish(t, ch, "", "tx1", amqp091.Publishing{Body: []byte("one"), DeliveryMode: amqp091.Persistent})
	publish(t, ch, "", "tx2", amqp091.Publishing{Body: []byte("two")})
	publish(t, ch, "", "tx1", amqp091.Publishing{Body: []byte("three")})
	none(t, d1)
	none(t, d2)
	must(t, ch.TxCommit())
	if got := bodies(recvN(t, d1, 2)); !slices.Equal(got, []string{"one", "three"}) {
		t.Fatalf("tx1 got %v", got)
	}
	if m := recv(t, d2); string(m.Body) != "two" {
		t.Fatalf("tx2 got %q", m.Body)
	}
	// A committed empty transaction is fine; the channel stays usable.
	must(t, ch.TxCommit())
}
