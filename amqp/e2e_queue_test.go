package amqp

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

func publish(t *testing.T, ch *amqp091.Channel, exchange, key string, p amqp091.Publishing) {
	t.Helper()
	if err := ch.PublishWithContext(context.Background(), exchange, key, false, false, p); err != nil {
		t.Fatalf("publish: %v", err)
	}
}

// publishConfirmed publishes bodies on a confirm channel and waits for
// their acks.
func publishConfirmed(t *testing.T, ch *amqp091.Channel, exchange, key string, persistent bool, bodies ...string) {
	t.Helper()
	mode := amqp091.Transient
	if persistent {
		mode = amqp091.Persistent
	}
	var dcs []*amqp091.DeferredConfirmation
	for _, b := range bodies {
		dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), exchange, key, false, false, amqp091.Publishing{Body: []byte(b), DeliveryMode: mode})
		if err != nil {
			t.Fatalf("publish: %v", err)
		}
		dcs = append(dcs, dc)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for i, dc := range dcs {
		ok, err := dc.WaitContext(ctx)
		if err != nil || !ok {
			t.Fatalf("confirm %d: ok=%v err=%v", i, ok, err)
		}
	}
}

func confirmChannel(t *testing.T, tb *testBroker) (*amqp091.Connection, *amqp091.Channel) {
	t.Helper()
	c, ch := tb.channel(t)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	return c, ch
}

func strs(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

func TestPublishConsumeOrderAndContents(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := confirmChannel(t, tb)
	q, err := ch.QueueDeclare("orders", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if q.Name != "orders" || q.Messages != 0 || q.Consumers != 0 {
		t.Fatalf("declare-ok %+v", q)
	}
	want := strs("m", 100)
	publishConfirmed(t, ch, "", "orders", true, want...)
	q, err = ch.QueueDeclarePassive("orders", true, false, false, false, nil)
	if err != nil || q.Messages != 100 {
		t.Fatalf("passive declare: %+v %v", q, err)
	}
	_, cch := tb.channel(t)
	ds, err := cch.Consume("orders", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := recvN(t, ds, 100)
	if !slices.Equal(bodies(got), want) {
		t.Fatalf("bodies %v", bodies(got))
	}
	for i, d := range got {
		if d.DeliveryTag != uint64(i+1) || d.Redelivered || d.Exchange != "" || d.RoutingKey != "orders" || d.DeliveryMode != 2 {
			t.Fatalf("delivery %d: tag %d redelivered %v exchange %q key %q mode %d", i, d.DeliveryTag, d.Redelivered, d.Exchange, d.RoutingKey, d.DeliveryMode)
		}
	}
	if err := got[99].Ack(true); err != nil {
		t.Fatal(err)
	}
	waitCount(t, tb, "orders", 0)
}

// waitCount waits until the queue's ready count is n.
func waitCount(t *testing.T, tb *testBroker, queue string, n int) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		q, err := tb.broker.Queue("/", queue)
		if err != nil {
			t.Fatal(err)
		}
		ready, _ := q.Counts()
		if ready == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue %s has %d ready, want %d", queue, ready, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestPropertiesAndSortedHeaders(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := tb.channel(t)
	ch.QueueDeclare("props", false, false, false, false, nil)
	ts := time.Unix(1700000000, 0)
	publish(t, ch, "", "props", amqp091.Publishing{
		ContentType: "text/plain", ContentEncoding: "gzip", DeliveryMode: 1, Priority: 3,
		CorrelationId: "corr", ReplyTo: "rq", Expiration: "60000", MessageId: "mid", Timestamp: ts,
		Type: "kind", UserId: "guest", AppId: "app",
		Headers: amqp091.Table{"zeta": int32(1), "alpha": "a", "mid": int64(7), "BCC": []any{"other"}},
		Body:    []byte("hello"),
	})
	d, ok, err := ch.Get("props", true)
	if err != nil || !ok {
		t.Fatalf("get: %v %v", ok, err)
	}
	if d.ContentType != "text/plain" || d.ContentEncoding != "gzip" || d.DeliveryMode != 1 || d.Priority != 3 ||
		d.CorrelationId != "corr" || d.ReplyTo != "rq" || d.Expiration != "60000" || d.MessageId != "mid" ||
		!d.Timestamp.Equal(ts) || d.Type != "kind" || d.UserId != "guest" || d.AppId != "app" || string(d.Body) != "hello" {
		t.Fatalf("properties lost: %+v", d)
	}
	if _, ok := d.Headers["BCC"]; ok {
		t.Fatal("BCC header delivered")
	}
	if d.Headers["zeta"] != int32(1) || d.Headers["alpha"] != "a" || d.Headers["mid"] != int64(7) || len(d.Headers) != 3 {
		t.Fatalf("headers %v", d.Headers)
	}
}

func TestUserIDMustMatch(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := tb.channel(t)
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	publish(t, ch, "", "q", amqp091.Publishing{UserId: "alice", Body: []byte("x")})
	e := closeReason(t, closed)
	if e.Code != 406 || e.Reason != "PRECONDITION_FAILED - user_id property set to 'alice' but authenticated user was 'guest'" {
		t.Fatalf("got %d %q", e.Code, e.Reason)
	}
}

func TestBadExpiration(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := tb.channel(t)
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	publish(t, ch, "", "q", amqp091.Publishing{Expiration: "-1", Body: []byte("x")})
	e := closeReason(t, closed)
	if e.Code != 406 || e.Reason != "PRECONDITION_FAILED - invalid expiration '-1': {value_negative,-1}" {
		t.Fatalf("got %d %q", e.Code, e.Reason)
	}
}

func TestLargeMessageSplitAtFrameMax(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := confirmChannel(t, tb)
	ch.QueueDeclare("big", true, false, false, false, nil)
	body := make([]byte, 3<<20+17)
	for i := range body {
		body[i] = byte(i * 7)
	}
	publishConfirmed(t, ch, "", "big", true, string(body))
	d, ok, err := ch.Get("big", true)
	if err != nil || !ok || string(d.Body) != string(body) {
		t.Fatalf("get: ok=%v err=%v len=%d", ok, err, len(d.Body))
	}
}

func TestMaxMessageSize(t *testing.T) {
	tb := startBroker(t, brokerOpts{cfg: Config{MaxMessageSize: 1000}})
	_, ch := tb.channel(t)
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	publish(t, ch, "", "q", amqp091.Publishing{Body: make([]byte, 1001)})
	e := closeReason(t, closed)
	if e.Code != 406 || e.Reason != "PRECONDITION_FAILED - message size 1001 is larger than configured max size 1000" {
		t.Fatalf("got %d %q", e.Code, e.Reason)
	}
}
