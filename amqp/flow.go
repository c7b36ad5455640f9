package amqp

import "time"

// Publisher flow control, Warren's counterpart of RabbitMQ's credit flow
// (internal/flow). Each connection has a credit of Config.PublishCredit
// bytes. A message takes its size (plus flow.MessageOverhead) when it is
// handed to its queues (publish.go, route) and gives it back when every
// queue has written it (pubConfirm.complete), confirms or not. When a
// publish frame arrives on a connection whose credit is spent, the
// reader holds it, as it holds one for an alarm (alarm.go), and stops
// reading the socket until the writers have given back half the credit:
// a publisher that does not wait for confirms is paced by the disk
// rather than piling messages up in memory. Frames that are not
// publishes (acks, consumes, deletes) go on being read between holds;
// the hold ends when the credit comes back, which never depends on this
// connection, so it cannot deadlock. Transactional publishes take credit
// at tx.commit, all at once.
//
// While held, and for connFlowWindow after, the connection shows state
// "flow" in the management API, its publishing channels for
// channelFlowWindow, as RabbitMQ shows them (rabbit_reader: 5 s;
// credit_flow:state/0: 1 s).
const (
	connFlowWindow    = 5 * time.Second
	channelFlowWindow = time.Second
)

// waitForCredit holds the reader until the connection's credit is back
// at half its size. It returns the error that ends the connection if it
// is forced closed or its writer fails meanwhile.
func (c *conn) waitForCredit() error {
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
	held, ok := c.credit.Wait(stop)
	if held {
		c.ctr.FlowHolds.Add(1)
	}
	if !ok {
		if e := c.forced.Load(); e != nil {
			return c.closeForced(e)
		}
		return errClosed
	}
	return nil
}
