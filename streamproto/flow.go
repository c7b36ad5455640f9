package streamproto

import (
	"time"
	"unsafe"

	"github.com/warren-mq/warren/osiris"
)

// Publisher flow control in bytes (internal/flow), besides the entry
// credits RabbitMQ's stream reader has (initialPublishCredits): those
// count entries in flight, 50,000 of them, which with large messages is
// gigabytes. Each connection also has a credit of Config.PublishCredit
// bytes: a Publish frame handed to a stream holds its buffer's size and
// its message slice's (handlePublish) until the stream has written the
// batch (pubFrame.done). When a Publish frame arrives on a connection
// whose credit is spent, the reader stops before reading it until the
// writers have given half back; other frames (credit, store offset,
// consumers) are read in between. While held and for flowWindow after,
// the connection shows state "flow" (as RabbitMQ's AMQP 0-9-1
// connections do).

// flowWindow is how long after a hold a connection still shows "flow".
const flowWindow = 5 * time.Second

// messageSize is what one entry of a batch's message slice holds.
const messageSize = int64(unsafe.Sizeof(osiris.Message{}))

// waitForCredit holds the reader while the connection's byte credit is
// spent. It returns false when the connection ends meanwhile.
func (c *conn) waitForCredit() bool {
	if !c.credit.Spent() {
		return true
	}
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
	held, ok := c.credit.Wait(stop)
	if held {
		c.ctr.FlowHolds.Add(1)
	}
	if !ok {
		return false
	}
	return c.renewDeadline()
}
