package amqp

import (
	"encoding/binary"

	"github.com/warren-mq/warren/amqp/wire"
	"github.com/warren-mq/warren/queues"
)

// Publishers and resource alarms, as RabbitMQ's reader throttles them:
// while an alarm is in effect a connection is "blocking" until a
// publish arrives on it, then "blocked": its socket is no longer read
// until every alarm has cleared. Clients that announced the
// connection.blocked capability are told (connection.blocked with
// RabbitMQ's reason, "low on memory", "low on disk", then
// connection.unblocked). Unlike RabbitMQ, which stops after the frame
// that carried the publish, Warren stops before it: no message
// completes while blocked. Connections that do not publish (consumers,
// acks, deletes, purges) are read as usual, so space can be freed.

// isPublishFrame reports whether f is part of a publish: basic.publish,
// or a content header or body (only publishes send content to the
// broker).
func isPublishFrame(f wire.Frame) bool {
	switch f.Type {
	case wire.FrameHeader, wire.FrameBody:
		return f.Channel != 0
	case wire.FrameMethod:
		return len(f.Payload) >= 4 && binary.BigEndian.Uint16(f.Payload) == wire.ClassBasic &&
			binary.BigEndian.Uint16(f.Payload[2:]) == wire.MethodBasicPublish
	}
	return false
}

// blockWhileAlarmed holds the reader while an alarm is in effect (the
// frame just read waits with it). It returns the error that ends the
// connection if it is forced closed or its writer fails meanwhile.
func (c *conn) blockWhileAlarmed() error {
	alarms := c.broker.Alarms()
	active := alarms.Active()
	if active == 0 {
		return nil
	}
	c.blocked.Store(true)
	defer c.blocked.Store(false)
	c.log.Debug("publisher blocked", "reason", active.BlockedReason())
	if c.blockedNotify {
		c.send(0, &wire.ConnectionBlocked{Reason: active.BlockedReason()})
	}
	stop, done := make(chan struct{}), make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-c.kicked:
		case <-c.writerDone:
		case <-done:
		}
		close(stop)
	}()
	if !alarms.Wait(stop) {
		if e := c.forced.Load(); e != nil {
			return c.closeForced(e)
		}
		return errClosed
	}
	if c.blockedNotify {
		c.send(0, &wire.ConnectionUnblocked{})
	}
	c.log.Debug("publisher unblocked")
	return nil
}

// state is the connection's state as RabbitMQ's API shows it: an alarm
// wins over flow control (flow.go), as in rabbit_reader.
func (c *conn) state() string {
	switch {
	case c.blocked.Load():
		return queues.StateBlocked
	case c.broker.Alarms().Active() != 0:
		return queues.StateBlocking
	case c.credit.Flow(connFlowWindow):
		return queues.StateFlow
	}
	return queues.StateRunning
}
