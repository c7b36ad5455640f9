package amqp

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/warren-mq/warren/amqp/wire"
	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/queues/alarm"
)

// blockedSetup opens a raw client (with the connection.blocked
// capability or not), a channel in confirm mode and queue q.
func blockedSetup(t *testing.T, tb *testBroker, capability bool) *rawClient {
	t.Helper()
	c := rawDial(t, tb.addr)
	props := wire.Table{}
	if capability {
		props["capabilities"] = wire.Table{"connection.blocked": true}
	}
	c.openWith(props)
	c.openChannel(1)
	c.send(1, &wire.QueueDeclare{Queue: "q"})
	c.expect(1, "queue.declare-ok")
	c.send(1, &wire.ConfirmSelect{})
	c.expect(1, "confirm.select-ok")
	return c
}

// expectSilence asserts the server sends nothing for a while.
func (c *rawClient) expectSilence(d time.Duration) {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(d))
	f, err := c.fr.ReadFrame(1 << 20)
	var ne net.Error
	if err == nil && f.Type == wire.FrameHeartbeat {
		c.expectSilence(d)
	} else if err == nil || !errors.As(err, &ne) || !ne.Timeout() {
		c.t.Fatalf("got frame %+v, %v; want nothing", f, err)
	}
	c.nc.SetReadDeadline(time.Now().Add(wait))
}

func connStates(b *queues.Broker) []string {
	var out []string
	for _, c := range b.Conns() {
		out = append(out, c.Info().State)
	}
	return out
}

// Ensure a client without the connection.blocked capability is blocked
// all the same but not told, and that its held publish is routed and
// confirmed once the alarm clears.
func TestAlarmBlocksWithoutCapability(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c := blockedSetup(t, tb, false)
	tb.broker.Alarms().Set(alarm.Disk, true)
	if s := connStates(tb.broker); len(s) != 1 || s[0] != queues.StateBlocking {
		t.Fatalf("states %v", s)
	}
	c.publishRaw(1, "", "q", []byte("held"), 4096)
	c.expectSilence(200 * time.Millisecond)
	if s := connStates(tb.broker); s[0] != queues.StateBlocked {
		t.Fatalf("states %v", s)
	}
	// Another connection, which does not publish, is read: the held
	// message is not in the queue.
	other := rawDial(t, tb.addr)
	other.openWith(wire.Table{})
	other.openChannel(1)
	other.send(1, &wire.QueueDeclare{Queue: "q", Passive: true})
	if ok := other.expect(1, "queue.declare-ok").(*wire.QueueDeclareOk); ok.MessageCount != 0 {
		t.Fatalf("queue has %d messages while blocked", ok.MessageCount)
	}
	tb.broker.Alarms().Set(alarm.Disk, false)
	if ack := c.expect(1, "basic.ack").(*wire.BasicAck); ack.DeliveryTag != 1 {
		t.Fatalf("ack %+v", ack)
	}
	if s := connStates(tb.broker); s[0] != queues.StateRunning {
		t.Fatalf("states %v", s)
	}
}

// Ensure both alarms give RabbitMQ's combined reason, and the
// connection stays blocked until the last one clears.
func TestAlarmBlocksUntilEveryAlarmClears(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c := blockedSetup(t, tb, true)
	a := tb.broker.Alarms()
	a.Set(alarm.Memory, true)
	a.Set(alarm.Disk, true)
	c.publishRaw(1, "", "q", []byte("held"), 4096)
	if m := c.expect(0, "connection.blocked").(*wire.ConnectionBlocked); m.Reason != "low on memory & disk" {
		t.Fatalf("reason %q", m.Reason)
	}
	a.Set(alarm.Memory, false)
	c.expectSilence(200 * time.Millisecond)
	a.Set(alarm.Disk, false)
	c.expect(0, "connection.unblocked")
	c.expect(1, "basic.ack")
}

// Ensure a blocked connection can be force-closed (by an operator
// through the API, or by deleting its vhost or user).
func TestAlarmBlockedConnectionForceClosed(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c := blockedSetup(t, tb, true)
	tb.broker.Alarms().Set(alarm.Memory, true)
	defer tb.broker.Alarms().Set(alarm.Memory, false)
	c.publishRaw(1, "", "q", []byte("held"), 4096)
	c.expect(0, "connection.blocked")
	if n := tb.broker.CloseConns(func(queues.ConnInfo) bool { return true }, "bye"); n != 1 {
		t.Fatalf("closed %d", n)
	}
	c.expectConnClose(wire.ConnectionForced, "CONNECTION_FORCED - bye", 0, 0)
}
