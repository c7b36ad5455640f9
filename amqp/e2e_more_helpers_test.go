package amqp

import (
	"context"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warren-mq/warren/amqp/wire"
)

// must fails the test on err.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// dialAs opens an amqp091-go connection as user, closed at the end of
// the test.
func (tb *testBroker) dialAs(t *testing.T, user, pass string) *amqp091.Connection {
	t.Helper()
	c, err := amqp091.DialConfig("amqp://"+user+":"+pass+"@"+tb.addr+"/", amqp091.Config{Heartbeat: 10 * time.Second, Locale: "en_US"})
	if err != nil {
		t.Fatalf("dial as %s: %v", user, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// chanErr runs f on a new channel of c and checks that the channel ends
// with code and text: f's own error for synchronous methods, else the
// channel.close that follows (publish, ack). A hard error closes the
// connection instead; that works too, the channel hears of it.
func chanErr(t *testing.T, c *amqp091.Connection, code int, text string, f func(ch *amqp091.Channel) error) {
	t.Helper()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	if err := f(ch); err != nil {
		amqpErr(t, err, code, text)
		return
	}
	amqpErr(t, closeReason(t, closed), code, text)
}

// chanOK runs f on a new channel of c and fails the test on its error.
func chanOK(t *testing.T, c *amqp091.Connection, f func(ch *amqp091.Channel) error) *amqp091.Channel {
	t.Helper()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := f(ch); err != nil {
		t.Fatal(err)
	}
	return ch
}

// confirmOne publishes one message on a confirm channel and waits for
// its ack.
func confirmOne(t *testing.T, ch *amqp091.Channel, exchange, key string, mandatory bool, p amqp091.Publishing) {
	t.Helper()
	dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), exchange, key, mandatory, false, p)
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if ok, err := dc.WaitContext(ctx); !ok || err != nil {
		t.Fatalf("confirm: ok=%v err=%v", ok, err)
	}
}

// rawChannel opens channel id on a raw client.
func (c *rawClient) openChannel(id uint16) {
	c.t.Helper()
	c.send(id, &wire.ChannelOpen{})
	if ch, m := c.method(); ch != id || m.MethodName() != "channel.open-ok" {
		c.t.Fatalf("got %s on %d, want channel.open-ok on %d", m.MethodName(), ch, id)
	}
}

// expect reads the next method and checks its channel and name.
func (c *rawClient) expect(id uint16, name string) wire.Method {
	c.t.Helper()
	ch, m := c.method()
	if ch != id || m.MethodName() != name {
		c.t.Fatalf("got %s on channel %d, want %s on %d", m.MethodName(), ch, name, id)
	}
	return m
}

// publishRaw sends basic.publish with empty properties and body, split
// into body frames of at most frameMax bytes.
func (c *rawClient) publishRaw(id uint16, exchange, key string, body []byte, frameMax uint32) {
	c.t.Helper()
	b := wire.AppendMethodFrame(nil, id, &wire.BasicPublish{Exchange: exchange, RoutingKey: key})
	b = wire.AppendHeaderFrame(b, id, wire.ClassBasic, uint64(len(body)), []byte{0, 0})
	b = wire.AppendBodyFrames(b, id, body, frameMax)
	c.write(b)
}

// openWith is open(0) announcing client properties.
func (c *rawClient) openWith(props wire.Table) {
	c.t.Helper()
	c.write(wire.ProtocolHeader[:])
	c.expect(0, "connection.start")
	c.send(0, &wire.ConnectionStartOk{ClientProperties: props, Mechanism: "PLAIN", Response: "\x00guest\x00guest", Locale: "en_US"})
	tune := c.expect(0, "connection.tune").(*wire.ConnectionTune)
	c.send(0, &wire.ConnectionTuneOk{ChannelMax: tune.ChannelMax, FrameMax: tune.FrameMax})
	c.send(0, &wire.ConnectionOpen{VirtualHost: "/"})
	c.expect(0, "connection.open-ok")
}

// expectConnClose reads a connection.close and checks all its fields.
func (c *rawClient) expectConnClose(code uint16, text string, classID, methodID uint16) {
	c.t.Helper()
	m := c.expect(0, "connection.close").(*wire.ConnectionClose)
	if m.ReplyCode != code || m.ReplyText != text || m.FailingClassID != classID || m.FailingMethodID != methodID {
		c.t.Fatalf("got close %d %q (%d/%d), want %d %q (%d/%d)", m.ReplyCode, m.ReplyText, m.FailingClassID, m.FailingMethodID, code, text, classID, methodID)
	}
}
