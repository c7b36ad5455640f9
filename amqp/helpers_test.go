package amqp

import (
	"cmp"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warren-mq/warren/queues"
)

// wait bounds every wait for the broker in these tests.
const wait = 10 * time.Second

// testBroker is a broker with an AMQP server on a free loopback port.
type testBroker struct {
	t      testing.TB
	dir    string
	broker *queues.Broker
	srv    *Server
	addr   string
	done   chan error
}

type brokerOpts struct {
	dir string      // data directory; a new temp dir when empty
	cfg Config      // Broker is filled in
	tls *tls.Config // serve TLS with it (amqps)
	// queues configures the broker.
	queues queues.Options
	// listen is the listening address; 127.0.0.1:0 when empty.
	listen string
}

// startBroker starts a broker; it is stopped at the end of the test.
func startBroker(t testing.TB, o brokerOpts) *testBroker {
	t.Helper()
	if o.dir == "" {
		o.dir = t.TempDir()
	}
	b, err := queues.Open(o.dir, o.queues)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", cmp.Or(o.listen, "127.0.0.1:0"))
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	if o.tls != nil {
		ln = tls.NewListener(ln, o.tls)
	}
	o.cfg.Broker = b
	if o.cfg.SilentCloseDelay == 0 {
		o.cfg.SilentCloseDelay = -1 // refusals answer at once in tests
	}
	if os.Getenv("WARREN_TEST_LOG") != "" {
		o.cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	tb := &testBroker{t: t, dir: o.dir, broker: b, srv: NewServer(o.cfg), addr: ln.Addr().String(), done: make(chan error, 1)}
	go func() { tb.done <- tb.srv.Serve(ln) }()
	t.Cleanup(tb.stop)
	return tb
}

// stop closes the server and the broker (idempotent).
func (tb *testBroker) stop() {
	if tb.srv == nil {
		return
	}
	tb.srv.Close()
	if err := <-tb.done; err != nil && !errors.Is(err, ErrServerClosed) {
		tb.t.Errorf("Serve: %v", err)
	}
	if err := tb.broker.Close(); err != nil {
		tb.t.Errorf("broker close: %v", err)
	}
	tb.srv = nil
}

// restart stops the broker and starts a new one on the same data
// directory (and a new port).
func (tb *testBroker) restart(t *testing.T) *testBroker {
	t.Helper()
	tb.stop()
	return startBroker(t, brokerOpts{dir: tb.dir})
}

func (tb *testBroker) url() string { return "amqp://guest:guest@" + tb.addr + "/" }

// dial opens an amqp091-go connection, closed at the end of the test.
func (tb *testBroker) dial(t *testing.T) *amqp091.Connection {
	t.Helper()
	c, err := amqp091.DialConfig(tb.url(), amqp091.Config{Heartbeat: 10 * time.Second, Locale: "en_US"})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// channel opens a channel on a new connection.
func (tb *testBroker) channel(t *testing.T) (*amqp091.Connection, *amqp091.Channel) {
	t.Helper()
	c := tb.dial(t)
	ch, err := c.Channel()
	if err != nil {
		t.Fatalf("channel: %v", err)
	}
	return c, ch
}

// amqpErr asserts that err is an *amqp091.Error with code and text.
func amqpErr(t *testing.T, err error, code int, text string) {
	t.Helper()
	var e *amqp091.Error
	if !errors.As(err, &e) {
		t.Fatalf("got error %v (%T), want AMQP error %d %q", err, err, code, text)
	}
	if e.Code != code || (text != "" && e.Reason != text) {
		t.Fatalf("got AMQP error %d %q, want %d %q", e.Code, e.Reason, code, text)
	}
}

// closeReason waits for the channel (or connection) close notification.
func closeReason(t *testing.T, c chan *amqp091.Error) *amqp091.Error {
	t.Helper()
	select {
	case e := <-c:
		if e == nil {
			t.Fatal("closed without an error")
		}
		return e
	case <-time.After(wait):
		t.Fatal("no close notification")
	}
	return nil
}

// recv waits for the next delivery.
func recv(t *testing.T, d <-chan amqp091.Delivery) amqp091.Delivery {
	t.Helper()
	select {
	case m, ok := <-d:
		if !ok {
			t.Fatal("delivery channel closed")
		}
		return m
	case <-time.After(wait):
		t.Fatal("no delivery")
	}
	return amqp091.Delivery{}
}

// recvN waits for n deliveries and returns them in order.
func recvN(t *testing.T, d <-chan amqp091.Delivery, n int) []amqp091.Delivery {
	t.Helper()
	out := make([]amqp091.Delivery, 0, n)
	for len(out) < n {
		out = append(out, recv(t, d))
	}
	return out
}

// none asserts that no delivery arrives within a short time.
func none(t *testing.T, d <-chan amqp091.Delivery) {
	t.Helper()
	select {
	case m := <-d:
		t.Fatalf("unexpected delivery %q", m.Body)
	case <-time.After(150 * time.Millisecond):
	}
}

// bodies returns the deliveries' bodies as strings.
func bodies(ds []amqp091.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = string(d.Body)
	}
	return out
}
