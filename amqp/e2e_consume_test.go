package amqp

import (
	"slices"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

func TestPrefetchAndMultipleAck(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := confirmChannel(t, tb)
	ch.QueueDeclare("pf", true, false, false, false, nil)
	publishConfirmed(t, ch, "", "pf", true, strs("m", 10)...)
	_, cch := tb.channel(t)
	if err := cch.Qos(3, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := cch.Consume("pf", "c1", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := recvN(t, ds, 3)
	none(t, ds) // prefetch 3 reached
	if !slices.Equal(bodies(got), []string{"m0", "m1", "m2"}) {
		t.Fatalf("got %v", bodies(got))
	}
	got[1].Ack(true) // acks tags 1 and 2
	more := recvN(t, ds, 2)
	none(t, ds)
	if !slices.Equal(bodies(more), []string{"m3", "m4"}) || more[0].DeliveryTag != 4 {
		t.Fatalf("got %v (first tag %d)", bodies(more), more[0].DeliveryTag)
	}
}

func TestUnknownDeliveryTag(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := tb.channel(t)
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	ch.Ack(5, false)
	e := closeReason(t, closed)
	if e.Code != 406 || e.Reason != "PRECONDITION_FAILED - unknown delivery tag 5" {
		t.Fatalf("got %d %q", e.Code, e.Reason)
	}
}

func TestRequeueOnCloseInOrderRedelivered(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := confirmChannel(t, tb)
	ch.QueueDeclare("rq", true, false, false, false, nil)
	publishConfirmed(t, ch, "", "rq", true, strs("m", 6)...)
	_, c1 := tb.channel(t)
	c1.Qos(4, 0, false)
	ds, _ := c1.Consume("rq", "", false, false, false, false, nil)
	got := recvN(t, ds, 4)
	// A second consumer takes the rest.
	_, c2 := tb.channel(t)
	c2.Qos(2, 0, false)
	ds2, _ := c2.Consume("rq", "", false, false, false, false, nil)
	rest := recvN(t, ds2, 2)
	if !slices.Equal(bodies(rest), []string{"m4", "m5"}) {
		t.Fatalf("second consumer got %v", bodies(rest))
	}
	got[1].Ack(false) // m1 settled; m0, m2, m3 unacked
	none(t, ds)       // nothing left for the freed slot
	c1.Close()
	rest[1].Ack(true)
	again := recvN(t, ds2, 2)
	again[1].Ack(true)
	again = append(again, recv(t, ds2))
	if !slices.Equal(bodies(again), []string{"m0", "m2", "m3"}) {
		t.Fatalf("requeued %v", bodies(again))
	}
	for _, d := range again {
		if !d.Redelivered {
			t.Fatalf("%s not marked redelivered", d.Body)
		}
	}
	if rest[0].Redelivered {
		t.Fatal("first delivery marked redelivered")
	}
}

func TestNackRejectRecover(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := confirmChannel(t, tb)
	ch.QueueDeclare("nr", true, false, false, false, nil)
	publishConfirmed(t, ch, "", "nr", true, strs("m", 5)...)
	_, cch := tb.channel(t)
	ds, _ := cch.Consume("nr", "", false, false, false, false, nil)
	got := recvN(t, ds, 5)
	got[0].Reject(false)      // m0 dropped
	got[2].Nack(true, true)   // m1, m2 requeued
	got[3].Nack(false, false) // m3 dropped
	again := recvN(t, ds, 2)
	if !slices.Equal(bodies(again), []string{"m1", "m2"}) || !again[0].Redelivered {
		t.Fatalf("requeued %v", bodies(again))
	}
	// recover requeues everything unacked: m4, m1, m2.
	if err := cch.Recover(true); err != nil {
		t.Fatal(err)
	}
	rec := recvN(t, ds, 3)
	if !slices.Equal(bodies(rec), []string{"m1", "m2", "m4"}) {
		t.Fatalf("recovered %v", bodies(rec))
	}
	rec[2].Ack(true)
	waitCount(t, tb, "nr", 0)
	q, _ := ch.QueueDeclarePassive("nr", true, false, false, false, nil)
	if q.Messages != 0 {
		t.Fatalf("%d left", q.Messages)
	}
}

func TestGetCountsAndEmpty(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := confirmChannel(t, tb)
	ch.QueueDeclare("g", false, false, false, false, nil)
	publishConfirmed(t, ch, "", "g", false, "a", "b", "c")
	for i, want := range []string{"a", "b", "c"} {
		d, ok, err := ch.Get("g", false)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		if string(d.Body) != want || d.MessageCount != uint32(2-i) || d.DeliveryTag != uint64(i+1) {
			t.Fatalf("get %d: %q count %d tag %d", i, d.Body, d.MessageCount, d.DeliveryTag)
		}
	}
	if _, ok, err := ch.Get("g", false); ok || err != nil {
		t.Fatalf("get on empty: %v %v", ok, err)
	}
	// Unacked gets come back when the channel closes.
	ch.Close()
	_, ch2 := tb.channel(t)
	d, ok, _ := ch2.Get("g", true)
	if !ok || string(d.Body) != "a" || !d.Redelivered || d.MessageCount != 2 {
		t.Fatalf("after close: %q redelivered %v count %d", d.Body, d.Redelivered, d.MessageCount)
	}
}

func TestExclusiveQueues(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c1, ch1 := tb.channel(t)
	if _, err := ch1.QueueDeclare("mine", false, false, true, false, nil); err != nil {
		t.Fatal(err)
	}
	_, ch2 := tb.channel(t)
	_, err := ch2.QueueDeclare("mine", false, false, true, false, nil)
	amqpErr(t, err, 405, "RESOURCE_LOCKED - cannot obtain exclusive access to locked queue 'mine' in vhost '/'. It could be originally declared on another connection or the exclusive property value does not match that of the original declaration.")
	_, ch3 := tb.channel(t)
	_, err = ch3.Consume("mine", "", false, false, false, false, nil)
	amqpErr(t, err, 405, "")
	c1.Close()
	_, ch4 := tb.channel(t)
	_, err = ch4.QueueDeclarePassive("mine", false, false, true, false, nil)
	amqpErr(t, err, 404, "NOT_FOUND - no queue 'mine' in vhost '/'")
}

func TestExclusiveConsumer(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := tb.channel(t)
	ch.QueueDeclare("ec", false, false, false, false, nil)
	if _, err := ch.Consume("ec", "a", false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	_, ch2 := tb.channel(t)
	_, err := ch2.Consume("ec", "b", false, false, false, false, nil)
	amqpErr(t, err, 403, "ACCESS_REFUSED - queue 'ec' in vhost '/' in exclusive use")
}

func TestConsumerTagReuse(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c, ch := tb.channel(t)
	ch.QueueDeclare("tagq", false, false, false, false, nil)
	if _, err := ch.Consume("tagq", "same", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	closed := c.NotifyClose(make(chan *amqp091.Error, 1))
	ch.Consume("tagq", "same", false, false, false, false, nil)
	e := closeReason(t, closed)
	if e.Code != 530 || e.Reason != "NOT_ALLOWED - attempt to reuse consumer tag 'same'" {
		t.Fatalf("got %d %q", e.Code, e.Reason)
	}
}

func TestAutoDeleteAndServerCancel(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := tb.channel(t)
	if _, err := ch.QueueDeclare("ad", false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	// Never consumed: stays.
	if _, err := ch.QueueDeclarePassive("ad", false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Consume("ad", "c", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Cancel("c", false); err != nil {
		t.Fatal(err)
	}
	_, ch2 := tb.channel(t)
	_, err := ch2.QueueDeclarePassive("ad", false, true, false, false, nil)
	amqpErr(t, err, 404, "")

	// Deleting a consumed queue cancels its consumers.
	_, ch3 := tb.channel(t)
	ch3.QueueDeclare("gone", false, false, false, false, nil)
	cancels := ch3.NotifyCancel(make(chan string, 1))
	if _, err := ch3.Consume("gone", "watcher", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	_, ch4 := tb.channel(t)
	if _, err := ch4.QueueDelete("gone", false, false, false); err != nil {
		t.Fatal(err)
	}
	select {
	case tag := <-cancels:
		if tag != "watcher" {
			t.Fatalf("cancelled %q", tag)
		}
	case <-time.After(wait):
		t.Fatal("no basic.cancel after the queue was deleted")
	}
}

func TestPurgeAndDeleteConditions(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c, ch := confirmChannel(t, tb)
	ch.QueueDeclare("pd", true, false, false, false, nil)
	publishConfirmed(t, ch, "", "pd", true, "a", "b", "c")
	try := func(f func(ch *amqp091.Channel) error) error {
		ch, err := c.Channel()
		if err != nil {
			t.Fatal(err)
		}
		return f(ch)
	}
	err := try(func(ch *amqp091.Channel) error { _, err := ch.QueueDelete("pd", false, true, false); return err })
	amqpErr(t, err, 406, "PRECONDITION_FAILED - queue 'pd' in vhost '/' not empty")
	_, cch := tb.channel(t)
	cch.Qos(1, 0, false)
	ds, _ := cch.Consume("pd", "pc", false, false, false, false, nil)
	recv(t, ds) // "a" unacked
	err = try(func(ch *amqp091.Channel) error { _, err := ch.QueueDelete("pd", true, false, false); return err })
	amqpErr(t, err, 406, "PRECONDITION_FAILED - queue 'pd' in vhost '/' in use")
	if err := cch.Cancel("pc", false); err != nil {
		t.Fatal(err)
	}
	var n int
	try(func(ch *amqp091.Channel) error { var err error; n, err = ch.QueuePurge("pd", false); return err })
	if n != 2 {
		t.Fatalf("purged %d, want 2 (the unacked one stays)", n)
	}
	try(func(ch *amqp091.Channel) error {
		var err error
		n, err = ch.QueueDelete("pd", false, false, false)
		return err
	})
	if n != 0 {
		t.Fatalf("delete-ok count %d", n)
	}
	// Deleting a missing queue is fine.
	if err := try(func(ch *amqp091.Channel) error { _, err := ch.QueueDelete("pd", false, false, false); return err }); err != nil {
		t.Fatal(err)
	}
}

func TestServerNamedAndReservedNames(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c, ch := tb.channel(t)
	q, err := ch.QueueDeclare("", false, false, true, false, nil)
	if err != nil || !strings.HasPrefix(q.Name, "amq.gen-") || len(q.Name) != len("amq.gen-")+22 {
		t.Fatalf("server-named %q %v", q.Name, err)
	}
	ch2, _ := c.Channel()
	_, err = ch2.QueueDeclare("amq.mine", false, false, false, false, nil)
	amqpErr(t, err, 403, "ACCESS_REFUSED - queue name 'amq.mine' contains reserved prefix 'amq.*'")
	ch3, _ := c.Channel()
	ch3.QueueDeclare("eq", true, false, false, false, amqp091.Table{"x-message-ttl": int32(1000)})
	_, err = ch3.QueueDeclare("eq", true, false, false, false, amqp091.Table{"x-message-ttl": int32(2000)})
	amqpErr(t, err, 406, "PRECONDITION_FAILED - inequivalent arg 'x-message-ttl' for queue 'eq' in vhost '/': received '2000' but current is '1000'")
	ch4, _ := c.Channel()
	_, err = ch4.QueueDeclare("eq", false, false, false, false, amqp091.Table{"x-message-ttl": int32(1000)})
	amqpErr(t, err, 406, "PRECONDITION_FAILED - inequivalent arg 'durable' for queue 'eq' in vhost '/': received 'false' but current is 'true'")
}

func TestTransactions(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := tb.channel(t)
	ch.QueueDeclare("txq", false, false, false, false, nil)
	if err := ch.Tx(); err != nil {
		t.Fatal(err)
	}
	publish(t, ch, "", "txq", amqp091.Publishing{Body: []byte("rolled back")})
	if err := ch.TxRollback(); err != nil {
		t.Fatal(err)
	}
	publish(t, ch, "", "txq", amqp091.Publishing{Body: []byte("committed")})
	_, other := tb.channel(t)
	if q, _ := other.QueueDeclarePassive("txq", false, false, false, false, nil); q.Messages != 0 {
		t.Fatalf("%d visible before commit", q.Messages)
	}
	if err := ch.TxCommit(); err != nil {
		t.Fatal(err)
	}
	if got := drain(t, other, "txq"); !slices.Equal(got, []string{"committed"}) {
		t.Fatalf("after commit %v", got)
	}
	// Commit without select is 406.
	_, ch2 := tb.channel(t)
	amqpErr(t, ch2.TxCommit(), 406, "PRECONDITION_FAILED - channel is not transactional")
}

func TestGlobalQos(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := confirmChannel(t, tb)
	ch.QueueDeclare("g1", false, false, false, false, nil)
	ch.QueueDeclare("g2", false, false, false, false, nil)
	publishConfirmed(t, ch, "", "g1", false, strs("a", 5)...)
	publishConfirmed(t, ch, "", "g2", false, strs("b", 5)...)
	_, cch := tb.channel(t)
	if err := cch.Qos(3, 0, true); err != nil {
		t.Fatal(err)
	}
	d1, _ := cch.Consume("g1", "", false, false, false, false, nil)
	d2, _ := cch.Consume("g2", "", false, false, false, false, nil)
	merged := make(chan amqp091.Delivery, 20)
	go func() {
		for d := range d1 {
			merged <- d
		}
	}()
	go func() {
		for d := range d2 {
			merged <- d
		}
	}()
	got := recvN(t, merged, 3)
	none(t, merged)                          // the channel-wide limit holds across both queues
	if err := cch.Ack(3, true); err != nil { // tags 1-3, whichever queue
		t.Fatal(err)
	}
	_ = got
	recvN(t, merged, 3)
	none(t, merged)
}
