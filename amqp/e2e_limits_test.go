package amqp

import (
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warren-mq/warren/amqp/wire"
	"github.com/warren-mq/warren/queues"
)

// Tests of the limits RabbitMQ enforces (issue 18), each with its code
// and text as rabbit_reader, rabbit_channel and rabbit_queue_type word
// them.

// setVHostLimits and setUserLimits set limits as the management API does.
func setVHostLimits(t *testing.T, b *queues.Broker, vhost string, limits map[string]int64) {
	t.Helper()
	v, err := b.GetVHost(vhost)
	if err != nil {
		t.Fatal(err)
	}
	v.Limits = limits
	if _, err := b.PutVHost(v); err != nil {
		t.Fatal(err)
	}
}

func setUserLimits(t *testing.T, b *queues.Broker, user string, limits map[string]int64) {
	t.Helper()
	u, err := b.GetUser(user)
	if err != nil {
		t.Fatal(err)
	}
	u.Limits = limits
	if err := b.PutUser(u); err != nil {
		t.Fatal(err)
	}
}

// Ensure the default max_message_size is RabbitMQ 4.x's 16 MiB: a body
// of 16 MiB is accepted, one byte more closes the channel with 406.
func TestLimitMaxMessageSizeDefault(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := tb.channel(t)
	if _, err := ch.QueueDeclare("big", false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	publish(t, ch, "", "big", amqp091.Publishing{Body: make([]byte, 16<<20)})
	if _, err := ch.QueueDeclarePassive("big", false, true, false, false, nil); err != nil {
		t.Fatalf("after a 16 MiB publish: %v", err)
	}
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	publish(t, ch, "", "big", amqp091.Publishing{Body: make([]byte, 16<<20+1)})
	e := closeReason(t, closed)
	if e.Code != 406 || e.Reason != "PRECONDITION_FAILED - message size 16777217 is larger than configured max size 16777216" {
		t.Fatalf("got %d %q", e.Code, e.Reason)
	}
}

// Ensure a content header declaring more than 512 MiB (RabbitMQ's
// ?MAX_MSG_SIZE) is a connection frame error, as
// rabbit_command_assembler answers, before any body is sent.
func TestLimitBodySizeAboveAbsoluteMax(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c := rawDial(t, tb.addr)
	c.open(0)
	c.send(1, &wire.ChannelOpen{})
	c.method()
	c.send(1, &wire.BasicPublish{RoutingKey: "q"})
	c.write(wire.AppendHeaderFrame(nil, 1, wire.ClassBasic, 512<<20+1, []byte{0, 0}))
	c.expectClose(0, 501, "FRAME_ERROR - content body size 536870913 exceeds maximum allowed size 536870912")
}

// Ensure a vhost's max-connections refuses the connection.open over it
// with 530 and rabbit_reader's text, counts only open connections, and
// that 0 refuses every connection.
func TestLimitVHostMaxConnections(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	setVHostLimits(t, tb.broker, "/", map[string]int64{queues.LimitMaxConnections: 1})
	first := tb.dial(t)
	_, err := amqp091.Dial(tb.url())
	amqpErr(t, err, 530, "NOT_ALLOWED - access to vhost '/' refused for user 'guest': connection limit (1) is reached")
	first.Close()
	waitFor(t, func() bool { return len(tb.broker.Conns()) == 0 })
	tb.dial(t).Close()
	setVHostLimits(t, tb.broker, "/", map[string]int64{queues.LimitMaxConnections: 0})
	waitFor(t, func() bool { return len(tb.broker.Conns()) == 0 })
	_, err = amqp091.Dial(tb.url())
	amqpErr(t, err, 530, "NOT_ALLOWED - access to vhost '/' refused for user 'guest': connection limit (0) is reached")
	setVHostLimits(t, tb.broker, "/", map[string]int64{queues.LimitMaxConnections: -1}) // negative: no limit
	tb.dial(t)
	tb.dial(t)
}

// Ensure a vhost's max-queues refuses new queues and streams (406,
// rabbit_queue_type's text) but not redeclares, and counts deletions.
func TestLimitVHostMaxQueues(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	setVHostLimits(t, tb.broker, "/", map[string]int64{queues.LimitMaxQueues: 2})
	conn, ch := tb.channel(t)
	for _, q := range []string{"q1", "q2", "q1"} {
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatalf("declare %s: %v", q, err)
		}
	}
	_, err := ch.QueueDeclare("q3", true, false, false, false, nil)
	amqpErr(t, err, 406, "PRECONDITION_FAILED - cannot declare queue 'q3': queue limit in vhost '/' (2) is reached")
	ch, _ = conn.Channel()
	_, err = ch.QueueDeclare("s3", true, false, false, false, amqp091.Table{"x-queue-type": "stream"})
	amqpErr(t, err, 406, "PRECONDITION_FAILED - cannot declare queue 's3': queue limit in vhost '/' (2) is reached")
	ch, _ = conn.Channel()
	_, err = ch.QueueDeclare("", false, true, true, false, nil)
	amqpErr(t, err, 406, "")
	ch, _ = conn.Channel()
	if _, err := ch.QueueDelete("q1", false, false, false); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("s3", true, false, false, false, amqp091.Table{"x-queue-type": "stream"}); err != nil {
		t.Fatalf("after a delete: %v", err)
	}
}

// Ensure a user's max-connections refuses its connections over it in
// any vhost (530, rabbit_reader's text).
func TestLimitUserMaxConnections(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	setUserLimits(t, tb.broker, "guest", map[string]int64{queues.LimitMaxConnections: 2})
	tb.dial(t)
	tb.dial(t)
	_, err := amqp091.Dial(tb.url())
	amqpErr(t, err, 530, "NOT_ALLOWED - connection refused for user 'guest': user connection limit (2) is reached")
}

// Ensure a user's max-channels counts the channels of all its
// connections and refuses the one over it by closing that connection
// (530, rabbit_reader's text); a closed channel frees its place.
func TestLimitUserMaxChannels(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	setUserLimits(t, tb.broker, "guest", map[string]int64{queues.LimitMaxChannels: 2})
	c1, ch1 := tb.channel(t)
	c2, _ := tb.channel(t)
	closed := c2.NotifyClose(make(chan *amqp091.Error, 1))
	_, err := c2.Channel()
	if err == nil {
		t.Fatal("third channel opened")
	}
	e := closeReason(t, closed)
	if e.Code != 530 || e.Reason != "NOT_ALLOWED - number of channels opened for user 'guest' has reached the maximum allowed user limit of 2" {
		t.Fatalf("got %d %q", e.Code, e.Reason)
	}
	if err := ch1.Close(); err != nil {
		t.Fatal(err)
	}
	// c2's channel goes with c2, once the broker has finished closing it
	// (after the client saw the close): then two places are free.
	deadline := time.Now().Add(wait)
	for len(tb.broker.Conns()) > 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	for i := 0; i < 2; i++ {
		if _, err := c1.Channel(); err != nil {
			t.Fatalf("channel %d after the close: %v", i, err)
		}
	}
}

// Ensure consumer_max_per_channel refuses the consumer over it with 530
// and rabbit_channel's text; other channels have their own count.
func TestLimitConsumerMaxPerChannel(t *testing.T) {
	tb := startBroker(t, brokerOpts{cfg: Config{ConsumerMaxPerChannel: 2}})
	conn, ch := tb.channel(t)
	if _, err := ch.QueueDeclare("q", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"a", "b"} {
		if _, err := ch.Consume("q", tag, false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	other, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Consume("q", "c", false, false, false, false, nil); err != nil {
		t.Fatalf("another channel: %v", err)
	}
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	_, err = ch.Consume("q", "d", false, false, false, false, nil)
	amqpErr(t, err, 530, "NOT_ALLOWED - reached maximum (2) of consumers per channel")
	closeReason(t, closed)
}

// Ensure the handshake timeout closes a socket that sends nothing, or
// stops halfway (after the protocol header, after start-ok), without a
// reply, as RabbitMQ's handshake_timeout does.
func TestLimitHandshakeTimeout(t *testing.T) {
	tb := startBroker(t, brokerOpts{cfg: Config{HandshakeTimeout: 200 * time.Millisecond}})
	steps := map[string]func(c *rawClient){
		"nothing":       func(c *rawClient) {},
		"half header":   func(c *rawClient) { c.write([]byte("AMQP")) },
		"header":        func(c *rawClient) { c.write(wire.ProtocolHeader[:]); c.method() },
		"half start-ok": func(c *rawClient) { c.write(wire.ProtocolHeader[:]); c.method(); c.write([]byte{1, 0, 0, 0, 0, 1, 0}) },
		"until tune-ok": func(c *rawClient) { c.write(wire.ProtocolHeader[:]); c.method(); c.send(0, guestStartOk()); c.method() },
		"tune-ok no open": func(c *rawClient) {
			c.write(wire.ProtocolHeader[:])
			c.method()
			c.send(0, guestStartOk())
			c.method()
			c.send(0, &wire.ConnectionTuneOk{ChannelMax: 10, FrameMax: 131072})
		},
	}
	for name, step := range steps {
		t.Run(name, func(t *testing.T) {
			c := rawDial(t, tb.addr)
			start := time.Now()
			step(c)
			c.expectEOF()
			if d := time.Since(start); d < 150*time.Millisecond || d > 5*time.Second {
				t.Fatalf("closed after %v, want about 200ms", d)
			}
		})
	}
}

func guestStartOk() *wire.ConnectionStartOk {
	return &wire.ConnectionStartOk{ClientProperties: wire.Table{}, Mechanism: "PLAIN", Response: "\x00guest\x00guest", Locale: "en_US"}
}

// Ensure a refused login is answered at once (authentication_failure_close)
// but the socket is held for the silent-close delay unless the client
// closes it, and that a malformed handshake is dropped silently after
// the delay, as rabbit_reader does (3 s by default).
func TestLimitAuthFailureDelay(t *testing.T) {
	const delay = 300 * time.Millisecond
	tb := startBroker(t, brokerOpts{cfg: Config{SilentCloseDelay: delay}})
	c := rawDial(t, tb.addr)
	c.write(wire.ProtocolHeader[:])
	c.method()
	start := time.Now()
	c.send(0, &wire.ConnectionStartOk{
		ClientProperties: wire.Table{"capabilities": wire.Table{"authentication_failure_close": true}},
		Mechanism:        "PLAIN", Response: "\x00guest\x00wrong", Locale: "en_US",
	})
	c.expectClose(0, 403, "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN. For details see the broker logfile.")
	if d := time.Since(start); d > delay {
		t.Fatalf("refusal after %v, want at once", d)
	}
	c.expectEOF()
	if d := time.Since(start); d < delay-50*time.Millisecond {
		t.Fatalf("socket closed after %v, want the %v delay", d, delay)
	}

	c = rawDial(t, tb.addr)
	c.write(wire.ProtocolHeader[:])
	c.method()
	start = time.Now()
	c.send(0, &wire.ConnectionTuneOk{ChannelMax: 1, FrameMax: 131072}) // not start-ok
	c.expectEOF()
	if d := time.Since(start); d < delay-50*time.Millisecond {
		t.Fatalf("socket closed after %v, want the %v delay", d, delay)
	}
	tb.dial(t) // healthy
}

// Ensure frames before tune-ok are limited to RabbitMQ's initial
// frame_max (8192 bytes): a larger one drops the connection silently.
func TestLimitPreTuneFrameMax(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c := rawDial(t, tb.addr)
	c.write(wire.ProtocolHeader[:])
	c.method()
	big := &wire.ConnectionStartOk{ClientProperties: wire.Table{"x": string(make([]byte, 9000))}, Mechanism: "PLAIN", Response: "\x00guest\x00guest", Locale: "en_US"}
	c.send(0, big)
	c.expectEOF()
	tb.dial(t)
}

// waitFor polls cond until it holds or wait passes.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Ensure max_message_size applies to publishes into a stream too (the
// message would be stored AMQP 1.0 encoded): the channel check comes
// before routing, as rabbit_channel's does.
func TestLimitMaxMessageSizeStreamQueue(t *testing.T) {
	tb := startBroker(t, brokerOpts{cfg: Config{MaxMessageSize: 1000}})
	_, ch := tb.channel(t)
	if _, err := ch.QueueDeclare("s", true, false, false, false, amqp091.Table{"x-queue-type": "stream"}); err != nil {
		t.Fatal(err)
	}
	publish(t, ch, "", "s", amqp091.Publishing{Body: make([]byte, 1000)})
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	publish(t, ch, "", "s", amqp091.Publishing{Body: make([]byte, 1001)})
	e := closeReason(t, closed)
	if e.Code != 406 || e.Reason != "PRECONDITION_FAILED - message size 1001 is larger than configured max size 1000" {
		t.Fatalf("got %d %q", e.Code, e.Reason)
	}
}

// Ensure InitialFrameMax (initial_frame_max) moves the pre-tune limit.
func TestLimitPreTuneFrameMaxConfigured(t *testing.T) {
	tb := startBroker(t, brokerOpts{cfg: Config{InitialFrameMax: 16384}})
	c := rawDial(t, tb.addr)
	c.write(wire.ProtocolHeader[:])
	c.method()
	c.send(0, &wire.ConnectionStartOk{ClientProperties: wire.Table{"x": string(make([]byte, 9000))}, Mechanism: "PLAIN", Response: "\x00guest\x00guest", Locale: "en_US"})
	if _, m := c.method(); m.MethodName() != "connection.tune" {
		t.Fatalf("got %s, want connection.tune", m.MethodName())
	}
}
