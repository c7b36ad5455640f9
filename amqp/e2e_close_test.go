package amqp

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/warren-mq/warren/amqp/wire"
)

// Ensure that after the client's connection.close the server reads what
// the client still had in flight and ends with a clean EOF rather than a
// reset: a client that writes frames after its close (amqplib does) must
// not see EPIPE or ECONNRESET. The client reads close-ok, keeps writing,
// and then reads EOF.
func TestCloseHandshakeDrainsLateFrames(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c := rawDial(t, tb.addr)
	c.open(0)
	c.send(1, &wire.ChannelOpen{})
	c.expect(1, "channel.open-ok")
	// The close, then a megabyte of publishes the server reads after it.
	b := wire.AppendMethodFrame(nil, 0, &wire.ConnectionClose{ReplyCode: 200, ReplyText: "bye"})
	body := bytes.Repeat([]byte("x"), 16<<10)
	for len(b) < 1<<20 {
		b = wire.AppendMethodFrame(b, 1, &wire.BasicPublish{RoutingKey: "nowhere"})
		b = wire.AppendHeaderFrame(b, 1, wire.ClassBasic, uint64(len(body)), []byte{0, 0})
		b = wire.AppendBodyFrames(b, 1, body, 128<<10)
	}
	c.write(b)
	c.expect(0, "connection.close-ok")
	c.write(b[:64<<10]) // still writing: the server must not reset
	buf := make([]byte, 4096)
	for {
		n, err := c.nc.Read(buf)
		if n > 0 {
			t.Fatalf("got %d more bytes after close-ok", n)
		}
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("after close-ok: %v, want a clean EOF", err)
		}
	}
}

// Ensure a server channel.close names the method that failed, model
// refusals included, so that clients match it to the call they await
// (amqplib reports "Operation failed: QueueDeclare; 404 ...").
func TestChannelCloseNamesFailingMethod(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c := rawDial(t, tb.addr)
	c.open(0)
	for i, tc := range []struct {
		m      wire.Method
		code   uint16
		text   string
		class  uint16
		method uint16
	}{
		{&wire.QueueDeclare{Queue: "missing", Passive: true}, 404, "NOT_FOUND - no queue 'missing' in vhost '/'", 50, 10},
		{&wire.ExchangeDeclare{Exchange: "missing", Passive: true}, 404, "NOT_FOUND - no exchange 'missing' in vhost '/'", 40, 10},
		{&wire.BasicConsume{Queue: "missing"}, 404, "NOT_FOUND - no queue 'missing' in vhost '/'", 60, 20},
		{&wire.QueueBind{Queue: "missing", Exchange: "amq.direct"}, 404, "NOT_FOUND - no queue 'missing' in vhost '/'", 50, 20},
		{&wire.QueueDelete{Queue: "missing", IfEmpty: true}, 0, "", 0, 0}, // a missing queue is deleted: no error
	} {
		ch := uint16(i + 1)
		c.send(ch, &wire.ChannelOpen{})
		c.expect(ch, "channel.open-ok")
		c.send(ch, tc.m)
		gotCh, m := c.method()
		if tc.code == 0 {
			if m.MethodName() != "queue.delete-ok" {
				t.Fatalf("%s: got %s", tc.m.MethodName(), m.MethodName())
			}
			continue
		}
		cl, ok := m.(*wire.ChannelClose)
		if !ok || gotCh != ch || cl.ReplyCode != tc.code || cl.ReplyText != tc.text ||
			cl.FailingClassID != tc.class || cl.FailingMethodID != tc.method {
			t.Fatalf("%s: got %s on channel %d %+v, want channel.close %d %q naming %d/%d",
				tc.m.MethodName(), m.MethodName(), gotCh, m, tc.code, tc.text, tc.class, tc.method)
		}
		c.send(ch, &wire.ChannelCloseOk{})
	}
}

// Ensure crossing channel closes (amqp091-go's
// TestChannelExceptionWithCloseIssue43): the server closes a channel for
// an error while the client closes it too. The client's close gets
// close-ok, the server then waits for the close-ok that answers its own
// close, and the connection and its other channels carry on; the
// channel number can be opened again.
func TestCrossingChannelClose(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c := rawDial(t, tb.addr)
	c.open(0)
	for ch := uint16(1); ch <= 2; ch++ {
		c.send(ch, &wire.ChannelOpen{})
		c.expect(ch, "channel.open-ok")
	}
	// A publish to a missing exchange and the client's own close, at once.
	b := wire.AppendMethodFrame(nil, 1, &wire.BasicPublish{Exchange: "nonexisting-exchange"})
	b = wire.AppendHeaderFrame(b, 1, wire.ClassBasic, 0, []byte{0, 0})
	b = wire.AppendMethodFrame(b, 1, &wire.ChannelClose{ReplyCode: 200, ReplyText: "client"})
	c.write(b)
	c.expectClose(1, 404, "NOT_FOUND - no exchange 'nonexisting-exchange' in vhost '/'")
	c.expect(1, "channel.close-ok")
	c.send(1, &wire.ChannelCloseOk{}) // answers the server's close
	c.send(2, &wire.ExchangeDeclare{Exchange: "still-here", Type: "direct", AutoDelete: true})
	c.expect(2, "exchange.declare-ok")
	c.send(1, &wire.ChannelOpen{})
	c.expect(1, "channel.open-ok")
}

// Ensure frames RabbitMQ refuses get its connection errors: a heartbeat
// frame with a payload (501), one on a channel other than 0 (505), and a
// connection.close-ok nobody asked for (504).
func TestConnectionFrameErrors(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	for _, tc := range []struct {
		name   string
		frame  []byte
		code   uint16
		text   string
		class  uint16
		method uint16
	}{
		{"heartbeat with a payload", []byte{wire.FrameHeartbeat, 0, 0, 0, 0, 0, 2, 1, 2, wire.FrameEnd},
			501, "FRAME_ERROR - type 8, all octets = <<1,2>>: unknown_frame", 0, 0},
		{"heartbeat on channel 1", []byte{wire.FrameHeartbeat, 0, 1, 0, 0, 0, 0, wire.FrameEnd},
			505, "UNEXPECTED_FRAME - type 8, all octets = <<>>", 0, 0},
		{"unsolicited close-ok", wire.AppendMethodFrame(nil, 0, &wire.ConnectionCloseOk{}),
			504, "CHANNEL_ERROR - unexpected method in connection state running", 10, 51},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := rawDial(t, tb.addr)
			c.open(0)
			c.write(tc.frame)
			c.expectConnClose(tc.code, tc.text, tc.class, tc.method)
			c.send(0, &wire.ConnectionCloseOk{})
			c.expectEOF()
		})
	}
}

// Ensure a channel deleting a queue its own consumer reads hears
// queue.delete-ok before that consumer's basic.cancel, as from RabbitMQ
// (amqplib's "cancelled consumer" test closes the channel on the cancel
// and fails the delete still waiting for its reply otherwise).
func TestQueueDeleteOkBeforeOwnCancel(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c := rawDial(t, tb.addr)
	c.openWith(wire.Table{"capabilities": wire.Table{"consumer_cancel_notify": true}})
	c.send(1, &wire.ChannelOpen{})
	c.expect(1, "channel.open-ok")
	c.send(1, &wire.QueueDeclare{Queue: "deleted-under-consumer"})
	c.expect(1, "queue.declare-ok")
	c.send(1, &wire.BasicConsume{Queue: "deleted-under-consumer", ConsumerTag: "c1"})
	c.expect(1, "basic.consume-ok")
	c.send(1, &wire.QueueDelete{Queue: "deleted-under-consumer"})
	c.expect(1, "queue.delete-ok")
	if bc := c.expect(1, "basic.cancel").(*wire.BasicCancel); bc.ConsumerTag != "c1" {
		t.Fatalf("basic.cancel of %q, want c1", bc.ConsumerTag)
	}
}
