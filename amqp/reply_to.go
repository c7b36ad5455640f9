package amqp

import (
	"github.com/warren-mq/warren/amqp/wire"
	"github.com/warren-mq/warren/queues"
)

// Direct reply-to (amq.rabbitmq.reply-to): a requester consumes the
// pseudo-queue amq.rabbitmq.reply-to with no-ack on a channel; its
// publishes with that reply-to get it rewritten to the consumer's reply
// name, amq.rabbitmq.reply-to.<token>.<key> (queues.ReplyRegistry), and
// a reply published to the default exchange with that routing key goes
// straight to the requester, without a queue. The registry is the
// broker's: a reply from an AMQP 1.0 responder reaches a 0-9-1
// requester, a 0-9-1 reply a 1.0 requester (package amqp1), as in
// RabbitMQ 4.2. Such a reply counts as routed even when the requester
// is gone (no basic.return).

const replyToName = queues.ReplyToName

// replyConsumer is a channel's amq.rabbitmq.reply-to consumer.
type replyConsumer struct {
	cs   *consumer
	name string // amq.rabbitmq.reply-to.<token>.<key>
}

func (rc *replyConsumer) address() string { return rc.name }

// consumeReplyTo is basic.consume of amq.rabbitmq.reply-to.
func (ch *channel) consumeReplyTo(m *wire.BasicConsume) error {
	if !m.NoAck {
		return newError(wire.PreconditionFailed, "reply consumer cannot acknowledge")
	}
	tag := m.ConsumerTag
	if tag == "" {
		tag = randomName("amq.ctag-")
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.mu.closed {
		return nil
	}
	if ch.mu.reply != nil {
		return newError(wire.PreconditionFailed, "reply consumer already set")
	}
	if _, dup := ch.mu.consumers[tag]; dup {
		return newError(wire.NotAllowed, "attempt to reuse consumer tag '%s'", tag)
	}
	cs := &consumer{ch: ch, tag: tag, noAck: true, queue: replyToName, exclusive: m.Exclusive, args: plainTable(m.Arguments)}
	rc := &replyConsumer{cs: cs}
	rc.name = ch.c.broker.Replies().Register(ch.c.vhost, rc)
	cs.reply = rc
	ch.mu.reply = rc
	ch.mu.consumers[tag] = cs
	if !m.NoWait {
		ch.c.send(ch.id, &wire.BasicConsumeOk{ConsumerTag: tag})
	}
	return nil
}

// stopReply ends a reply consumer.
func (cs *consumer) stopReply() {
	rc := cs.reply
	cs.ch.c.broker.Replies().Unregister(rc.name)
	cs.ch.mu.Lock()
	if cs.ch.mu.reply == rc {
		cs.ch.mu.reply = nil
	}
	cs.ch.mu.Unlock()
}

// rewriteReplyTo gives a publish with reply-to amq.rabbitmq.reply-to the
// channel's reply address; it returns the properties to use.
func (ch *channel) rewriteReplyTo(props []byte) ([]byte, error) {
	ch.mu.Lock()
	rc := ch.mu.reply
	ch.mu.Unlock()
	if rc == nil {
		return nil, newError(wire.PreconditionFailed, "fast reply consumer does not exist")
	}
	p, err := wire.ParseProperties(props)
	if err != nil {
		return nil, newError(wire.FrameError, "cannot decode content properties: %v", err)
	}
	p.ReplyTo = rc.address()
	out, err := wire.AppendProperties(nil, &p)
	if err != nil {
		return nil, newError(wire.FrameError, "cannot encode content properties: %v", err)
	}
	return out, nil
}

// isReplyKey reports whether a default-exchange publish is a direct
// reply.
func isReplyKey(exchange, key string) bool {
	return exchange == "" && queues.IsReplyName(key)
}

// deliverReply hands a reply to its requester, of either protocol, if it
// is still there.
func (ch *channel) deliverReply(exchange, key string, props, body []byte) {
	if sink, ok := ch.c.broker.Replies().Lookup(ch.c.vhost, key); ok {
		sink.DeliverReply(exchange, key, props, body)
	}
}

// DeliverReply implements queues.ReplySink: the reply goes to the
// requester's consumer, if it is still there.
func (rc *replyConsumer) DeliverReply(exchange, key string, props, body []byte) {
	to := rc.cs.ch
	to.c.out.waitRoom()
	to.mu.Lock()
	defer to.mu.Unlock()
	if to.mu.closed || to.mu.reply != rc {
		return
	}
	to.mu.nextTag++
	to.c.ctr.Deliver(queues.QTVolatile, false, true, false)
	m := &wire.BasicDeliver{ConsumerTag: rc.cs.tag, DeliveryTag: to.mu.nextTag, Exchange: exchange, RoutingKey: key}
	frameMax := to.c.frameMax
	props, body = append([]byte(nil), props...), append([]byte(nil), body...)
	to.c.out.frames(func(b []byte) []byte {
		b = wire.AppendMethodFrame(b, to.id, m)
		b = wire.AppendHeaderFrame(b, to.id, wire.ClassBasic, uint64(len(body)), props)
		return wire.AppendBodyFrames(b, to.id, body, frameMax)
	})
}

// declareReplyTo answers queue.declare of amq.rabbitmq.reply-to (always
// there) or of a reply address (there while its consumer is); handled
// reports whether name was one of them.
func (ch *channel) declareReplyTo(m *wire.QueueDeclare) (handled bool, err error) {
	name := m.Queue
	if name != replyToName {
		if !isReplyKey("", name) {
			return false, nil
		}
		if _, ok := ch.c.broker.Replies().Lookup(ch.c.vhost, name); !ok {
			return true, newError(wire.NotFound, "queue '%s' in vhost '%s' not found", name, ch.c.vhost)
		}
	}
	if !m.NoWait {
		ch.c.send(ch.id, &wire.QueueDeclareOk{Queue: name, MessageCount: 0, ConsumerCount: 1})
	}
	return true, nil
}
