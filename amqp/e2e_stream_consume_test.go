package amqp

import (
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	streamamqp "github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
)

// Ensure x-stream-offset first, last, next and an integer offset start
// where RabbitMQ starts them, and deliveries carry their offsets.
func TestStreamConsumeOffsets(t *testing.T) {
	d := startDual(t, "")
	c, ch := d.channel(t)
	declareStream(t, ch, "offs", nil)
	publishAll(t, c, "", "offs", texts("m", 0, 10)...)
	publishAll(t, c, "", "offs", texts("tail", 0, 1)...) // a chunk of its own

	t.Run("first", func(t *testing.T) {
		_, dl := consumeStreamQ(t, c, "offs", 20, amqp091.Table{"x-stream-offset": "first"})
		ds := recvN(t, dl, 11)
		wantBodies(t, "first", ds, append(names("m", 0, 10), "tail-0"))
		for i, d := range ds {
			if offsetOf(t, d) != int64(i) {
				t.Fatalf("delivery %d at offset %d", i, offsetOf(t, d))
			}
		}
	})
	t.Run("integer", func(t *testing.T) {
		for _, off := range []any{int64(5), int32(5), uint8(5)} {
			_, dl := consumeStreamQ(t, c, "offs", 20, amqp091.Table{"x-stream-offset": off})
			ds := recvN(t, dl, 6)
			wantBodies(t, "offset 5", ds, append(names("m", 5, 10), "tail-0"))
			if offsetOf(t, ds[0]) != 5 {
				t.Fatalf("first offset %d", offsetOf(t, ds[0]))
			}
			none(t, dl)
		}
	})
	t.Run("last", func(t *testing.T) {
		_, dl := consumeStreamQ(t, c, "offs", 20, amqp091.Table{"x-stream-offset": "last"})
		if d := recv(t, dl); string(d.Body) != "tail-0" || offsetOf(t, d) != 10 {
			t.Fatalf("last: %q at %d", d.Body, offsetOf(t, d))
		}
		none(t, dl)
	})
	t.Run("next and default", func(t *testing.T) {
		_, next := consumeStreamQ(t, c, "offs", 20, amqp091.Table{"x-stream-offset": "next"})
		_, dflt := consumeStreamQ(t, c, "offs", 20, nil)
		none(t, next)
		publishAll(t, c, "", "offs", texts("new", 0, 1)...)
		for _, dl := range []<-chan amqp091.Delivery{next, dflt} {
			if d := recv(t, dl); string(d.Body) != "new-0" || offsetOf(t, d) != 11 {
				t.Fatalf("next: %q at %d", d.Body, offsetOf(t, d))
			}
		}
	})
}

// Ensure a timestamp and an interval ("1h") start at the first chunk at
// or after that time.
func TestStreamConsumeTimestamps(t *testing.T) {
	d := startDual(t, "")
	c, ch := d.channel(t)
	declareStream(t, ch, "times", nil)
	now := time.Now()
	d.clock.set(now.Add(-2 * time.Hour))
	publishAll(t, c, "", "times", texts("old", 0, 3)...)
	d.clock.set(now.Add(-30 * time.Minute))
	publishAll(t, c, "", "times", texts("recent", 0, 2)...)

	for _, arg := range []any{now.Add(-time.Hour), "1h", "60m", "3600s"} {
		_, dl := consumeStreamQ(t, c, "times", 10, amqp091.Table{"x-stream-offset": arg})
		ds := recvN(t, dl, 2)
		wantBodies(t, "since an hour ago", ds, names("recent", 0, 2))
		if offsetOf(t, ds[0]) != 3 {
			t.Fatalf("%v: first offset %d", arg, offsetOf(t, ds[0]))
		}
		none(t, dl)
	}
	_, dl := consumeStreamQ(t, c, "times", 10, amqp091.Table{"x-stream-offset": "1D"})
	wantBodies(t, "a day", recvN(t, dl, 5), append(names("old", 0, 3), names("recent", 0, 2)...))
}

// Ensure reads are non-destructive: two consumers each get every
// message, and acked messages are there for the next consumer.
func TestStreamConsumeNonDestructive(t *testing.T) {
	d := startDual(t, "")
	c, ch := d.channel(t)
	declareStream(t, ch, "nd", nil)
	publishAll(t, c, "", "nd", texts("m", 0, 5)...)
	c2 := d.dial(t)
	_, a := consumeStreamQ(t, c, "nd", 10, amqp091.Table{"x-stream-offset": "first"})
	_, b := consumeStreamQ(t, c2, "nd", 10, amqp091.Table{"x-stream-offset": "first"})
	da, db := recvN(t, a, 5), recvN(t, b, 5)
	wantBodies(t, "consumer a", da, names("m", 0, 5))
	wantBodies(t, "consumer b", db, names("m", 0, 5))
	ackAll(t, da)
	ackAll(t, db)
	_, again := consumeStreamQ(t, c, "nd", 10, amqp091.Table{"x-stream-offset": "first"})
	wantBodies(t, "after acks", recvN(t, again, 5), names("m", 0, 5))
	if q, err := ch.QueueDeclarePassive("nd", true, false, false, false, nil); err != nil || q.Messages != 5 {
		t.Fatalf("passive declare: %+v %v", q, err)
	}
}

// Ensure the prefetch count is credit: at most that many unsettled
// deliveries; ack, nack and reject (requeue or not) each give one back
// and nothing is redelivered.
func TestStreamConsumeCredit(t *testing.T) {
	d := startDual(t, "")
	c, ch := d.channel(t)
	declareStream(t, ch, "credit", nil)
	publishAll(t, c, "", "credit", texts("m", 0, 40)...)
	_, dl := consumeStreamQ(t, c, "credit", 10, amqp091.Table{"x-stream-offset": "first"})
	first := recvN(t, dl, 10)
	none(t, dl) // 10 unsettled: no more
	for _, d := range first[:5] {
		must(t, d.Ack(false))
	}
	second := recvN(t, dl, 5)
	none(t, dl)
	// nack with requeue: credit back, no redelivery.
	must(t, second[4].Nack(true, true))
	third := recvN(t, dl, 10)
	none(t, dl)
	must(t, third[0].Reject(false))
	must(t, third[1].Reject(true))
	fourth := recvN(t, dl, 2)
	none(t, dl)
	all := append(append(append(first, second...), third...), fourth...)
	for i, d := range all {
		if d.Redelivered || offsetOf(t, d) != int64(i) {
			t.Fatalf("delivery %d: offset %d redelivered %v", i, offsetOf(t, d), d.Redelivered)
		}
	}
	// Acks of everything: the rest arrives.
	must(t, fourth[1].Ack(true))
	wantBodies(t, "the rest", recvN(t, dl, 10), names("m", 27, 37))
}

// Ensure x-stream-filter selects chunks by the filter values publishers
// set with x-stream-filter-value, with x-stream-match-unfiltered for
// chunks without values, and that the stream client's filtering sees the
// values AMQP publishers set.
func TestStreamConsumeFilter(t *testing.T) {
	d := startDual(t, "")
	c, ch := d.channel(t)
	declareStream(t, ch, "colours", nil)
	withFilter := func(v string, ps []amqp091.Publishing) []amqp091.Publishing {
		for i := range ps {
			ps[i].Headers = amqp091.Table{"x-stream-filter-value": v}
		}
		return ps
	}
	publishAll(t, c, "", "colours", withFilter("red", texts("red", 0, 3))...)
	publishAll(t, c, "", "colours", withFilter("blue", texts("blue", 0, 3))...)
	publishAll(t, c, "", "colours", texts("plain", 0, 2)...)

	_, red := consumeStreamQ(t, c, "colours", 20, amqp091.Table{"x-stream-offset": "first", "x-stream-filter": "red"})
	ds := recvN(t, red, 3)
	wantBodies(t, "red", ds, names("red", 0, 3))
	if ds[0].Headers["x-stream-filter-value"] != "red" {
		t.Fatalf("headers %v", ds[0].Headers)
	}
	none(t, red)

	_, redPlain := consumeStreamQ(t, c, "colours", 20, amqp091.Table{
		"x-stream-offset": "first", "x-stream-filter": []any{"red"}, "x-stream-match-unfiltered": true})
	wantBodies(t, "red and unfiltered", recvN(t, redPlain, 5), append(names("red", 0, 3), names("plain", 0, 2)...))
	none(t, redPlain)

	_, both := consumeStreamQ(t, c, "colours", 20, amqp091.Table{"x-stream-offset": "first", "x-stream-filter": []any{"blue", "red"}})
	wantBodies(t, "blue and red", recvN(t, both, 6), append(names("red", 0, 3), names("blue", 0, 3)...))
	none(t, both)

	env := d.env(t)
	post := func(m *streamamqp.Message) bool { return m.Annotations["x-stream-filter-value"] == "blue" }
	sink := streamSubscribe(t, env, "colours", stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()).
		SetFilter(stream.NewConsumerFilter([]string{"blue"}, false, post)))
	msgs, offsets := sink.wait(t, 3)
	for i, m := range msgs {
		if string(m.GetData()) != names("blue", 0, 3)[i] || offsets[i] != int64(3+i) {
			t.Fatalf("stream client filter: %q at %d", m.GetData(), offsets[i])
		}
	}
}

// Ensure the consumer requirements and arguments fail as RabbitMQ's do.
func TestStreamConsumeErrors(t *testing.T) {
	d := startDual(t, "")
	c, ch := d.channel(t)
	declareStream(t, ch, "errs", nil)
	publishAll(t, c, "", "errs", texts("m", 0, 1)...)
	const res = "queue 'errs' in vhost '/'"

	chanErr(t, c, 406, "PRECONDITION_FAILED - consumer prefetch count is not set for stream "+res, func(ch *amqp091.Channel) error {
		_, err := ch.Consume("errs", "", false, false, false, false, nil)
		return err
	})
	chanErr(t, c, 406, "PRECONDITION_FAILED - consumer prefetch count is not set for stream "+res, func(ch *amqp091.Channel) error {
		must(t, ch.Qos(10, 0, true)) // a channel-wide limit only
		_, err := ch.Consume("errs", "", false, false, false, false, nil)
		return err
	})
	chanErr(t, c, 406, "PRECONDITION_FAILED - invalid arg 'x-stream-offset' for "+res+": {invalid_stream_offset_arg,{longstr,<<\"soon\">>}}", func(ch *amqp091.Channel) error {
		must(t, ch.Qos(10, 0, false))
		_, err := ch.Consume("errs", "", false, false, false, false, amqp091.Table{"x-stream-offset": "soon"})
		return err
	})
	chanErr(t, c, 406, "PRECONDITION_FAILED - invalid arg 'x-priority' for "+res+" of queue type rabbit_stream_queue", func(ch *amqp091.Channel) error {
		must(t, ch.Qos(10, 0, false))
		_, err := ch.Consume("errs", "", false, false, false, false, amqp091.Table{"x-priority": int32(1)})
		return err
	})
	// Hard errors close the connection.
	for _, tc := range []struct {
		text string
		f    func(ch *amqp091.Channel) error
	}{
		{"NOT_IMPLEMENTED - automatic acknowledgement not supported by stream " + res, func(ch *amqp091.Channel) error {
			must(t, ch.Qos(10, 0, false))
			_, err := ch.Consume("errs", "", true, false, false, false, nil)
			return err
		}},
		{"NOT_IMPLEMENTED - " + res + " does not support global qos", func(ch *amqp091.Channel) error {
			must(t, ch.Qos(10, 0, false))
			must(t, ch.Qos(10, 0, true))
			_, err := ch.Consume("errs", "", false, false, false, false, nil)
			return err
		}},
		{"NOT_IMPLEMENTED - basic.get not supported by stream queues " + res, func(ch *amqp091.Channel) error {
			_, _, err := ch.Get("errs", false)
			return err
		}},
		{"NOT_IMPLEMENTED - queue.purge not supported by stream queues " + res, func(ch *amqp091.Channel) error {
			_, err := ch.QueuePurge("errs", false)
			return err
		}},
	} {
		chanErr(t, d.dial(t), 540, tc.text, tc.f)
	}
	// The stream is unharmed.
	_, dl := consumeStreamQ(t, c, "errs", 1, amqp091.Table{"x-stream-offset": "first"})
	wantBodies(t, "after errors", recvN(t, dl, 1), []string{"m-0"})
}

// Ensure cancel and channel close stop a stream consumer, and a deleted
// stream cancels its consumers with basic.cancel.
func TestStreamConsumeCancel(t *testing.T) {
	d := startDual(t, "")
	c, ch := d.channel(t)
	declareStream(t, ch, "cx", nil)
	cch, dl := consumeStreamQ(t, c, "cx", 10, nil)
	publishAll(t, c, "", "cx", texts("a", 0, 1)...)
	recv(t, dl)
	tags := cch.NotifyCancel(make(chan string, 1))
	ch2, err := c.Channel()
	must(t, err)
	must(t, ch2.Qos(5, 0, false))
	dl2, err := ch2.Consume("cx", "other", false, false, false, false, nil)
	must(t, err)
	must(t, ch2.Cancel("other", false))
	publishAll(t, c, "", "cx", texts("b", 0, 1)...)
	if d := recv(t, dl); string(d.Body) != "b-0" {
		t.Fatalf("got %q", d.Body)
	}
	if _, ok := <-dl2; ok {
		t.Fatal("cancelled consumer got a delivery")
	}
	must(t, ch2.Close())

	env := d.env(t)
	if err := env.DeleteStream("cx"); err != nil {
		t.Fatal(err)
	}
	select {
	case tag := <-tags:
		if tag == "" {
			t.Fatal("empty cancel tag")
		}
	case <-time.After(wait):
		t.Fatal("no basic.cancel after the stream was deleted")
	}
}
