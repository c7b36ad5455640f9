package amqp

import (
	"context"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warren-mq/warren/queues"
)

// TestTopicPermissions checks topic authorisation as RabbitMQ 4.x does
// it (texts checked against 3.10.8, which lacks the "write "/"read "
// prefix): a publish to a topic exchange needs the user's write topic
// permission to match the routing key (not the CC keys), a queue or
// exchange bind and unbind the read one to match the binding key; ""
// matches the empty key only, {username} and {vhost} are expanded; an
// exchange the user has no topic permission on, and other exchange
// types, are not checked.
func TestTopicPermissions(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	b := tb.broker
	must(t, b.AddUser("u", "pw"))
	must(t, b.SetPermissions("u", "/", queues.Permissions{Configure: ".*", Write: ".*", Read: ".*"}))
	_, g := tb.channel(t)
	must(t, g.ExchangeDeclare("t", "topic", true, false, false, false, nil))
	must(t, g.ExchangeDeclare("free", "topic", true, false, false, false, nil))
	must(t, g.ExchangeDeclare("d", "direct", true, false, false, false, nil))
	if _, err := g.QueueDeclare("q", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	must(t, g.QueueBind("q", "#", "t", false, nil))
	for _, p := range []queues.TopicPermission{
		{User: "u", VHost: "/", Exchange: "t", Write: `^{username}\.`, Read: `^(logs|{vhost})\.`},
		{User: "u", VHost: "/", Exchange: "amq.topic", Write: "", Read: ".*"},
		{User: "u", VHost: "/", Exchange: "d", Write: "^never$", Read: "^never$"},
	} {
		must(t, b.SetTopicPermission(p))
	}
	c := tb.dialAs(t, "u", "pw")
	refused := func(perm, key, x string) string {
		return "ACCESS_REFUSED - " + perm + " access to topic '" + key + "' in exchange '" + x + "' in vhost '/' refused for user 'u'"
	}
	pub := func(exchange, key string, headers amqp091.Table) func(ch *amqp091.Channel) error {
		return func(ch *amqp091.Channel) error {
			return ch.PublishWithContext(context.Background(), exchange, key, false, false, amqp091.Publishing{Headers: headers, Body: []byte("x")})
		}
	}
	for _, tc := range []struct {
		name string
		code int
		text string
		f    func(ch *amqp091.Channel) error
	}{
		{"publish", 403, refused("write", "v.1", "t"), pub("t", "v.1", nil)},
		{"publish with CC keys", 403, refused("write", "v.1", "t"), pub("t", "v.1", amqp091.Table{"CC": []any{"u.1"}})},
		{"publish with an empty write pattern", 403, refused("write", "a", "amq.topic"), pub("amq.topic", "a", nil)},
		{"queue.bind", 403, refused("read", "data.x", "t"), func(ch *amqp091.Channel) error { return ch.QueueBind("q", "data.x", "t", false, nil) }},
		{"queue.unbind", 403, refused("read", "#", "t"), func(ch *amqp091.Channel) error { return ch.QueueUnbind("q", "#", "t", nil) }},
		{"exchange.bind", 403, refused("read", "x", "t"), func(ch *amqp091.Channel) error { return ch.ExchangeBind("free", "x", "t", false, nil) }},
		{"exchange.unbind", 403, refused("read", "x", "t"), func(ch *amqp091.Channel) error { return ch.ExchangeUnbind("free", "x", "t", false, nil) }},
		{"publish to a missing exchange", 404, "NOT_FOUND - no exchange 'gone' in vhost '/'", pub("gone", "k", nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chanErr(t, c, tc.code, tc.text, tc.f)
		})
	}

	// What the topic permissions allow works, on one channel.
	ch := chanOK(t, c, func(ch *amqp091.Channel) error { return ch.Confirm(false) })
	confirmOne(t, ch, "t", "u.1", false, amqp091.Publishing{Body: []byte("mine")})
	confirmOne(t, ch, "t", "u.2", false, amqp091.Publishing{Headers: amqp091.Table{"CC": []any{"v.9"}}, Body: []byte("CC not checked")})
	confirmOne(t, ch, "amq.topic", "", false, amqp091.Publishing{Body: []byte("empty key")})
	confirmOne(t, ch, "free", "any.key", false, amqp091.Publishing{Body: []byte("no topic permission here")})
	confirmOne(t, ch, "d", "any.key", false, amqp091.Publishing{Body: []byte("not a topic exchange")})
	must(t, ch.QueueBind("q", "logs.#", "t", false, nil))
	must(t, ch.QueueBind("q", "/.x", "t", false, nil)) // {vhost}
	must(t, ch.QueueUnbind("q", "logs.#", "t", nil))
	must(t, ch.QueueBind("q", "never-checked", "d", false, nil))
	for _, want := range []string{"mine", "CC not checked"} {
		d, ok, err := ch.Get("q", true)
		if err != nil || !ok || string(d.Body) != want {
			t.Fatalf("get q: %q ok=%v err=%v, want %q", d.Body, ok, err, want)
		}
	}

	// A change of the topic permissions applies to open channels.
	must(t, b.ClearTopicPermissions("u", "/", "t"))
	confirmOne(t, ch, "t", "v.1", false, amqp091.Publishing{Body: []byte("now allowed")})
}
