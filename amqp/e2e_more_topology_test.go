package amqp

import (
	"context"
	"slices"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// exchangeExists reports whether a passive declare of name succeeds (on
// a channel of its own, as a 404 closes it).
func exchangeExists(t *testing.T, c *amqp091.Connection, name string) bool {
	t.Helper()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	err = ch.ExchangeDeclarePassive(name, "", false, false, false, false, nil)
	if err == nil {
		ch.Close()
		return true
	}
	amqpErr(t, err, 404, "NOT_FOUND - no exchange '"+name+"' in vhost '/'")
	return false
}

// queueExists is exchangeExists for queues.
func queueExists(t *testing.T, c *amqp091.Connection, name string) bool {
	t.Helper()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	_, err = ch.QueueDeclarePassive(name, false, false, false, false, nil)
	if err == nil {
		ch.Close()
		return true
	}
	amqpErr(t, err, 404, "NOT_FOUND - no queue '"+name+"' in vhost '/'")
	return false
}

// noReturn asserts that no basic.return has arrived.
func noReturn(t *testing.T, returns chan amqp091.Return) {
	t.Helper()
	select {
	case r := <-returns:
		t.Fatalf("returned %q (%d %s)", r.Body, r.ReplyCode, r.ReplyText)
	default:
	}
}

func TestInternalExchange(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c, ch := confirmChannel(t, tb)
	returns := ch.NotifyReturn(make(chan amqp091.Return, 4))
	must(t, ch.ExchangeDeclare("inner", "fanout", false, false, true, false, nil))
	must(t, ch.ExchangeDeclare("front", "direct", false, false, false, false, nil))
	q := declareBound(t, ch, "inner", nil, "")
	must(t, ch.ExchangeBind("inner", "k", "front", false, nil))

	// Through an exchange-to-exchange binding the internal one routes.
	confirmOne(t, ch, "front", "k", true, amqp091.Publishing{Body: []byte("through")})
	noReturn(t, returns)
	if got := drain(t, ch, q); !slices.Equal(got, []string{"through"}) {
		t.Fatalf("queue behind the internal exchange got %v", got)
	}
	// Publishing to it directly is refused, as to amq.rabbitmq.trace.
	for _, x := range []string{"inner", "amq.rabbitmq.trace"} {
		chanErr(t, c, 403, "ACCESS_REFUSED - cannot publish to internal exchange '"+x+"' in vhost '/'", func(ch *amqp091.Channel) error {
			return ch.PublishWithContext(context.Background(), x, "", false, false, amqp091.Publishing{Body: []byte("direct")})
		})
	}
	if got := drain(t, ch, q); len(got) != 0 {
		t.Fatalf("refused publish reached the queue: %v", got)
	}
	// internal is part of equivalence.
	chanErr(t, c, 406, "PRECONDITION_FAILED - inequivalent arg 'internal' for exchange 'inner' in vhost '/': received 'false' but current is 'true'", func(ch *amqp091.Channel) error {
		return ch.ExchangeDeclare("inner", "fanout", false, false, false, false, nil)
	})
	must(t, ch.ExchangeDeclare("inner", "fanout", false, false, true, false, nil))
}

func TestAutoDeleteExchange(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c, ch := tb.channel(t)
	for _, q := range []string{"adq1", "adq2", "adq3"} {
		if _, err := ch.QueueDeclare(q, false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}

	// Never bound: it stays.
	must(t, ch.ExchangeDeclare("ad1", "direct", false, true, false, false, nil))
	if !exchangeExists(t, c, "ad1") {
		t.Fatal("auto-delete exchange without bindings deleted")
	}
	// Unbinding: it goes with its last binding, not before.
	must(t, ch.QueueBind("adq1", "a", "ad1", false, nil))
	must(t, ch.QueueBind("adq1", "b", "ad1", false, nil))
	must(t, ch.QueueUnbind("adq1", "a", "ad1", nil))
	if !exchangeExists(t, c, "ad1") {
		t.Fatal("auto-delete exchange deleted with a binding left")
	}
	must(t, ch.QueueUnbind("adq1", "b", "ad1", nil))
	if exchangeExists(t, c, "ad1") {
		t.Fatal("auto-delete exchange kept after its last unbind")
	}

	// Deleting the bound queue removes the binding, and so the exchange.
	must(t, ch.ExchangeDeclare("ad2", "fanout", false, true, false, false, nil))
	must(t, ch.QueueBind("adq2", "", "ad2", false, nil))
	if _, err := ch.QueueDelete("adq2", false, false, false); err != nil {
		t.Fatal(err)
	}
	if exchangeExists(t, c, "ad2") {
		t.Fatal("auto-delete exchange kept after its queue was deleted")
	}

	// Transitively: ad3 -> ad4 -> adq3; deleting adq3 empties ad4, whose
	// deletion empties ad3.
	must(t, ch.ExchangeDeclare("ad3", "fanout", false, true, false, false, nil))
	must(t, ch.ExchangeDeclare("ad4", "fanout", false, true, false, false, nil))
	must(t, ch.ExchangeBind("ad4", "", "ad3", false, nil))
	must(t, ch.QueueBind("adq3", "", "ad4", false, nil))
	if _, err := ch.QueueDelete("adq3", false, false, false); err != nil {
		t.Fatal(err)
	}
	for _, x := range []string{"ad3", "ad4"} {
		if exchangeExists(t, c, x) {
			t.Fatalf("%s kept", x)
		}
	}

	// An exclusive queue's connection closing deletes the queue, its
	// bindings, and so the exchange.
	must(t, ch.ExchangeDeclare("ad5", "fanout", false, true, false, false, nil))
	oc, och := tb.channel(t)
	q, err := och.QueueDeclare("", false, false, true, false, nil)
	must(t, err)
	must(t, och.QueueBind(q.Name, "", "ad5", false, nil))
	oc.Close()
	if exchangeExists(t, c, "ad5") {
		t.Fatal("auto-delete exchange kept after its exclusive queue went")
	}
}

func TestExchangeDelete(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c, ch := confirmChannel(t, tb)
	returns := ch.NotifyReturn(make(chan amqp091.Return, 4))
	must(t, ch.ExchangeDeclare("xd", "direct", false, false, false, false, nil))
	if _, err := ch.QueueDeclare("xdq", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	must(t, ch.QueueBind("xdq", "k", "xd", false, nil))

	// if-unused: a binding from the exchange is a use.
	chanErr(t, c, 406, "PRECONDITION_FAILED - exchange 'xd' in vhost '/' in use", func(ch *amqp091.Channel) error {
		return ch.ExchangeDelete("xd", true, false)
	})
	// A binding to it (as a destination) is not.
	must(t, ch.ExchangeDeclare("dest", "fanout", false, false, false, false, nil))
	must(t, ch.ExchangeBind("dest", "", "amq.fanout", false, nil))
	must(t, ch.ExchangeDelete("dest", true, false))
	if exchangeExists(t, c, "dest") {
		t.Fatal("dest not deleted")
	}
	// Its binding from amq.fanout went with it: amq.fanout routes nowhere.
	confirmOne(t, ch, "amq.fanout", "", true, amqp091.Publishing{Body: []byte("fanout")})
	select {
	case r := <-returns:
		if r.ReplyCode != 312 || r.Exchange != "amq.fanout" || string(r.Body) != "fanout" {
			t.Fatalf("return %+v", r)
		}
	default:
		t.Fatal("publish to amq.fanout was routed after its destination was deleted")
	}

	// Deleting a missing exchange is fine.
	must(t, ch.ExchangeDelete("never-was", false, false))
	must(t, ch.ExchangeDelete("never-was", true, false))
	// The default exchange can be neither deleted nor declared, even
	// passively.
	for _, f := range []func(ch *amqp091.Channel) error{
		func(ch *amqp091.Channel) error { return ch.ExchangeDelete("", false, false) },
		func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclarePassive("", "direct", true, false, false, false, nil)
		},
		func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("", "direct", true, false, false, false, nil)
		},
	} {
		chanErr(t, c, 403, "ACCESS_REFUSED - operation not permitted on the default exchange", f)
	}

	// Deleting removes the bindings to queues: a new exchange of the same
	// name does not route to the queue.
	confirmOne(t, ch, "xd", "k", true, amqp091.Publishing{Body: []byte("before")})
	noReturn(t, returns)
	must(t, ch.ExchangeDelete("xd", false, false))
	chanErr(t, c, 404, "NOT_FOUND - no exchange 'xd' in vhost '/'", func(ch *amqp091.Channel) error {
		return ch.PublishWithContext(context.Background(), "xd", "k", false, false, amqp091.Publishing{Body: []byte("lost")})
	})
	must(t, ch.ExchangeDeclare("xd", "direct", false, false, false, false, nil))
	confirmOne(t, ch, "xd", "k", true, amqp091.Publishing{Body: []byte("after")})
	select {
	case r := <-returns:
		if r.ReplyCode != 312 || r.ReplyText != "NO_ROUTE" || r.Exchange != "xd" || r.RoutingKey != "k" || string(r.Body) != "after" {
			t.Fatalf("return %+v", r)
		}
	default:
		t.Fatal("the redeclared exchange routed through the deleted one's binding")
	}
	if got := drain(t, ch, "xdq"); !slices.Equal(got, []string{"before"}) {
		t.Fatalf("xdq got %v", got)
	}
}

func TestHeadersExchangeXMatch(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c, ch := confirmChannel(t, tb)
	must(t, ch.ExchangeDeclare("h", "headers", false, false, false, false, nil))
	anyX := declareBound(t, ch, "h", amqp091.Table{"x-match": "any-with-x", "x-id": "7", "a": "1"}, "")
	allX := declareBound(t, ch, "h", amqp091.Table{"x-match": "all-with-x", "x-id": "7", "a": "1"}, "")
	all := declareBound(t, ch, "h", amqp091.Table{"x-match": "all", "x-id": "7"}, "") // nothing takes part: all match
	anyQ := declareBound(t, ch, "h", amqp091.Table{"x-match": "any", "x-id": "7", "a": "1"}, "")
	dflt := declareBound(t, ch, "h", amqp091.Table{"a": "1", "x-id": "7"}, "") // all, x-id ignored
	void := declareBound(t, ch, "h", amqp091.Table{"x-match": "all", "p": nil}, "")

	for _, m := range []struct {
		body    string
		headers amqp091.Table
	}{
		{"x-only", amqp091.Table{"x-id": "7"}},
		{"a-only", amqp091.Table{"a": "1"}},
		{"both", amqp091.Table{"a": "1", "x-id": "7"}},
		{"none", nil},
		{"p", amqp091.Table{"p": int32(5)}},
		{"x-int", amqp091.Table{"x-id": int64(7)}}, // a longstr never equals an integer
	} {
		confirmOne(t, ch, "h", "", false, amqp091.Publishing{Headers: m.headers, Body: []byte(m.body)})
	}
	for _, tc := range []struct {
		name, queue string
		want        []string
	}{
		{"any-with-x", anyX, []string{"x-only", "a-only", "both"}},
		{"all-with-x", allX, []string{"both"}},
		{"all with only x- args", all, []string{"x-only", "a-only", "both", "none", "p", "x-int"}},
		{"any ignoring x-", anyQ, []string{"a-only", "both"}},
		{"default all ignoring x-", dflt, []string{"a-only", "both"}},
		{"void matches presence", void, []string{"p"}},
	} {
		if got := drain(t, ch, tc.queue); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}

	// Invalid x-match values are refused at bind time.
	for _, tc := range []struct {
		v    any
		text string
	}{
		{"ALL", `PRECONDITION_FAILED - Invalid x-match field value <<"ALL">>; expected all, any, all-with-x, or any-with-x`},
		{"first", `PRECONDITION_FAILED - Invalid x-match field value <<"first">>; expected all, any, all-with-x, or any-with-x`},
		{int32(1), `PRECONDITION_FAILED - Invalid x-match field type signedint (value 1); expected longstr`},
	} {
		chanErr(t, c, 406, tc.text, func(ch *amqp091.Channel) error {
			return ch.QueueBind(anyX, "", "h", false, amqp091.Table{"x-match": tc.v})
		})
	}
}

func TestTopicPatterns(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := confirmChannel(t, tb)
	must(t, ch.ExchangeDeclare("t", "topic", false, false, false, false, nil))
	type binding struct {
		name string
		keys []string
		want []string
	}
	bindings := []*binding{
		{"#", []string{"#"}, []string{"", "a", "a.b", "a.b.c", "a.b.c.d", "b", "x.b", "x.b.y.z", "a..c", ".", "c"}},
		{"*.b.#", []string{"*.b.#"}, []string{"a.b", "a.b.c", "a.b.c.d", "x.b", "x.b.y.z"}},
		{"a.*.c", []string{"a.*.c"}, []string{"a.b.c", "a..c"}},
		{"a..c", []string{"a..c"}, []string{"a..c"}},
		{"*", []string{"*"}, []string{"a", "b", "c"}},
		{"*.*", []string{"*.*"}, []string{"a.b", "x.b", "."}},
		{"a.b.c", []string{"a.b.c"}, []string{"a.b.c"}},
		{"#.c", []string{"#.c"}, []string{"a.b.c", "a..c", "c"}},
		{"empty", []string{""}, []string{""}},
		// Several bindings of one queue matching one message: one copy.
		{"a.# #.b a.b a.b", []string{"a.#", "#.b", "a.b", "a.b"}, []string{"a", "a.b", "a.b.c", "a.b.c.d", "b", "x.b", "a..c"}},
	}
	queues := make([]string, len(bindings))
	for i, b := range bindings {
		queues[i] = declareBound(t, ch, "t", nil, b.keys...)
	}
	for _, k := range []string{"", "a", "a.b", "a.b.c", "a.b.c.d", "b", "x.b", "x.b.y.z", "a..c", ".", "c"} {
		confirmOne(t, ch, "t", k, false, amqp091.Publishing{Body: []byte(k)})
	}
	for i, b := range bindings {
		if got := drain(t, ch, queues[i]); !slices.Equal(got, b.want) {
			t.Errorf("bound as %s: got %q, want %q", b.name, got, b.want)
		}
	}
}

// TestEmptyQueueNameShortcuts: queue.bind, queue.unbind, basic.get,
// basic.consume, queue.purge and queue.delete with an empty queue name
// use the channel's last declared queue; queue.bind/unbind with an empty
// queue and an empty key also use its name as the key.
func TestEmptyQueueNameShortcuts(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c := tb.dial(t)
	noQueue := "NOT_FOUND - no previously declared queue"
	for _, tc := range []struct {
		name string
		f    func(ch *amqp091.Channel) error
	}{
		{"queue.bind", func(ch *amqp091.Channel) error { return ch.QueueBind("", "k", "amq.direct", false, nil) }},
		{"queue.bind without key", func(ch *amqp091.Channel) error { return ch.QueueBind("", "", "amq.direct", false, nil) }},
		{"queue.unbind", func(ch *amqp091.Channel) error { return ch.QueueUnbind("", "", "amq.direct", nil) }},
		{"basic.get", func(ch *amqp091.Channel) error { _, _, err := ch.Get("", false); return err }},
		{"basic.consume", func(ch *amqp091.Channel) error {
			_, err := ch.Consume("", "", false, false, false, false, nil)
			return err
		}},
		{"queue.purge", func(ch *amqp091.Channel) error { _, err := ch.QueuePurge("", false); return err }},
		{"queue.delete", func(ch *amqp091.Channel) error { _, err := ch.QueueDelete("", false, false, false); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) { chanErr(t, c, 404, noQueue, tc.f) })
	}
	// A passive declare has no shortcut: it looks for the queue ''.
	chanErr(t, c, 404, "NOT_FOUND - no queue '' in vhost '/'", func(ch *amqp091.Channel) error {
		if _, err := ch.QueueDeclare("", false, false, true, false, nil); err != nil {
			return err
		}
		_, err := ch.QueueDeclarePassive("", false, false, true, false, nil)
		return err
	})
	// Another channel's declare does not count.
	chanOK(t, c, func(ch *amqp091.Channel) error {
		_, err := ch.QueueDeclare("elsewhere", false, false, false, false, nil)
		return err
	})
	chanErr(t, c, 404, noQueue, func(ch *amqp091.Channel) error { _, _, err := ch.Get("", false); return err })

	ch := chanOK(t, c, func(ch *amqp091.Channel) error { return ch.Confirm(false) })
	returns := ch.NotifyReturn(make(chan amqp091.Return, 4))
	q, err := ch.QueueDeclare("", false, false, true, false, nil)
	must(t, err)
	must(t, ch.QueueBind("", "", "amq.direct", false, nil)) // key: the queue's name
	must(t, ch.QueueBind("", "explicit", "amq.direct", false, nil))
	confirmOne(t, ch, "amq.direct", q.Name, true, amqp091.Publishing{Body: []byte("by-name")})
	confirmOne(t, ch, "amq.direct", "explicit", true, amqp091.Publishing{Body: []byte("by-key")})
	noReturn(t, returns)
	d, ok, err := ch.Get("", true)
	if err != nil || !ok || string(d.Body) != "by-name" || d.MessageCount != 1 || d.RoutingKey != q.Name {
		t.Fatalf("get: %q count %d key %q ok=%v err=%v", d.Body, d.MessageCount, d.RoutingKey, ok, err)
	}
	if n, err := ch.QueuePurge("", false); err != nil || n != 1 {
		t.Fatalf("purge: %d %v", n, err)
	}
	ds, err := ch.Consume("", "c", true, false, false, false, nil)
	must(t, err)
	confirmOne(t, ch, "amq.direct", "explicit", true, amqp091.Publishing{Body: []byte("consumed")})
	if m := recv(t, ds); string(m.Body) != "consumed" || m.ConsumerTag != "c" {
		t.Fatalf("consumed %q by %q", m.Body, m.ConsumerTag)
	}
	must(t, ch.Cancel("c", false))
	// Unbinding with an empty queue and key removes the name binding.
	must(t, ch.QueueUnbind("", "", "amq.direct", nil))
	confirmOne(t, ch, "amq.direct", q.Name, true, amqp091.Publishing{Body: []byte("unrouted")})
	select {
	case r := <-returns:
		if string(r.Body) != "unrouted" || r.RoutingKey != q.Name {
			t.Fatalf("return %+v", r)
		}
	default:
		t.Fatal("the name binding survived the unbind")
	}
	// A passive declare sets the last queue too.
	if _, err := ch.QueueDeclarePassive("elsewhere", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	confirmOne(t, ch, "", "elsewhere", false, amqp091.Publishing{Body: []byte("e")})
	if n, err := ch.QueueDelete("", false, false, false); err != nil || n != 1 {
		t.Fatalf("delete: %d %v", n, err)
	}
	if queueExists(t, c, "elsewhere") {
		t.Fatal("queue.delete with an empty name did not delete the last declared queue")
	}
	if !queueExists(t, c, q.Name) {
		t.Fatal("the server-named queue went")
	}
}

// TestExclusiveQueueOtherConnection: every use of another connection's
// exclusive queue is 405, the passive declare included.
func TestExclusiveQueueOtherConnection(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := tb.channel(t)
	if _, err := ch.QueueDeclare("mine", false, false, true, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclarePassive("mine", false, false, true, false, nil); err != nil {
		t.Fatalf("owner's passive declare: %v", err)
	}
	other := tb.dial(t)
	locked := "RESOURCE_LOCKED - cannot obtain exclusive access to locked queue 'mine' in vhost '/'. It could be originally declared on another connection or the exclusive property value does not match that of the original declaration."
	for _, tc := range []struct {
		name string
		f    func(ch *amqp091.Channel) error
	}{
		{"passive declare", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclarePassive("mine", false, false, true, false, nil)
			return err
		}},
		{"passive declare, not exclusive", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclarePassive("mine", false, false, false, false, nil)
			return err
		}},
		{"basic.get", func(ch *amqp091.Channel) error { _, _, err := ch.Get("mine", false); return err }},
		{"queue.purge", func(ch *amqp091.Channel) error { _, err := ch.QueuePurge("mine", false); return err }},
		{"queue.bind", func(ch *amqp091.Channel) error { return ch.QueueBind("mine", "k", "amq.direct", false, nil) }},
		{"queue.delete", func(ch *amqp091.Channel) error { _, err := ch.QueueDelete("mine", false, false, false); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) { chanErr(t, other, 405, locked, tc.f) })
	}
	if _, err := ch.QueueDeclarePassive("mine", false, false, true, false, nil); err != nil {
		t.Fatalf("the queue went: %v", err)
	}
}
