package amqp

import (
	"context"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warren-mq/warren/queues"
)

// TestPermissions checks each operation against the permission RabbitMQ
// requires, with its 403 text: configure for declares and deletes,
// write on the exchange to publish, read on the queue to consume, get
// and purge, write on the destination and read on the source to bind.
func TestPermissions(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	must(t, tb.broker.AddUser("u", "pw"))
	must(t, tb.broker.SetPermissions("u", "/", queues.Permissions{Configure: "^c-", Write: "^w-", Read: "^r-"}))
	_, g := tb.channel(t)
	for _, q := range []string{"q", "c-q", "w-q", "r-q"} {
		if _, err := g.QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, x := range []string{"x", "r-x", "w-x"} {
		must(t, g.ExchangeDeclare(x, "direct", true, false, false, false, nil))
	}
	c := tb.dialAs(t, "u", "pw")
	refused := func(perm, kind, name string) string {
		return "ACCESS_REFUSED - " + perm + " access to " + kind + " '" + name + "' in vhost '/' refused for user 'u'"
	}
	pub := func(exchange string) func(ch *amqp091.Channel) error {
		return func(ch *amqp091.Channel) error {
			return ch.PublishWithContext(context.Background(), exchange, "k", false, false, amqp091.Publishing{Body: []byte("x")})
		}
	}
	for _, tc := range []struct {
		name string
		text string
		f    func(ch *amqp091.Channel) error
	}{
		{"queue.declare", refused("configure", "queue", "q"), func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclare("q", true, false, false, false, nil)
			return err
		}},
		{"queue.declare of an existing queue", refused("configure", "queue", "r-q"), func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclare("r-q", true, false, false, false, nil)
			return err
		}},
		{"queue.delete", refused("configure", "queue", "r-q"), func(ch *amqp091.Channel) error {
			_, err := ch.QueueDelete("r-q", false, false, false)
			return err
		}},
		{"exchange.declare", refused("configure", "exchange", "x"), func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("x", "direct", true, false, false, false, nil)
		}},
		{"exchange.delete", refused("configure", "exchange", "w-x"), func(ch *amqp091.Channel) error {
			return ch.ExchangeDelete("w-x", false, false)
		}},
		{"basic.publish", refused("write", "exchange", "r-x"), pub("r-x")},
		{"basic.publish to the default exchange", refused("write", "exchange", "amq.default"), pub("")},
		{"basic.consume", refused("read", "queue", "w-q"), func(ch *amqp091.Channel) error {
			_, err := ch.Consume("w-q", "", false, false, false, false, nil)
			return err
		}},
		{"basic.get", refused("read", "queue", "w-q"), func(ch *amqp091.Channel) error {
			_, _, err := ch.Get("w-q", false)
			return err
		}},
		{"queue.purge", refused("read", "queue", "c-q"), func(ch *amqp091.Channel) error {
			_, err := ch.QueuePurge("c-q", false)
			return err
		}},
		{"queue.bind without write on the queue", refused("write", "queue", "r-q"), func(ch *amqp091.Channel) error {
			return ch.QueueBind("r-q", "k", "r-x", false, nil)
		}},
		{"queue.bind without read on the exchange", refused("read", "exchange", "w-x"), func(ch *amqp091.Channel) error {
			return ch.QueueBind("w-q", "k", "w-x", false, nil)
		}},
		{"queue.unbind without write on the queue", refused("write", "queue", "r-q"), func(ch *amqp091.Channel) error {
			return ch.QueueUnbind("r-q", "k", "r-x", nil)
		}},
		{"exchange.bind without write on the destination", refused("write", "exchange", "r-x"), func(ch *amqp091.Channel) error {
			return ch.ExchangeBind("r-x", "k", "r-x", false, nil)
		}},
		{"exchange.bind without read on the source", refused("read", "exchange", "w-x"), func(ch *amqp091.Channel) error {
			return ch.ExchangeBind("w-x", "k", "w-x", false, nil)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chanErr(t, c, 403, tc.text, tc.f)
		})
	}

	// What the permissions allow works, on one channel.
	ch := chanOK(t, c, func(ch *amqp091.Channel) error { return ch.Confirm(false) })
	if _, err := ch.QueueDeclare("c-q", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	must(t, ch.ExchangeDeclare("c-x", "fanout", false, false, false, false, nil))
	must(t, ch.QueueBind("w-q", "k", "r-x", false, nil))
	must(t, ch.ExchangeBind("w-x", "k", "r-x", false, nil))
	must(t, g.QueueBind("r-q", "k", "w-x", false, nil)) // guest may
	confirmOne(t, ch, "w-x", "k", false, amqp091.Publishing{Body: []byte("via w-x")})
	d, ok, err := ch.Get("r-q", false)
	if err != nil || !ok || string(d.Body) != "via w-x" || d.Exchange != "w-x" {
		t.Fatalf("get r-q: %q ok=%v err=%v", d.Body, ok, err)
	}
	must(t, d.Ack(false))
	ds, err := ch.Consume("r-q", "c", false, false, false, false, nil)
	must(t, err)
	confirmOne(t, ch, "w-x", "k", false, amqp091.Publishing{Body: []byte("consumed")})
	if m := recv(t, ds); string(m.Body) != "consumed" {
		t.Fatalf("consumed %q", m.Body)
	}
	if n, err := ch.QueuePurge("r-q", false); err != nil || n != 0 {
		t.Fatalf("purge r-q: %d %v", n, err)
	}
	must(t, ch.ExchangeDelete("c-x", false, false))
	if _, err := ch.QueueDelete("c-q", false, false, false); err != nil {
		t.Fatal(err)
	}
}

// TestPermissionsVHostAccess: a user without permissions in the vhost
// is refused at connection.open (530); empty permissions grant access to
// the vhost but to no resource.
func TestPermissionsVHostAccess(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	must(t, tb.broker.AddUser("nobody", "pw"))
	_, err := amqp091.Dial("amqp://nobody:pw@" + tb.addr + "/")
	amqpErr(t, err, 530, "NOT_ALLOWED - access to vhost '/' refused for user 'nobody'")

	// Empty expressions match nothing but still grant vhost access.
	must(t, tb.broker.SetPermissions("nobody", "/", queues.Permissions{}))
	c := tb.dialAs(t, "nobody", "pw")
	chanErr(t, c, 403, "ACCESS_REFUSED - configure access to queue 'q' in vhost '/' refused for user 'nobody'", func(ch *amqp091.Channel) error {
		_, err := ch.QueueDeclare("q", false, false, false, false, nil)
		return err
	})
	// Only guest is restricted to loopback: a new user is not (the test
	// connects over loopback, so this checks that the login works).
	must(t, tb.broker.AddUser("remote", "pw"))
	must(t, tb.broker.SetPermissions("remote", "/", queues.Permissions{Configure: ".*", Write: ".*", Read: ".*"}))
	tb.dialAs(t, "remote", "pw")
}

// TestPassiveDeclarePermissions: a passive declare needs any permission
// on the resource, not configure (rabbitmq-server#16085); with none it is
// refused with the configure text, as a declare would be.
func TestPassiveDeclarePermissions(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	must(t, tb.broker.AddUser("u", "pw"))
	must(t, tb.broker.SetPermissions("u", "/", queues.Permissions{Configure: "^$", Write: "^w-", Read: "^r-"}))
	_, g := confirmChannel(t, tb)
	for _, q := range []string{"r-q", "w-q", "none"} {
		if _, err := g.QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	publishConfirmed(t, g, "", "r-q", true, "a", "b")
	for _, x := range []string{"r-x", "w-x", "nox"} {
		must(t, g.ExchangeDeclare(x, "topic", true, false, false, false, nil))
	}
	c := tb.dialAs(t, "u", "pw")
	ch := chanOK(t, c, func(*amqp091.Channel) error { return nil })
	q, err := ch.QueueDeclarePassive("r-q", true, false, false, false, nil)
	if err != nil || q.Name != "r-q" || q.Messages != 2 || q.Consumers != 0 {
		t.Fatalf("passive r-q: %+v %v", q, err)
	}
	if _, err := ch.QueueDeclarePassive("w-q", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	must(t, ch.ExchangeDeclarePassive("r-x", "topic", true, false, false, false, nil))
	must(t, ch.ExchangeDeclarePassive("w-x", "topic", true, false, false, false, nil))
	// Existence is checked after the permission: a missing queue the
	// user may read is 404.
	chanErr(t, c, 404, "NOT_FOUND - no queue 'r-missing' in vhost '/'", func(ch *amqp091.Channel) error {
		_, err := ch.QueueDeclarePassive("r-missing", true, false, false, false, nil)
		return err
	})
	chanErr(t, c, 403, "ACCESS_REFUSED - configure access to queue 'none' in vhost '/' refused for user 'u'", func(ch *amqp091.Channel) error {
		_, err := ch.QueueDeclarePassive("none", true, false, false, false, nil)
		return err
	})
	chanErr(t, c, 403, "ACCESS_REFUSED - configure access to exchange 'nox' in vhost '/' refused for user 'u'", func(ch *amqp091.Channel) error {
		return ch.ExchangeDeclarePassive("nox", "topic", true, false, false, false, nil)
	})
}
