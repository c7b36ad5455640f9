package amqp

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warren-mq/warren/amqp/wire"
)

func TestConnectionStartAndTune(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c := tb.dial(t)
	if c.Major != 0 || c.Minor != 9 {
		t.Fatalf("version %d-%d, want 0-9", c.Major, c.Minor)
	}
	if got := c.Properties["product"]; got != "Warren" {
		t.Fatalf("product %v", got)
	}
	caps, ok := c.Properties["capabilities"].(amqp091.Table)
	if !ok {
		t.Fatalf("capabilities %T", c.Properties["capabilities"])
	}
	for _, k := range []string{"publisher_confirms", "exchange_exchange_bindings", "basic.nack", "consumer_cancel_notify",
		"connection.blocked", "consumer_priorities", "authentication_failure_close", "per_consumer_qos", "direct_reply_to"} {
		if caps[k] != true {
			t.Errorf("capability %s = %v", k, caps[k])
		}
	}
	if c.Config.ChannelMax != 2047 || c.Config.FrameSize != 131072 || c.Config.Heartbeat != 10*time.Second {
		t.Fatalf("negotiated channel_max %d frame_max %d heartbeat %v", c.Config.ChannelMax, c.Config.FrameSize, c.Config.Heartbeat)
	}
}

func TestConnectionStartFitsPreTuneLimit(t *testing.T) {
	// amqp091-go refuses frames over 4088 bytes before tune.
	b := wire.AppendMethodFrame(nil, 0, &wire.ConnectionStart{VersionMajor: 0, VersionMinor: 9, ServerProperties: serverProperties(), Mechanisms: "PLAIN AMQPLAIN", Locales: "en_US"})
	if len(b) > 4096 {
		t.Fatalf("connection.start frame is %d bytes", len(b))
	}
}

func TestProtocolHeaderMismatch(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	for _, hdr := range []string{"AMQP\x00\x00\x08\x00", "AMQP\x01\x01\x00\x0a", "GET / HTTP/1.1\r\n\r\n", "AMQP\x03\x01\x00\x00"} {
		c := rawDial(t, tb.addr)
		c.write([]byte(hdr))
		got := make([]byte, 8)
		if _, err := io.ReadFull(c.nc, got); err != nil {
			t.Fatalf("%q: read: %v", hdr, err)
		}
		if string(got) != "AMQP\x00\x00\x09\x01" {
			t.Fatalf("%q: got %q", hdr, got)
		}
		if n, err := c.nc.Read(got); err == nil {
			t.Fatalf("%q: more bytes after the header: %q", hdr, got[:n])
		}
	}
}

func TestBadCredentials(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, err := amqp091.Dial("amqp://guest:wrong@" + tb.addr + "/")
	if !errors.Is(err, amqp091.ErrCredentials) {
		t.Fatalf("got %v, want ErrCredentials", err)
	}
	// A client announcing authentication_failure_close hears why.
	c := rawDial(t, tb.addr)
	c.write(wire.ProtocolHeader[:])
	c.method()
	c.send(0, &wire.ConnectionStartOk{
		ClientProperties: wire.Table{"capabilities": wire.Table{"authentication_failure_close": true}},
		Mechanism:        "PLAIN", Response: "\x00guest\x00wrong", Locale: "en_US",
	})
	c.expectClose(0, 403, "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN. For details see the broker logfile.")
	c.expectEOF()
}

func TestUnknownMechanism(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c := rawDial(t, tb.addr)
	c.write(wire.ProtocolHeader[:])
	_, m := c.method()
	if got := m.(*wire.ConnectionStart).Mechanisms; got != "PLAIN AMQPLAIN ANONYMOUS" {
		t.Fatalf("mechanisms %q", got)
	}
	c.send(0, &wire.ConnectionStartOk{ClientProperties: wire.Table{}, Mechanism: "EXTERNAL", Response: "", Locale: "en_US"})
	// rabbit_reader fails the handshake silently (command_invalid in its
	// starting state): no connection.close, the socket closed.
	c.expectEOF()
}

func TestAMQPLAIN(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c, err := amqp091.DialConfig("amqp://"+tb.addr+"/", amqp091.Config{
		SASL: []amqp091.Authentication{&amqp091.AMQPlainAuth{Username: "guest", Password: "guest"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	ch.Close()
}

func TestVHostRefused(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, err := amqp091.Dial("amqp://guest:guest@" + tb.addr + "/nope")
	amqpErr(t, err, 530, "NOT_ALLOWED - vhost nope not found")
}

func TestTuneOkAboveServerValues(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	for _, tc := range []struct {
		channelMax uint16
		frameMax   uint32
		text       string
	}{
		{0, 131072, "NOT_ALLOWED - negotiated channel_max = 0 (no limit) is higher than the maximum allowed value (2047)"},
		{10, 0, "NOT_ALLOWED - negotiated frame_max = 0 (no limit) is higher than the maximum allowed value (131072)"},
		{10, 4096, "NOT_ALLOWED - negotiated frame_max = 4096 is lower than the minimum allowed value (8192)"},
	} {
		c := rawDial(t, tb.addr)
		c.write(wire.ProtocolHeader[:])
		c.method()
		c.send(0, &wire.ConnectionStartOk{ClientProperties: wire.Table{}, Mechanism: "PLAIN", Response: "\x00guest\x00guest", Locale: "en_US"})
		c.method()
		c.send(0, &wire.ConnectionTuneOk{ChannelMax: tc.channelMax, FrameMax: tc.frameMax})
		c.expectClose(0, 530, tc.text)
	}
}

func TestHeartbeats(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c := rawDial(t, tb.addr)
	c.open(1)
	// The server sends heartbeats while idle...
	start := time.Now()
	f, err := c.fr.ReadFrame(1 << 20)
	if err != nil || f.Type != wire.FrameHeartbeat || f.Channel != 0 {
		t.Fatalf("got frame %+v, %v; want a heartbeat", f, err)
	}
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Fatalf("first heartbeat after %v", d)
	}
	// ...and drops a client that stays silent for two intervals.
	c.expectEOF()
	if d := time.Since(start); d < 1500*time.Millisecond || d > 5*time.Second {
		t.Fatalf("silent client dropped after %v, want about 2s", d)
	}
}

func TestFrameErrors(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	t.Run("too large", func(t *testing.T) {
		c := rawDial(t, tb.addr)
		c.open(0)
		big := make([]byte, 131073)
		c.write(wire.AppendBodyFrames(nil, 1, big, 200000))
		c.expectClose(0, 501, "")
	})
	t.Run("bad frame end", func(t *testing.T) {
		c := rawDial(t, tb.addr)
		c.open(0)
		b := wire.AppendMethodFrame(nil, 1, &wire.ChannelOpen{})
		b[len(b)-1] = 0
		c.write(b)
		c.expectClose(0, 501, "")
	})
	t.Run("method before channel.open", func(t *testing.T) {
		c := rawDial(t, tb.addr)
		c.open(0)
		c.send(1, &wire.BasicQos{PrefetchCount: 1})
		c.expectClose(0, 504, "CHANNEL_ERROR - expected 'channel.open'")
	})
	t.Run("second channel.open", func(t *testing.T) {
		c := rawDial(t, tb.addr)
		c.open(0)
		c.send(1, &wire.ChannelOpen{})
		c.method()
		c.send(1, &wire.ChannelOpen{})
		c.expectClose(0, 504, "CHANNEL_ERROR - second 'channel.open' seen")
	})
	t.Run("heartbeat on a channel", func(t *testing.T) {
		c := rawDial(t, tb.addr)
		c.open(0)
		c.write([]byte{wire.FrameHeartbeat, 0, 1, 0, 0, 0, 0, wire.FrameEnd})
		c.expectClose(0, 505, "")
	})
	t.Run("body without publish", func(t *testing.T) {
		c := rawDial(t, tb.addr)
		c.open(0)
		c.send(1, &wire.ChannelOpen{})
		c.method()
		c.write(wire.AppendBodyFrames(nil, 1, []byte("x"), 131072))
		c.expectClose(0, 505, "")
	})
	t.Run("method during content", func(t *testing.T) {
		c := rawDial(t, tb.addr)
		c.open(0)
		c.send(1, &wire.ChannelOpen{})
		c.method()
		c.send(1, &wire.BasicPublish{Exchange: "", RoutingKey: "q"})
		c.send(1, &wire.BasicQos{})
		c.expectClose(0, 505, "")
	})
	t.Run("connection method on channel 0", func(t *testing.T) {
		c := rawDial(t, tb.addr)
		c.open(0)
		c.send(0, &wire.BasicQos{})
		c.expectClose(0, 504, "CHANNEL_ERROR - unexpected method in connection state running")
	})
}

func TestChannelMax(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c := rawDial(t, tb.addr)
	c.write(wire.ProtocolHeader[:])
	c.method()
	c.send(0, &wire.ConnectionStartOk{ClientProperties: wire.Table{}, Mechanism: "PLAIN", Response: "\x00guest\x00guest", Locale: "en_US"})
	c.method()
	c.send(0, &wire.ConnectionTuneOk{ChannelMax: 2, FrameMax: 131072})
	c.send(0, &wire.ConnectionOpen{VirtualHost: "/"})
	c.method()
	for id := uint16(1); id <= 2; id++ {
		c.send(id, &wire.ChannelOpen{})
		if _, m := c.method(); m.MethodName() != "channel.open-ok" {
			t.Fatalf("channel %d: %s", id, m.MethodName())
		}
	}
	c.send(3, &wire.ChannelOpen{})
	c.expectClose(0, 530, "NOT_ALLOWED - number of channels opened (2) has reached the negotiated channel_max (2)")
}

func TestChannelErrorLeavesConnectionUsable(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c, ch := tb.channel(t)
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	_, err := ch.QueueDeclarePassive("nope", false, false, false, false, nil)
	amqpErr(t, err, 404, "NOT_FOUND - no queue 'nope' in vhost '/'")
	if e := closeReason(t, closed); e.Code != 404 {
		t.Fatalf("close %v", e)
	}
	ch2, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch2.QueueDeclare("", false, false, true, false, nil); err != nil {
		t.Fatal(err)
	}
}

func TestChannelClosingIgnoresFrames(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c := rawDial(t, tb.addr)
	c.open(0)
	c.send(1, &wire.ChannelOpen{})
	c.method()
	c.send(1, &wire.QueueDeclare{Queue: "missing", Passive: true})
	c.expectClose(1, 404, "NOT_FOUND - no queue 'missing' in vhost '/'")
	// Until close-ok, everything else on the channel is dropped.
	c.send(1, &wire.QueueDeclare{Queue: "missing", Passive: true})
	c.send(1, &wire.ChannelCloseOk{})
	c.send(1, &wire.ChannelOpen{})
	if ch, m := c.method(); ch != 1 || m.MethodName() != "channel.open-ok" {
		t.Fatalf("got %s on %d, want channel.open-ok on 1", m.MethodName(), ch)
	}
}

func TestImmediateIsNotImplemented(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c, ch := tb.channel(t)
	closed := c.NotifyClose(make(chan *amqp091.Error, 1))
	ch.PublishWithContext(context.Background(), "", "q", false, true, amqp091.Publishing{Body: []byte("x")})
	e := closeReason(t, closed)
	if e.Code != 540 || e.Reason != "NOT_IMPLEMENTED - immediate=true" {
		t.Fatalf("got %d %q", e.Code, e.Reason)
	}
}

func TestChannelFlow(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c, ch := tb.channel(t)
	if err := ch.Flow(true); err != nil {
		t.Fatal(err)
	}
	closed := c.NotifyClose(make(chan *amqp091.Error, 1))
	ch.Flow(false)
	e := closeReason(t, closed)
	if e.Code != 540 || e.Reason != "NOT_IMPLEMENTED - active=false" {
		t.Fatalf("got %d %q", e.Code, e.Reason)
	}
}

func TestServerShutdownClosesConnections(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c := tb.dial(t)
	closed := c.NotifyClose(make(chan *amqp091.Error, 1))
	tb.stop()
	e := closeReason(t, closed)
	if e.Code != 320 {
		t.Fatalf("got %d %q, want 320", e.Code, e.Reason)
	}
}

func TestServerGeneratedConsumerTag(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c := rawDial(t, tb.addr)
	c.open(0)
	c.send(1, &wire.ChannelOpen{})
	c.method()
	c.send(1, &wire.QueueDeclare{Queue: "ctagq", AutoDelete: true})
	c.method()
	c.send(1, &wire.BasicConsume{Queue: "ctagq"})
	_, m := c.method()
	ok, isOk := m.(*wire.BasicConsumeOk)
	if !isOk || len(ok.ConsumerTag) != len("amq.ctag-")+22 || ok.ConsumerTag[:9] != "amq.ctag-" {
		t.Fatalf("got %s %+v", m.MethodName(), m)
	}
}
