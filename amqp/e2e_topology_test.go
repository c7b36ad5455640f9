package amqp

import (
	"context"
	"slices"
	"sort"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warren-mq/warren/amqp/wire"
)

// declareBound declares an exclusive server-named queue bound to
// exchange with each key and returns its name.
func declareBound(t *testing.T, ch *amqp091.Channel, exchange string, args amqp091.Table, keys ...string) string {
	t.Helper()
	q, err := ch.QueueDeclare("", false, false, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if err := ch.QueueBind(q.Name, k, exchange, false, args); err != nil {
			t.Fatalf("bind %s %q: %v", exchange, k, err)
		}
	}
	return q.Name
}

// drain gets every ready message of queue, in order.
func drain(t *testing.T, ch *amqp091.Channel, queue string) []string {
	t.Helper()
	var out []string
	for {
		d, ok, err := ch.Get(queue, true)
		if err != nil {
			t.Fatalf("get %s: %v", queue, err)
		}
		if !ok {
			return out
		}
		out = append(out, string(d.Body))
	}
}

func TestExchangeTypesRoute(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := confirmChannel(t, tb)
	for _, x := range []struct{ name, kind string }{{"d", "direct"}, {"f", "fanout"}, {"t", "topic"}, {"h", "headers"}} {
		if err := ch.ExchangeDeclare(x.name, x.kind, false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	qd := declareBound(t, ch, "d", nil, "k1", "k2")
	qf1 := declareBound(t, ch, "f", nil, "ignored")
	qf2 := declareBound(t, ch, "f", nil, "")
	qstar := declareBound(t, ch, "t", nil, "order.*")
	qhash := declareBound(t, ch, "t", nil, "order.#", "#.eu")
	qall := declareBound(t, ch, "h", amqp091.Table{"x-match": "all", "a": "1", "b": int32(2)}, "")
	qany := declareBound(t, ch, "h", amqp091.Table{"x-match": "any", "a": "1", "b": int32(2)}, "")

	publishConfirmed(t, ch, "d", "k1", false, "d1")
	publishConfirmed(t, ch, "d", "k2", false, "d2")
	publishConfirmed(t, ch, "d", "k3", false, "lost")
	publishConfirmed(t, ch, "f", "whatever", false, "f1")
	publishConfirmed(t, ch, "t", "order.created", false, "t1")
	publishConfirmed(t, ch, "t", "order.created.eu", false, "t2")
	publishConfirmed(t, ch, "t", "order", false, "t3")
	publishConfirmed(t, ch, "t", "user.eu", false, "t4")
	for _, h := range []struct {
		body    string
		headers amqp091.Table
	}{{"h-both", amqp091.Table{"a": "1", "b": int32(2)}}, {"h-a", amqp091.Table{"a": "1"}}, {"h-none", amqp091.Table{"a": "2"}}} {
		dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "h", "", false, false, amqp091.Publishing{Headers: h.headers, Body: []byte(h.body)})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := dc.WaitContext(context.Background()); !ok || err != nil {
			t.Fatal("confirm", ok, err)
		}
	}
	for _, c := range []struct {
		queue string
		want  []string
	}{
		{qd, []string{"d1", "d2"}},
		{qf1, []string{"f1"}},
		{qf2, []string{"f1"}},
		{qstar, []string{"t1"}},
		{qhash, []string{"t1", "t2", "t3", "t4"}},
		{qall, []string{"h-both"}},
		{qany, []string{"h-both", "h-a"}},
	} {
		if got := drain(t, ch, c.queue); !slices.Equal(got, c.want) {
			t.Errorf("queue bound as %v: got %v, want %v", c.queue, got, c.want)
		}
	}
}

func TestExchangeDeclareErrors(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c := tb.dial(t)
	try := func(f func(ch *amqp091.Channel) error) error {
		ch, err := c.Channel()
		if err != nil {
			t.Fatal(err)
		}
		return f(ch)
	}
	if err := try(func(ch *amqp091.Channel) error {
		return ch.ExchangeDeclare("x", "direct", true, false, false, false, nil)
	}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		f    func(ch *amqp091.Channel) error
		code int
		text string
	}{
		{func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("x", "fanout", true, false, false, false, nil)
		},
			406, "PRECONDITION_FAILED - inequivalent arg 'type' for exchange 'x' in vhost '/': received 'fanout' but current is 'direct'"},
		{func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("x", "direct", false, false, false, false, nil)
		},
			406, "PRECONDITION_FAILED - inequivalent arg 'durable' for exchange 'x' in vhost '/': received 'false' but current is 'true'"},
		{func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("amq.mine", "direct", true, false, false, false, nil)
		},
			403, "ACCESS_REFUSED - exchange name 'amq.mine' contains reserved prefix 'amq.*'"},
		{func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("y", "nope", true, false, false, false, nil)
		},
			406, "PRECONDITION_FAILED - unknown exchange type 'nope'"},
		{func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclarePassive("missing", "direct", true, false, false, false, nil)
		},
			404, "NOT_FOUND - no exchange 'missing' in vhost '/'"},
		{func(ch *amqp091.Channel) error { return ch.ExchangeDelete("amq.direct", false, false) },
			403, "ACCESS_REFUSED - deletion of system exchange 'amq.direct' in vhost '/' not allowed"},
		{func(ch *amqp091.Channel) error { return ch.QueueBind("nope", "k", "x", false, nil) },
			404, "NOT_FOUND - no queue 'nope' in vhost '/'"},
		{func(ch *amqp091.Channel) error { return ch.QueueBind("nope", "k", "missing", false, nil) },
			404, "NOT_FOUND - no exchange 'missing' in vhost '/'"},
		{func(ch *amqp091.Channel) error {
			return ch.PublishWithContext(context.Background(), "missing", "k", false, false, amqp091.Publishing{})
		}, 404, "NOT_FOUND - no exchange 'missing' in vhost '/'"},
	} {
		ch, err := c.Channel()
		if err != nil {
			t.Fatal(err)
		}
		closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
		err = tc.f(ch)
		if err == nil {
			// Publish is asynchronous: the error comes as a close.
			e := closeReason(t, closed)
			err = e
		}
		amqpErr(t, err, tc.code, tc.text)
	}
	// Equivalent redeclares are fine, including of amq.* exchanges.
	if err := try(func(ch *amqp091.Channel) error {
		if err := ch.ExchangeDeclare("x", "direct", true, false, false, false, nil); err != nil {
			return err
		}
		return ch.ExchangeDeclare("amq.topic", "topic", true, false, false, false, nil)
	}); err != nil {
		t.Fatal(err)
	}
	// Unbinding what does not exist is fine.
	if err := try(func(ch *amqp091.Channel) error { return ch.QueueUnbind("nope", "k", "missing", nil) }); err != nil {
		t.Fatal(err)
	}
}

func TestMandatoryReturnBeforeConfirm(t *testing.T) {
	// amqp091-go hands returns and confirms to separate Go channels, so
	// the order is checked on the wire.
	tb := startBroker(t, brokerOpts{})
	c := rawDial(t, tb.addr)
	c.open(0)
	c.openChannel(1)
	c.send(1, &wire.ConfirmSelect{})
	c.expect(1, "confirm.select-ok")
	b := wire.AppendMethodFrame(nil, 1, &wire.BasicPublish{Exchange: "amq.direct", RoutingKey: "nowhere", Mandatory: true})
	b = wire.AppendHeaderFrame(b, 1, wire.ClassBasic, 4, []byte{0, 0})
	b = wire.AppendBodyFrames(b, 1, []byte("back"), 131072)
	c.write(b)
	r := c.expect(1, "basic.return").(*wire.BasicReturn)
	if r.ReplyCode != 312 || r.ReplyText != "NO_ROUTE" || r.Exchange != "amq.direct" || r.RoutingKey != "nowhere" {
		t.Fatalf("return %+v", r)
	}
	if f := c.frame(); f.Type != wire.FrameHeader {
		t.Fatalf("frame type %d after basic.return, want a content header", f.Type)
	}
	if f := c.frame(); f.Type != wire.FrameBody || string(f.Payload) != "back" {
		t.Fatalf("frame %d %q, want the body", f.Type, f.Payload)
	}
	ack := c.expect(1, "basic.ack").(*wire.BasicAck)
	if ack.DeliveryTag != 1 || ack.Multiple {
		t.Fatalf("confirm %+v", ack)
	}
}

func TestCCAndAlternateAndExchangeBindings(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := confirmChannel(t, tb)
	// CC adds routing keys; the header stays on the message.
	q1 := declareBound(t, ch, "amq.direct", nil, "one")
	q2 := declareBound(t, ch, "amq.direct", nil, "two")
	dc, _ := ch.PublishWithDeferredConfirmWithContext(context.Background(), "amq.direct", "one", false, false,
		amqp091.Publishing{Headers: amqp091.Table{"CC": []any{"two"}}, Body: []byte("cc")})
	dc.WaitContext(context.Background())
	for _, q := range []string{q1, q2} {
		d, ok, err := ch.Get(q, true)
		if err != nil || !ok || string(d.Body) != "cc" {
			t.Fatalf("get %s: %v %v", q, ok, err)
		}
		if cc, _ := d.Headers["CC"].([]any); len(cc) != 1 || cc[0] != "two" {
			t.Fatalf("CC header %v", d.Headers)
		}
	}
	// Alternate exchange takes what the main one does not route.
	if err := ch.ExchangeDeclare("ae", "fanout", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDeclare("main", "direct", false, false, false, false, amqp091.Table{"alternate-exchange": "ae"}); err != nil {
		t.Fatal(err)
	}
	qmain := declareBound(t, ch, "main", nil, "k")
	qae := declareBound(t, ch, "ae", nil, "")
	returns := ch.NotifyReturn(make(chan amqp091.Return, 1))
	publishConfirmedMandatory(t, ch, "main", "k", "routed")
	publishConfirmedMandatory(t, ch, "main", "other", "unrouted")
	select {
	case r := <-returns:
		t.Fatalf("returned %q despite the alternate exchange", r.Body)
	default:
	}
	if got := drain(t, ch, qmain); !slices.Equal(got, []string{"routed"}) {
		t.Fatalf("main queue %v", got)
	}
	if got := drain(t, ch, qae); !slices.Equal(got, []string{"unrouted"}) {
		t.Fatalf("alternate queue %v", got)
	}
	// Exchange-to-exchange bindings, with a cycle: each queue gets one copy.
	for _, x := range []string{"e1", "e2"} {
		if err := ch.ExchangeDeclare(x, "fanout", false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := ch.ExchangeBind("e2", "", "e1", false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeBind("e1", "", "e2", false, nil); err != nil {
		t.Fatal(err)
	}
	qa := declareBound(t, ch, "e1", nil, "")
	qb := declareBound(t, ch, "e2", nil, "")
	if err := ch.QueueBind(qb, "", "e1", false, nil); err != nil {
		t.Fatal(err)
	}
	publishConfirmed(t, ch, "e1", "", false, "once")
	got := append(drain(t, ch, qa), drain(t, ch, qb)...)
	sort.Strings(got)
	if !slices.Equal(got, []string{"once", "once"}) {
		t.Fatalf("e2e copies %v", got)
	}
}

func publishConfirmedMandatory(t *testing.T, ch *amqp091.Channel, exchange, key, body string) {
	t.Helper()
	dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), exchange, key, true, false, amqp091.Publishing{Body: []byte(body)})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := dc.WaitContext(context.Background()); !ok || err != nil {
		t.Fatalf("confirm: %v %v", ok, err)
	}
}

func TestDurableTopologySurvivesRestart(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := confirmChannel(t, tb)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(ch.ExchangeDeclare("dx", "topic", true, false, false, false, nil))
	must(ch.ExchangeDeclare("tx", "topic", false, false, false, false, nil))
	_, err := ch.QueueDeclare("dq", true, false, false, false, nil)
	must(err)
	_, err = ch.QueueDeclare("tq", false, false, false, false, nil)
	must(err)
	must(ch.QueueBind("dq", "a.#", "dx", false, nil))
	must(ch.QueueBind("tq", "a.#", "dx", false, nil))
	publishConfirmed(t, ch, "dx", "a.b", true, "persistent")
	publishConfirmed(t, ch, "dx", "a.c", false, "transient")

	tb = tb.restart(t)
	_, ch = confirmChannel(t, tb)
	c := tb.dial(t)
	for _, tc := range []struct {
		f    func(ch *amqp091.Channel) error
		code int
	}{
		{func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclarePassive("dx", "topic", true, false, false, false, nil)
		}, 0},
		{func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclarePassive("tx", "topic", false, false, false, false, nil)
		}, 404},
		{func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclarePassive("tq", false, false, false, false, nil)
			return err
		}, 404},
	} {
		ch2, err := c.Channel()
		must(err)
		err = tc.f(ch2)
		if tc.code == 0 {
			must(err)
		} else {
			amqpErr(t, err, tc.code, "")
		}
	}
	q, err := ch.QueueDeclarePassive("dq", true, false, false, false, nil)
	must(err)
	if q.Messages != 1 {
		t.Fatalf("dq has %d messages after restart, want 1 (the persistent one)", q.Messages)
	}
	if got := drain(t, ch, "dq"); !slices.Equal(got, []string{"persistent"}) {
		t.Fatalf("dq after restart: %v", got)
	}
	// The durable binding still routes.
	publishConfirmed(t, ch, "dx", "a.z", true, "after")
	if got := drain(t, ch, "dq"); !slices.Equal(got, []string{"after"}) {
		t.Fatalf("dq routed after restart: %v", got)
	}
}
