package amqp

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warren-mq/warren/amqp/wire"
)

// TestConsumerCancelNotify: when a consumed queue is deleted, a client
// that announced consumer_cancel_notify gets basic.cancel (no-wait) with
// the tag; one that did not gets nothing, its consumer just goes.
func TestConsumerCancelNotify(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, admin := tb.channel(t)
	for i, tc := range []struct {
		name   string
		props  wire.Table
		notify bool
	}{
		{"no capabilities", wire.Table{}, false},
		{"capability false", wire.Table{"capabilities": wire.Table{"consumer_cancel_notify": false}}, false},
		{"capability true", wire.Table{"capabilities": wire.Table{"consumer_cancel_notify": true}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := fmt.Sprintf("cn%d", i)
			c := rawDial(t, tb.addr)
			c.openWith(tc.props)
			c.openChannel(1)
			c.send(1, &wire.QueueDeclare{Queue: q})
			c.expect(1, "queue.declare-ok")
			c.send(1, &wire.BasicConsume{Queue: q, ConsumerTag: "ctag"})
			c.expect(1, "basic.consume-ok")
			if _, err := admin.QueueDelete(q, false, false, false); err != nil {
				t.Fatal(err)
			}
			if tc.notify {
				m := c.expect(1, "basic.cancel").(*wire.BasicCancel)
				if m.ConsumerTag != "ctag" || !m.NoWait {
					t.Fatalf("cancel %+v", m)
				}
			}
			// Nothing (more) before the reply to the next method.
			c.send(1, &wire.BasicQos{PrefetchCount: 1})
			c.expect(1, "basic.qos-ok")
			// The consumer is gone; cancelling it is answered all the same.
			c.send(1, &wire.BasicCancel{ConsumerTag: "ctag"})
			if m := c.expect(1, "basic.cancel-ok").(*wire.BasicCancelOk); m.ConsumerTag != "ctag" {
				t.Fatalf("cancel-ok %+v", m)
			}
		})
	}

	// amqp091-go announces the capability.
	_, ch := tb.channel(t)
	if _, err := ch.QueueDeclare("cngo", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	cancels := ch.NotifyCancel(make(chan string, 1))
	ds, err := ch.Consume("cngo", "watcher", false, false, false, false, nil)
	must(t, err)
	if _, err := admin.QueueDelete("cngo", false, false, false); err != nil {
		t.Fatal(err)
	}
	select {
	case tag := <-cancels:
		if tag != "watcher" {
			t.Fatalf("cancelled %q", tag)
		}
	case <-time.After(wait):
		t.Fatal("no basic.cancel")
	}
	select {
	case d, ok := <-ds:
		if ok {
			t.Fatalf("delivery %q after the cancel", d.Body)
		}
	case <-time.After(wait):
		t.Fatal("deliveries not closed after the cancel")
	}
	// The channel is fine.
	if _, err := ch.QueueDeclare("", false, false, true, false, nil); err != nil {
		t.Fatal(err)
	}
}

// TestNotImplementedQosAndRecover: prefetch_size != 0 and recover with
// requeue=false are connection errors (540).
func TestNotImplementedQosAndRecover(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c := rawDial(t, tb.addr)
	c.open(0)
	c.openChannel(1)
	c.send(1, &wire.BasicQos{PrefetchSize: 4096, PrefetchCount: 10})
	c.expectConnClose(540, "NOT_IMPLEMENTED - prefetch_size!=0 (4096)", 60, 10)
	c.send(0, &wire.ConnectionCloseOk{})
	c.expectEOF()

	c = rawDial(t, tb.addr)
	c.open(0)
	c.openChannel(1)
	c.send(1, &wire.BasicRecoverAsync{Requeue: false})
	c.expectConnClose(540, "NOT_IMPLEMENTED - requeue=false", 60, 100)

	conn, ch := tb.channel(t)
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	amqpErr(t, ch.Recover(false), 540, "NOT_IMPLEMENTED - requeue=false")
	if e := closeReason(t, closed); e.Code != 540 || e.Reason != "NOT_IMPLEMENTED - requeue=false" {
		t.Fatalf("connection closed with %d %q", e.Code, e.Reason)
	}
}

// TestNoAckConsumer: a no-ack consumer gets everything regardless of
// prefetch, in order, and its tags (shared with acked deliveries) cannot
// be acked: 406.
func TestNoAckConsumer(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, pch := confirmChannel(t, tb)
	for _, q := range []string{"na", "na2"} {
		if _, err := pch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	want := strs("m", 50)
	publishConfirmed(t, pch, "", "na", true, want...)
	publishConfirmed(t, pch, "", "na2", true, "acked")

	_, ch := tb.channel(t)
	must(t, ch.Qos(2, 0, false)) // does not limit no-ack consumers
	ds, err := ch.Consume("na", "", true, false, false, false, nil)
	must(t, err)
	got := recvN(t, ds, 50)
	if !slices.Equal(bodies(got), want) {
		t.Fatalf("got %v", bodies(got))
	}
	for i, d := range got {
		if d.DeliveryTag != uint64(i+1) || d.Redelivered {
			t.Fatalf("delivery %d: tag %d redelivered %v", i, d.DeliveryTag, d.Redelivered)
		}
	}
	none(t, ds)
	waitCount(t, tb, "na", 0)
	// An acked delivery on the same channel takes the next tag.
	d, ok, err := ch.Get("na2", false)
	if err != nil || !ok || d.DeliveryTag != 51 {
		t.Fatalf("get: tag %d ok=%v err=%v", d.DeliveryTag, ok, err)
	}
	must(t, d.Ack(false))
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	must(t, ch.Ack(3, false))
	amqpErr(t, closeReason(t, closed), 406, "PRECONDITION_FAILED - unknown delivery tag 3")
	// Nothing was unacked: the channel's end requeued nothing.
	for _, q := range []string{"na", "na2"} {
		if info, err := pch.QueueDeclarePassive(q, true, false, false, false, nil); err != nil || info.Messages != 0 {
			t.Fatalf("%s after close: %+v %v", q, info, err)
		}
	}
	// basic.get with no-ack: the same.
	publishConfirmed(t, pch, "", "na2", true, "got")
	_, ch = tb.channel(t)
	d, ok, err = ch.Get("na2", true)
	if err != nil || !ok || string(d.Body) != "got" || d.DeliveryTag != 1 {
		t.Fatalf("no-ack get: %q tag %d ok=%v err=%v", d.Body, d.DeliveryTag, ok, err)
	}
	closed = ch.NotifyClose(make(chan *amqp091.Error, 1))
	must(t, ch.Ack(1, false))
	amqpErr(t, closeReason(t, closed), 406, "PRECONDITION_FAILED - unknown delivery tag 1")
}

// TestManyChannelsOneConnection: consumers and confirming publishers on
// many channels of one connection, all at once; every message arrives
// exactly once, each publisher's in its order at each consumer.
func TestManyChannelsOneConnection(t *testing.T) {
	const chans, per = 8, 500
	tb := startBroker(t, brokerOpts{})
	c := tb.dial(t)
	setup := chanOK(t, c, func(ch *amqp091.Channel) error {
		_, err := ch.QueueDeclare("conc", false, false, false, false, nil)
		return err
	})

	all := make(chan string, chans*per)
	perConsumer := make([][]string, chans)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range chans {
		ch, err := c.Channel()
		must(t, err)
		must(t, ch.Qos(20, 0, false))
		ds, err := ch.Consume("conc", fmt.Sprintf("c%d", i), false, false, false, false, nil)
		must(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case d, ok := <-ds:
					if !ok {
						return
					}
					perConsumer[i] = append(perConsumer[i], string(d.Body))
					if err := d.Ack(false); err != nil {
						t.Errorf("ack: %v", err)
						return
					}
					all <- string(d.Body)
				case <-stop:
					return
				}
			}
		}()
	}
	for p := range chans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch, err := c.Channel()
			if err != nil {
				t.Errorf("channel: %v", err)
				return
			}
			if err := ch.Confirm(false); err != nil {
				t.Errorf("confirm: %v", err)
				return
			}
			dcs := make([]*amqp091.DeferredConfirmation, 0, per)
			for j := range per {
				dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", "conc", false, false,
					amqp091.Publishing{Body: []byte(fmt.Sprintf("p%d-%d", p, j))})
				if err != nil {
					t.Errorf("publish: %v", err)
					return
				}
				dcs = append(dcs, dc)
			}
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			for j, dc := range dcs {
				if ok, err := dc.WaitContext(ctx); !ok || err != nil {
					t.Errorf("publisher %d confirm %d: %v %v", p, j, ok, err)
					return
				}
			}
		}()
	}

	var got []string
	timeout := time.After(3 * wait)
collect:
	for len(got) < chans*per {
		select {
		case b := <-all:
			got = append(got, b)
		case <-timeout:
			break collect
		}
	}
	close(stop)
	wg.Wait()
	if len(got) < chans*per {
		t.Fatalf("%d of %d messages", len(got), chans*per)
	}
	seen := map[string]bool{}
	for _, b := range got {
		if seen[b] {
			t.Fatalf("%s delivered twice", b)
		}
		seen[b] = true
	}
	for p := range chans {
		for j := range per {
			if !seen[fmt.Sprintf("p%d-%d", p, j)] {
				t.Fatalf("p%d-%d missing", p, j)
			}
		}
	}
	for i, got := range perConsumer {
		last := make([]int, chans)
		for k := range last {
			last[k] = -1
		}
		for _, b := range got {
			pj := strings.SplitN(strings.TrimPrefix(b, "p"), "-", 2)
			p, _ := strconv.Atoi(pj[0])
			j, _ := strconv.Atoi(pj[1])
			if j <= last[p] {
				t.Fatalf("consumer %d got %s after p%d-%d", i, b, p, last[p])
			}
			last[p] = j
		}
	}
	waitCount(t, tb, "conc", 0)
	if q, err := setup.QueueDeclarePassive("conc", false, false, false, false, nil); err != nil || q.Messages != 0 || q.Consumers != chans {
		t.Fatalf("after: %+v %v", q, err)
	}
}

// sizedBody returns a body of n bytes with a pattern that shows shifts.
func sizedBody(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31 + i>>8)
	}
	return b
}

// TestMessageSizesAtFrameBoundaries: bodies of 0 bytes (no body frame),
// exactly frame_max-8 (one full body frame) and frame_max-7 (two) and
// around, published in the largest frames allowed, arrive intact, split
// as RabbitMQ splits them.
func TestMessageSizesAtFrameBoundaries(t *testing.T) {
	const fm = 131072
	sizes := []int{0, 1, fm - 9, fm - 8, fm - 7, 2 * (fm - 8), 2*(fm-8) + 1}
	bodyOf := map[int][]byte{}
	for _, n := range sizes {
		bodyOf[n] = sizedBody(n)
	}

	tb := startBroker(t, brokerOpts{})

	// With the client library: publish, consume.
	_, ch := confirmChannel(t, tb)
	if _, err := ch.QueueDeclare("sz", false, false, true, false, nil); err != nil {
		t.Fatal(err)
	}
	for _, n := range sizes {
		confirmOne(t, ch, "", "sz", false, amqp091.Publishing{Body: bodyOf[n], MessageId: strconv.Itoa(n)})
	}
	ds, err := ch.Consume("sz", "", true, false, false, false, nil)
	must(t, err)
	for _, n := range sizes {
		d := recv(t, ds)
		if d.MessageId != strconv.Itoa(n) || !bytes.Equal(d.Body, bodyOf[n]) {
			t.Fatalf("message %s: %d bytes, want %d intact", d.MessageId, len(d.Body), n)
		}
	}

	// On the wire: publish in frames of frame_max bytes, read the
	// deliveries' frames.
	c := rawDial(t, tb.addr)
	c.open(0)
	c.openChannel(1)
	c.send(1, &wire.QueueDeclare{Queue: "szr", Exclusive: true})
	c.expect(1, "queue.declare-ok")
	for _, n := range sizes {
		c.publishRaw(1, "", "szr", bodyOf[n], fm)
	}
	c.send(1, &wire.BasicConsume{Queue: "szr", ConsumerTag: "c", NoAck: true})
	c.expect(1, "basic.consume-ok")
	for _, n := range sizes {
		c.expect(1, "basic.deliver")
		f := c.frame()
		if f.Type != wire.FrameHeader || f.Channel != 1 {
			t.Fatalf("%d bytes: frame type %d on %d, want a header", n, f.Type, f.Channel)
		}
		h, err := wire.ParseContentHeader(f.Payload)
		if err != nil || h.BodySize != uint64(n) {
			t.Fatalf("%d bytes: header body size %d, %v", n, h.BodySize, err)
		}
		var body []byte
		frames := 0
		for len(body) < n {
			f := c.frame()
			if f.Type != wire.FrameBody || f.Channel != 1 || len(f.Payload) == 0 || len(f.Payload) > fm-8 {
				t.Fatalf("%d bytes: frame type %d on %d with %d bytes", n, f.Type, f.Channel, len(f.Payload))
			}
			body = append(body, f.Payload...)
			frames++
		}
		if want := (n + fm - 9) / (fm - 8); frames != want || !bytes.Equal(body, bodyOf[n]) {
			t.Fatalf("%d bytes in %d body frames (want %d), intact %v", n, frames, want, bytes.Equal(body, bodyOf[n]))
		}
	}
	// No stray body frame after the last one (nor after the empty one,
	// checked by the deliver that followed it).
	c.send(1, &wire.BasicQos{})
	c.expect(1, "basic.qos-ok")
}
