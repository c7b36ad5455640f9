package definitions

import (
	"errors"
	"net"
	"net/url"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warren-mq/warren/amqp"
	"github.com/warren-mq/warren/queues"
)

// serveAMQP serves AMQP 0-9-1 for b on a free loopback port until the
// end of the test and returns the address.
func serveAMQP(t *testing.T, b *queues.Broker) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := amqp.NewServer(amqp.Config{Broker: b})
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; err != nil && !errors.Is(err, amqp.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// dialAMQP connects as user to vhost; the connection closes at the end
// of the test.
func dialAMQP(t *testing.T, addr, user, password, vhost string) (*amqp091.Connection, error) {
	t.Helper()
	u := url.URL{Scheme: "amqp", User: url.UserPassword(user, password), Host: addr, Path: "/" + url.PathEscape(vhost)}
	c, err := amqp091.DialConfig(u.String(), amqp091.Config{Heartbeat: 10 * time.Second, Locale: "en_US"})
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

// Ensure users imported from RabbitMQ connect with their passwords (a
// SHA-256 and a SHA-512 hash) and use the imported topology.
func TestImportedUsersConnect(t *testing.T) {
	b := openBroker(t)
	importFile(t, b, fixtureHTTP)
	addr := serveAMQP(t, b)

	c, err := dialAMQP(t, addr, "defs-alice", "alice-secret", "defs-a")
	if err != nil {
		t.Fatalf("defs-alice: %v", err)
	}
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	conf, err := ch.PublishWithDeferredConfirm("defs-direct", "k1", false, false, amqp091.Publishing{Body: []byte("through the imported binding")})
	if err != nil {
		t.Fatal(err)
	}
	if !conf.Wait() {
		t.Fatal("publish nacked")
	}
	msg, ok, err := ch.Get("defs-cq", true)
	if err != nil || !ok || string(msg.Body) != "through the imported binding" {
		t.Fatalf("Get(defs-cq) = %q, %v, %v", msg.Body, ok, err)
	}

	if _, err := dialAMQP(t, addr, "defs-bob", "bob-secret", "defs-a"); err != nil {
		t.Errorf("defs-bob (SHA-512): %v", err)
	}
	if _, err := dialAMQP(t, addr, "defs-bob", "wrong", "defs-a"); err == nil {
		t.Error("defs-bob with a wrong password connected")
	}
}
