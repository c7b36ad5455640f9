package amqp1

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warren-mq/warren/internal/amqp10/frame"
)

func publish091(t testing.TB, ch *amqp091.Channel, q string, n int, p amqp091.Publishing) {
	t.Helper()
	for i := range n {
		p.Body = fmt.Appendf(nil, "m%d", i)
		if err := ch.Publish("", q, false, false, p); err != nil {
			t.Fatal(err)
		}
	}
	// A get on the same channel orders after the publishes: wait until
	// the queue has them.
	if _, err := ch.QueueDeclarePassive(q, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
}

// waitReady waits until q has n ready messages (publishes, requeues and
// settlements are asynchronous to the client).
func waitReady(t testing.TB, tb *testBroker, q string, n int) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for tb.ready(t, q) != n {
		if time.Now().After(deadline) {
			t.Fatalf("queue %s: %d ready, want %d", q, tb.ready(t, q), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Ensure messages published over AMQP 0-9-1 arrive over AMQP 1.0 with
// their properties and headers converted, in order.
func TestConsumeFrom091(t *testing.T) {
	tb := startBroker(t, Config{})
	ch := tb.channel(t)
	declare(t, ch, "q", nil)
	publish091(t, ch, "q", 3, amqp091.Publishing{
		ContentType: "application/json", MessageId: "mid", CorrelationId: "cid", DeliveryMode: 2,
		Headers: amqp091.Table{"k": "v", "n": int32(7)},
	})
	waitReady(t, tb, "q", 3)
	_, s := tb.dial(t, nil)
	rcv, err := s.NewReceiver(ctxT(t), "/queues/q", &goamqp.ReceiverOptions{Credit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		m, err := rcv.Receive(ctxT(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(m.GetData()), fmt.Sprintf("m%d", i); got != want {
			t.Fatalf("body %q, want %q", got, want)
		}
		p := m.Properties
		if p == nil || p.MessageID != "mid" || p.CorrelationID != "cid" || p.ContentType == nil || *p.ContentType != "application/json" {
			t.Errorf("properties %+v", p)
		}
		if m.Header == nil || !m.Header.Durable {
			t.Errorf("header %+v, want durable", m.Header)
		}
		if m.ApplicationProperties["k"] != "v" || m.ApplicationProperties["n"] != int32(7) {
			t.Errorf("application properties %v", m.ApplicationProperties)
		}
		if err := rcv.AcceptMessage(ctxT(t), m); err != nil {
			t.Fatal(err)
		}
	}
	rcv.Close(ctxT(t))
	waitReady(t, tb, "q", 0)
}

// Ensure link credit is what the queue delivers: credit 1 takes exactly
// one message off the queue, and a drain takes what is there and uses up
// the rest.
func TestCredit(t *testing.T) {
	tb := startBroker(t, Config{})
	ch := tb.channel(t)
	declare(t, ch, "q", nil)
	publish091(t, ch, "q", 3, amqp091.Publishing{})
	waitReady(t, tb, "q", 3)
	_, s := tb.dial(t, nil)
	rcv, err := s.NewReceiver(ctxT(t), "/queues/q", &goamqp.ReceiverOptions{Credit: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := rcv.IssueCredit(1); err != nil {
		t.Fatal(err)
	}
	m, err := rcv.Receive(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.GetData()) != "m0" {
		t.Fatalf("first message %q", m.GetData())
	}
	if n := tb.ready(t, "q"); n != 2 {
		t.Fatalf("credit 1: %d ready left, want 2", n)
	}
	if err := rcv.IssueCredit(5); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"m1", "m2"} {
		m, err := rcv.Receive(ctxT(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.GetData()) != want {
			t.Fatalf("got %q, want %q", m.GetData(), want)
		}
	}
	// go-amqp drains with link-credit 0: the credit left (3) is gone
	// once Warren answers, and a new message stays in the queue.
	if err := rcv.DrainCredit(ctxT(t), nil); err != nil {
		t.Fatalf("drain: %v", err)
	}
	publish091(t, ch, "q", 1, amqp091.Publishing{})
	waitReady(t, tb, "q", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if m, err := rcv.Receive(ctx, nil); err == nil {
		t.Fatalf("after the drain: %q", m.GetData())
	}
	if n := tb.ready(t, "q"); n != 1 {
		t.Fatalf("after the drain: %d ready, want 1", n)
	}
}

// Ensure each outcome does what RabbitMQ does: accepted removes the
// message, released and modified requeue it, rejected and modified with
// undeliverable-here dead-letter it.
func TestDispositions(t *testing.T) {
	tb := startBroker(t, Config{})
	ch := tb.channel(t)
	declare(t, ch, "dlq", nil)
	declare(t, ch, "q", amqp091.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"})
	publish091(t, ch, "q", 5, amqp091.Publishing{})
	waitReady(t, tb, "q", 5)
	_, s := tb.dial(t, nil)
	rcv, err := s.NewReceiver(ctxT(t), "/queues/q", &goamqp.ReceiverOptions{Credit: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := rcv.IssueCredit(5); err != nil {
		t.Fatal(err)
	}
	var ms []*goamqp.Message
	for range 5 {
		m, err := rcv.Receive(ctxT(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	ctx := ctxT(t)
	for i, err := range []error{
		rcv.AcceptMessage(ctx, ms[0]),
		rcv.ReleaseMessage(ctx, ms[1]),
		rcv.RejectMessage(ctx, ms[2], nil),
		rcv.ModifyMessage(ctx, ms[3], &goamqp.ModifyMessageOptions{DeliveryFailed: true}),
		rcv.ModifyMessage(ctx, ms[4], &goamqp.ModifyMessageOptions{UndeliverableHere: true}),
	} {
		if err != nil {
			t.Fatalf("settle %d: %v", i, err)
		}
	}
	waitReady(t, tb, "q", 2)   // released, modified
	waitReady(t, tb, "dlq", 2) // rejected, undeliverable-here
	d := get(t, ch, "q", 2)
	if string(d[0].Body) != "m1" || string(d[1].Body) != "m3" || !d[0].Redelivered {
		t.Errorf("requeued %q %q (redelivered %v)", d[0].Body, d[1].Body, d[0].Redelivered)
	}
	d = get(t, ch, "dlq", 2)
	if string(d[0].Body) != "m2" || string(d[1].Body) != "m4" {
		t.Errorf("dead-lettered %q %q", d[0].Body, d[1].Body)
	}
}

// Ensure a pre-settled receiver (snd-settle-mode settled) takes messages
// off the queue as they are sent, and unsettled ones come back when the
// link detaches.
func TestSettledAndDetach(t *testing.T) {
	tb := startBroker(t, Config{})
	ch := tb.channel(t)
	declare(t, ch, "q", nil)
	publish091(t, ch, "q", 4, amqp091.Publishing{})
	waitReady(t, tb, "q", 4)
	_, s := tb.dial(t, nil)
	auto, err := s.NewReceiver(ctxT(t), "/queues/q", &goamqp.ReceiverOptions{Credit: -1, SettlementMode: nil,
		RequestedSenderSettleMode: ptr(goamqp.SenderSettleModeSettled)})
	if err != nil {
		t.Fatal(err)
	}
	if err := auto.IssueCredit(2); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := auto.Receive(ctxT(t), nil); err != nil {
			t.Fatal(err)
		}
	}
	auto.Close(ctxT(t))
	waitReady(t, tb, "q", 2)

	manual, err := s.NewReceiver(ctxT(t), "/queues/q", &goamqp.ReceiverOptions{Credit: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := manual.IssueCredit(2); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := manual.Receive(ctxT(t), nil); err != nil {
			t.Fatal(err)
		}
	}
	waitReady(t, tb, "q", 0)
	manual.Close(ctxT(t))
	waitReady(t, tb, "q", 2)
}

// Ensure AMQP 1.0 messages go into a stream as themselves, with the
// x-exchange and x-routing-key annotations, and come back with
// x-stream-offset from the offset the filter asks for.
func TestStream(t *testing.T) {
	tb := startBroker(t, Config{})
	ch := tb.channel(t)
	declare(t, ch, "s", amqp091.Table{"x-queue-type": "stream"})
	_, s := tb.dial(t, nil)
	snd, err := s.NewSender(ctxT(t), "/queues/s", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		m := goamqp.NewMessage(fmt.Appendf(nil, "s%d", i))
		m.ApplicationProperties = map[string]any{"i": int64(i)}
		if err := snd.Send(ctxT(t), m, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		spec  any
		first int
	}{{"first", 0}, {int64(2), 2}} {
		rcv, err := s.NewReceiver(ctxT(t), "/queues/s", &goamqp.ReceiverOptions{Credit: 10,
			Filters: []goamqp.LinkFilter{goamqp.NewLinkFilter(streamOffsetFilter, 0, tc.spec)}})
		if err != nil {
			t.Fatalf("receiver from %v: %v", tc.spec, err)
		}
		for i := tc.first; i < 3; i++ {
			m, err := rcv.Receive(ctxT(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			if string(m.GetData()) != fmt.Sprintf("s%d", i) || m.ApplicationProperties["i"] != int64(i) {
				t.Fatalf("from %v: got %q %v, want s%d", tc.spec, m.GetData(), m.ApplicationProperties, i)
			}
			ann := m.Annotations
			if ann["x-stream-offset"] != int64(i) || ann["x-exchange"] != "" || ann["x-routing-key"] != "s" {
				t.Errorf("annotations %v", ann)
			}
			if err := rcv.AcceptMessage(ctxT(t), m); err != nil {
				t.Fatal(err)
			}
		}
		rcv.Close(ctxT(t))
	}
	// An AMQP 0-9-1 stream consumer reads them converted.
	if err := ch.Qos(10, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume("s", "", false, false, false, false, amqp091.Table{"x-stream-offset": "first"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		d := <-ds
		if string(d.Body) != fmt.Sprintf("s%d", i) || d.Headers["i"] != int64(i) || d.Headers["x-stream-offset"] != int64(i) || d.RoutingKey != "s" {
			t.Fatalf("0-9-1 delivery %d: %q headers %v key %q", i, d.Body, d.Headers, d.RoutingKey)
		}
		d.Ack(false)
	}
	// And what AMQP 0-9-1 publishes to the stream reads over AMQP 1.0.
	publish091(t, ch, "s", 1, amqp091.Publishing{Headers: amqp091.Table{"h": "v"}, ContentType: "text/plain"})
	rcv, err := s.NewReceiver(ctxT(t), "/queues/s", &goamqp.ReceiverOptions{Credit: 1,
		Filters: []goamqp.LinkFilter{goamqp.NewLinkFilter(streamOffsetFilter, 0, int64(3))}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := rcv.Receive(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.GetData()) != "m0" || m.ApplicationProperties["h"] != "v" || m.Properties == nil || *m.Properties.ContentType != "text/plain" ||
		m.Annotations["x-stream-offset"] != int64(3) || m.Annotations["x-routing-key"] != "s" {
		t.Fatalf("published over 0-9-1: %q %v %+v %v", m.GetData(), m.ApplicationProperties, m.Properties, m.Annotations)
	}
	rcv.AcceptMessage(ctxT(t), m)
}

// Ensure a drain with more credit than messages (sent by hand: go-amqp
// drains with credit 0) gets the messages there are, then a flow that
// advances the delivery-count by the unused credit, as §2.6.7 says.
func TestDrainRaw(t *testing.T) {
	tb := startBroker(t, Config{})
	ch := tb.channel(t)
	declare(t, ch, "q", nil)
	publish091(t, ch, "q", 2, amqp091.Publishing{})
	waitReady(t, tb, "q", 2)
	rc := tb.raw(t)
	rc.open(&frame.Open{ContainerID: "raw", MaxFrameSize: 65536})
	rc.send(&frame.Begin{NextOutgoingID: 0, IncomingWindow: 100, OutgoingWindow: 100})
	rc.send(&frame.Attach{Name: "r", Handle: 0, Role: frame.RoleReceiver, Source: &frame.Source{Address: "/queues/q"}, Target: &frame.Target{}})
	rc.send(&frame.Flow{HasNextIncomingID: true, IncomingWindow: 100, OutgoingWindow: 100,
		Handle: 0, HasHandle: true, DeliveryCount: 0, HasDeliveryCount: true, LinkCredit: 5, HasLinkCredit: true, Drain: true})
	transfers := 0
	for {
		p, err := rc.next()
		if err != nil {
			t.Fatal(err)
		}
		switch p := p.(type) {
		case *frame.Transfer:
			transfers++
		case *frame.Flow:
			if !p.HasHandle {
				continue
			}
			if transfers != 2 || !p.Drain || p.DeliveryCount != 5 || p.LinkCredit != 0 {
				t.Fatalf("after %d transfers: flow drain %v delivery-count %d credit %d; want 2, true, 5, 0", transfers, p.Drain, p.DeliveryCount, p.LinkCredit)
			}
			return
		}
	}
}

// Ensure deleting a queue detaches its consumers' links with
// amqp:resource-deleted, as RabbitMQ does.
func TestQueueDeletedDetaches(t *testing.T) {
	tb := startBroker(t, Config{})
	ch := tb.channel(t)
	declare(t, ch, "gone", nil)
	_, s := tb.dial(t, nil)
	rcv, err := s.NewReceiver(ctxT(t), "/queues/gone", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDelete("gone", false, false, false); err != nil {
		t.Fatal(err)
	}
	_, err = rcv.Receive(ctxT(t), nil)
	var le *goamqp.LinkError
	if !errors.As(err, &le) || le.RemoteErr == nil || le.RemoteErr.Condition != goamqp.ErrCondResourceDeleted {
		t.Fatalf("receive after the delete: %v, want the link detached with resource-deleted", err)
	}
}

// Ensure a sender whose /queues/:q target is deleted is detached with
// amqp:resource-deleted, as RabbitMQ 4.x, for each way a queue goes
// (deleted by a client, its exclusive owner closing), while the
// session's other links go on: a sender to another queue still
// publishes and a queue's stream twin is detached too.
func TestQueueDeletedDetachesSender(t *testing.T) {
	tb := startBroker(t, Config{})
	ch := tb.channel(t)
	declare(t, ch, "gone", nil)
	declare(t, ch, "stays", nil)
	if _, err := ch.QueueDeclare("st", true, false, false, false, amqp091.Table{"x-queue-type": "stream"}); err != nil {
		t.Fatal(err)
	}
	ownerConn, err := amqp091.Dial("amqp://guest:guest@" + tb.addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	owner, err := ownerConn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := owner.QueueDeclare("excl", false, false, true, false, nil); err != nil {
		t.Fatal(err)
	}
	_, s := tb.dial(t, nil)
	send := func(addr string) *goamqp.Sender {
		snd, err := s.NewSender(ctxT(t), addr, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := snd.Send(ctxT(t), goamqp.NewMessage([]byte("before")), nil); err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		return snd
	}
	gone, st, excl, stays := send("/queues/gone"), send("/queues/st"), send("/queues/excl"), send("/queues/stays")
	if _, err := ch.QueueDelete("gone", false, false, false); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDelete("st", false, false, false); err != nil {
		t.Fatal(err)
	}
	ownerConn.Close()
	for name, snd := range map[string]*goamqp.Sender{"gone": gone, "st": st, "excl": excl} {
		var err error
		deadline := time.Now().Add(5 * time.Second)
		for err == nil && time.Now().Before(deadline) {
			err = snd.Send(ctxT(t), goamqp.NewMessage([]byte("after")), nil)
			time.Sleep(10 * time.Millisecond)
		}
		var le *goamqp.LinkError
		if !errors.As(err, &le) || le.RemoteErr == nil || le.RemoteErr.Condition != goamqp.ErrCondResourceDeleted {
			t.Fatalf("%s: send after the delete: %v, want the link detached with resource-deleted", name, err)
		}
	}
	for range 3 {
		if err := stays.Send(ctxT(t), goamqp.NewMessage([]byte("after")), nil); err != nil {
			t.Fatalf("the other sender: %v", err)
		}
	}
	waitReady(t, tb, "stays", 4)
}

// Ensure a quorum queue counts only failed deliveries toward its
// delivery limit, as RabbitMQ 4.x: released and modified without
// delivery-failed requeue uncounted (delivery-count stays, first-acquirer
// turns false), modified with delivery-failed counts, and a message past
// x-delivery-limit is dead-lettered.
func TestDeliveryLimitCountsFailures(t *testing.T) {
	tb := startBroker(t, Config{})
	ch := tb.channel(t)
	declare(t, ch, "dlq", nil)
	declare(t, ch, "qq", amqp091.Table{"x-queue-type": "quorum", "x-delivery-limit": int32(1),
		"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"})
	publish091(t, ch, "qq", 1, amqp091.Publishing{})
	waitReady(t, tb, "qq", 1)
	_, s := tb.dial(t, nil)
	rcv, err := s.NewReceiver(ctxT(t), "/queues/qq", &goamqp.ReceiverOptions{Credit: -1})
	if err != nil {
		t.Fatal(err)
	}
	next := func() *goamqp.Message {
		t.Helper()
		if err := rcv.IssueCredit(1); err != nil {
			t.Fatal(err)
		}
		m, err := rcv.Receive(ctxT(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.GetData()) != "m0" {
			t.Fatalf("body %q", m.GetData())
		}
		return m
	}
	header := func(m *goamqp.Message) (bool, uint32) {
		if m.Header == nil {
			return true, 0
		}
		return m.Header.FirstAcquirer, m.Header.DeliveryCount
	}
	m := next()
	if fa, dc := header(m); !fa || dc != 0 {
		t.Fatalf("first delivery: first-acquirer %v, delivery-count %d", fa, dc)
	}
	// Far more uncounted returns than the limit allows.
	for i := range 4 {
		var err error
		if i%2 == 0 {
			err = rcv.ReleaseMessage(ctxT(t), m)
		} else {
			err = rcv.ModifyMessage(ctxT(t), m, &goamqp.ModifyMessageOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
		m = next()
		if fa, dc := header(m); fa || dc != 0 {
			t.Fatalf("after %d uncounted returns: first-acquirer %v, delivery-count %d", i+1, fa, dc)
		}
	}
	// One failure is within the limit of 1 ...
	if err := rcv.ModifyMessage(ctxT(t), m, &goamqp.ModifyMessageOptions{DeliveryFailed: true}); err != nil {
		t.Fatal(err)
	}
	m = next()
	if fa, dc := header(m); fa || dc != 1 {
		t.Fatalf("after a failure: first-acquirer %v, delivery-count %d", fa, dc)
	}
	// ... a second is past it: dead-lettered.
	if err := rcv.ModifyMessage(ctxT(t), m, &goamqp.ModifyMessageOptions{DeliveryFailed: true}); err != nil {
		t.Fatal(err)
	}
	waitReady(t, tb, "dlq", 1)
	if n := tb.ready(t, "qq"); n != 0 {
		t.Fatalf("qq has %d ready after the limit", n)
	}
	d := get(t, ch, "dlq", 1)
	if string(d[0].Body) != "m0" {
		t.Fatalf("dead-lettered %q", d[0].Body)
	}
	if xd, ok := d[0].Headers["x-death"].([]any); !ok || len(xd) != 1 || xd[0].(amqp091.Table)["reason"] != "delivery_limit" {
		t.Fatalf("x-death %v", d[0].Headers["x-death"])
	}
}

// Ensure a modified outcome's message annotations stay on a quorum
// queue's message, merged over earlier ones, for AMQP 1.0 consumers
// (message annotations) and 0-9-1 ones (headers), "x-" keys only, as
// RabbitMQ 4.x keeps them; a classic queue ignores them, as RabbitMQ's.
func TestModifiedAnnotations(t *testing.T) {
	tb := startBroker(t, Config{})
	ch := tb.channel(t)
	declare(t, ch, "qq", amqp091.Table{"x-queue-type": "quorum"})
	declare(t, ch, "cq", nil)
	publish091(t, ch, "qq", 1, amqp091.Publishing{Headers: amqp091.Table{"orig": "kept"}})
	publish091(t, ch, "cq", 1, amqp091.Publishing{})
	waitReady(t, tb, "qq", 1)
	waitReady(t, tb, "cq", 1)
	_, s := tb.dial(t, nil)
	for _, q := range []string{"qq", "cq"} {
		rcv, err := s.NewReceiver(ctxT(t), "/queues/"+q, &goamqp.ReceiverOptions{Credit: -1})
		if err != nil {
			t.Fatal(err)
		}
		next := func() *goamqp.Message {
			t.Helper()
			if err := rcv.IssueCredit(1); err != nil {
				t.Fatal(err)
			}
			m, err := rcv.Receive(ctxT(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		m := next()
		if err := rcv.ModifyMessage(ctxT(t), m, &goamqp.ModifyMessageOptions{Annotations: goamqp.Annotations{
			"x-opt-retry": int64(3), "x-foo": "bar", "reserved": "dropped"}}); err != nil {
			t.Fatal(err)
		}
		m = next()
		if q == "cq" {
			if _, ok := m.Annotations["x-foo"]; ok {
				t.Fatalf("classic queue kept annotations: %v", m.Annotations)
			}
			rcv.AcceptMessage(ctxT(t), m)
			continue
		}
		if m.Annotations["x-opt-retry"] != int64(3) || m.Annotations["x-foo"] != "bar" || m.Annotations["reserved"] != nil {
			t.Fatalf("after the first modified: annotations %v", m.Annotations)
		}
		if m.ApplicationProperties["orig"] != "kept" {
			t.Fatalf("application properties %v", m.ApplicationProperties)
		}
		if err := rcv.ModifyMessage(ctxT(t), m, &goamqp.ModifyMessageOptions{Annotations: goamqp.Annotations{"x-opt-retry": int64(4)}}); err != nil {
			t.Fatal(err)
		}
		m = next()
		if m.Annotations["x-opt-retry"] != int64(4) || m.Annotations["x-foo"] != "bar" {
			t.Fatalf("after the second modified: annotations %v", m.Annotations)
		}
		if err := rcv.ReleaseMessage(ctxT(t), m); err != nil {
			t.Fatal(err)
		}
		rcv.Close(ctxT(t))
		waitReady(t, tb, "qq", 1)
		d := get(t, ch, "qq", 1)
		if d[0].Headers["x-opt-retry"] != int64(4) || d[0].Headers["x-foo"] != "bar" || d[0].Headers["orig"] != "kept" {
			t.Fatalf("0-9-1 headers %v", d[0].Headers)
		}
	}
}

// Ensure a stream-offset filter on a classic queue that keeps its
// history makes a history reader: the settled messages again, with
// x-stream-offset as a message annotation, the queue untouched; on a
// queue without history the filter is ignored, as before.
func TestQueueHistory(t *testing.T) {
	tb := startBroker(t, Config{})
	ch := tb.channel(t)
	declare(t, ch, "h", amqp091.Table{"x-history-max-age": "1D"})
	declare(t, ch, "plain", nil)
	for _, q := range []string{"h", "plain"} {
		publish091(t, ch, q, 3, amqp091.Publishing{Headers: amqp091.Table{"k": "v"}})
	}
	_, s := tb.dial(t, nil)
	// Consume and accept everything of h with an ordinary receiver.
	rcv, err := s.NewReceiver(ctxT(t), "/queues/h", &goamqp.ReceiverOptions{Credit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		m, err := rcv.Receive(ctxT(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		noErr(t, rcv.AcceptMessage(ctxT(t), m))
	}
	rcv.Close(ctxT(t))
	if n := tb.ready(t, "h"); n != 0 {
		t.Fatalf("%d ready", n)
	}
	hr, err := s.NewReceiver(ctxT(t), "/queues/h", &goamqp.ReceiverOptions{Credit: 10,
		Filters: []goamqp.LinkFilter{goamqp.NewLinkFilter(streamOffsetFilter, 0, "first")}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		m, err := hr.Receive(ctxT(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.GetData()) != fmt.Sprintf("m%d", i) || m.Annotations["x-stream-offset"] != int64(i) ||
			m.ApplicationProperties["k"] != "v" || m.ApplicationProperties["x-stream-offset"] != nil {
			t.Fatalf("history %d: %q annotations %v properties %v", i, m.GetData(), m.Annotations, m.ApplicationProperties)
		}
		noErr(t, hr.AcceptMessage(ctxT(t), m))
	}
	if n := tb.ready(t, "h"); n != 0 {
		t.Fatalf("%d ready after the history read", n)
	}
	// Without history: an ordinary consumer, which takes the messages.
	pr, err := s.NewReceiver(ctxT(t), "/queues/plain", &goamqp.ReceiverOptions{Credit: 10,
		Filters: []goamqp.LinkFilter{goamqp.NewLinkFilter(streamOffsetFilter, 0, "first")}})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		m, err := pr.Receive(ctxT(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		noErr(t, pr.AcceptMessage(ctxT(t), m))
	}
	deadline := time.Now().Add(10 * time.Second)
	for tb.ready(t, "plain") != 0 || func() bool { q, _ := tb.broker.Queue("/", "plain"); return q.Stats().Unacked != 0 }() {
		if time.Now().After(deadline) {
			t.Fatal("the plain queue kept its messages")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func noErr(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
