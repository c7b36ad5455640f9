package streamproto

import (
	"time"

	"github.com/warren-mq/warren/queues"
)

// Publishers and resource alarms. RabbitMQ's stream reader, on a disk
// alarm (it ignores memory alarms), stops reading the socket of every
// stream connection after the data in hand, consumers' included, so
// their credit and offsets stall too, and refuses declare_publisher
// with PRECONDITION_FAILED. Warren, on either alarm, stops reading a
// connection when a Publish frame arrives on it, before reading that
// frame, and until every alarm has cleared; connections that only
// consume keep being read. declare_publisher is refused as in RabbitMQ.
// The connection shows as blocked meanwhile (RabbitMQ's stream
// connections have no blocking state).

// blockWhileAlarmed holds the reader while an alarm is in effect. It
// returns false when the connection ends meanwhile.
func (c *conn) blockWhileAlarmed() bool {
	alarms := c.srv.broker.Alarms()
	if alarms.Active() == 0 {
		return true
	}
	c.blocked.Store(true)
	defer c.blocked.Store(false)
	c.log.Debug("stream publisher blocked", "reason", alarms.Active().BlockedReason())
	stop, done := make(chan struct{}), make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-c.forced:
		case <-c.ctx.Done():
		case <-done:
		}
		close(stop)
	}()
	if !alarms.Wait(stop) {
		return false
	}
	if !c.renewDeadline() {
		return false
	}
	c.log.Debug("stream publisher unblocked")
	return true
}

// renewDeadline, after the reader was held, sets the heartbeat deadline
// again: the one set before has passed, but the client was not read, so
// its silence is not its fault. It returns false if the connection was
// forced closed meanwhile.
func (c *conn) renewDeadline() bool {
	if hb := time.Duration(c.heartbeat.Load()); hb > 0 {
		c.nc.SetReadDeadline(time.Now().Add(2*hb + time.Second))
	} else {
		c.nc.SetReadDeadline(time.Time{})
	}
	return !c.isForced() // its past deadline may have been replaced
}

// apiState is the connection's state as RabbitMQ's API shows it: an
// alarm wins over flow control (flow.go).
func (c *conn) apiState() string {
	switch {
	case c.blocked.Load():
		return queues.StateBlocked
	case c.credit.Flow(flowWindow):
		return queues.StateFlow
	}
	return queues.StateRunning
}
