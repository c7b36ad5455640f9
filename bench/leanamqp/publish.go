package leanamqp

import (
	"fmt"

	"github.com/warren-mq/warren/amqp/wire"
)

// Delivery modes of the delivery-mode property.
const (
	transient  = 1
	persistent = 2
)

// pubCache holds the encoded basic.publish frame of the latest exchange
// and routing key, so repeated publishes do not encode it again.
type pubCache struct {
	exchange, key string
	frame         []byte // nil until the first publish
}

// AppendPublish appends the frames of one basic.publish on channel 1 to
// dst: the method, a content header whose only property is the delivery
// mode (2 with persistent, else 1), and body split into frames of at
// most frameMax bytes. It is the encoder behind Publish.
func AppendPublish(dst []byte, exchange, routingKey string, persistentMode bool, body []byte, frameMax uint32) []byte {
	dst = wire.AppendMethodFrame(dst, channelID, &wire.BasicPublish{Exchange: exchange, RoutingKey: routingKey})
	return appendContent(dst, persistentMode, body, frameMax)
}

// appendContent appends the header and body frames of a publish.
func appendContent(dst []byte, persistentMode bool, body []byte, frameMax uint32) []byte {
	props := [3]byte{byte(wire.FlagDeliveryMode >> 8), byte(wire.FlagDeliveryMode & 0xff), transient}
	if persistentMode {
		props[2] = persistent
	}
	dst = wire.AppendHeaderFrame(dst, channelID, wire.ClassBasic, uint64(len(body)), props[:])
	return wire.AppendBodyFrames(dst, channelID, body, frameMax)
}

// appendPublishLocked appends one publish to wbuf; the caller holds wmu.
func (c *Conn) appendPublishLocked(exchange, routingKey string, persistentMode bool, body []byte) {
	if c.pub.frame == nil || c.pub.exchange != exchange || c.pub.key != routingKey {
		c.pub = pubCache{exchange: exchange, key: routingKey,
			frame: wire.AppendMethodFrame(nil, channelID, &wire.BasicPublish{Exchange: exchange, RoutingKey: routingKey})}
	}
	c.wbuf = append(c.wbuf, c.pub.frame...)
	c.wbuf = appendContent(c.wbuf, persistentMode, body, c.frameMax)
	c.pubSeq++
}

// usableLocked reports why the connection cannot send; the caller holds
// wmu.
func (c *Conn) usableLocked() error {
	select {
	case <-c.done:
		return c.err
	default:
	}
	if c.closing {
		return ErrClosed
	}
	return nil
}

// Publish appends a basic.publish of body (copied) to the write buffer;
// Flush writes what is buffered. In confirm mode it is confirmed with
// the tag PublishCount returns after it.
func (c *Conn) Publish(exchange, routingKey string, persistentMode bool, body []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.usableLocked(); err != nil {
		return fmt.Errorf("leanamqp: publish: %w", err)
	}
	c.appendPublishLocked(exchange, routingKey, persistentMode, body)
	return nil
}

// Flush writes the buffered publishes in one write.
func (c *Conn) Flush() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.usableLocked(); err != nil {
		c.wbuf = c.wbuf[:0]
		return fmt.Errorf("leanamqp: flush: %w", err)
	}
	return c.flushLocked()
}

// PublishBatch publishes n messages in one write: before each, fill (if
// not nil) may rewrite body, which is then copied into the write buffer.
// Publishes buffered earlier are written with them. In confirm mode the
// batch gets the n tags after the previous PublishCount.
func (c *Conn) PublishBatch(exchange, routingKey string, persistentMode bool, body []byte, n int, fill func(i int, body []byte)) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.usableLocked(); err != nil {
		return fmt.Errorf("leanamqp: publish: %w", err)
	}
	for i := range n {
		if fill != nil {
			fill(i, body)
		}
		c.appendPublishLocked(exchange, routingKey, persistentMode, body)
	}
	return c.flushLocked()
}

// PublishCount returns the number of publishes since ConfirmSelect (or
// since the connection opened): in confirm mode, the delivery tag of the
// latest publish.
func (c *Conn) PublishCount() uint64 {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.pubSeq
}
