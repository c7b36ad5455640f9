package amqp

import (
	"sort"

	"github.com/warren-mq/warren/amqp/wire"
	"github.com/warren-mq/warren/internal/msgconv"
	"github.com/warren-mq/warren/queues"
)

// pendingAck is a delivery awaiting the client's ack.
type pendingAck struct {
	tag uint64
	q   queues.Settler // its queue, or for a stream its consumer (settling gives credit back)
	id  uint64
	at  int64 // when delivered (monoNow), for the consumer timeout
}

type settleMode uint8

const (
	settleAck settleMode = iota
	settleRequeue
	settleDiscard
)

// settle acks, requeues or discards deliveries, grouped by queue and in
// delivery order within each queue. It runs on the reader goroutine.
func (ch *channel) settle(acks []pendingAck, mode settleMode) {
	ids := ch.ids[:0]
	defer func() { ch.ids = ids[:0] }()
	for len(acks) > 0 {
		q := acks[0].q
		ids = ids[:0]
		rest := acks[:0]
		for _, a := range acks {
			if a.q == q {
				ids = append(ids, a.id)
			} else {
				rest = append(rest, a)
			}
		}
		switch mode {
		case settleAck:
			q.Ack(ids...)
			ch.c.ctr.Delivery[settlerType(q)].Acknowledged.Add(uint64(len(ids)))
		case settleRequeue:
			sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
			q.Requeue(ids...)
		case settleDiscard:
			q.Discard(ids...)
			if qq, ok := q.(*queues.Queue); ok {
				// This channel's next basic.get (or declare, purge,
				// delete) waits until the messages it rejected are
				// dead-lettered, as it waits for its own publishes.
				ch.barrier.add()
				qq.WaitDeadLetters(ch.barrier.release)
			}
		}
		acks = rest
	}
}

// settlerType is the counters' queue type of a Settler.
func settlerType(s queues.Settler) queues.QType {
	if q, ok := s.(*queues.Queue); ok && q.Quorum() {
		return queues.QTQuorum
	} else if ok {
		return queues.QTClassic
	}
	if _, ok := s.(queues.RemoteSubscription); ok {
		return queues.QTQuorum
	}
	return queues.QTStream
}

// consumer is a basic.consume on this channel; it is the queue's Sink.
type consumer struct {
	ch      *channel
	tag     string
	sub     queues.Subscription // the consumer at its queue or stream (nil for reply-to)
	q       *queues.Queue       // a classic or quorum queue's, for kickLimit; else nil
	noAck   bool
	qt      queues.QType      // for the message counters
	reply   *replyConsumer    // amq.rabbitmq.reply-to (reply_to.go; sub is nil)
	deliver wire.BasicDeliver // reused under ch.mu
	props   []byte            // a stream record's converted properties; one Deliver at a time

	// Static, for Info (info.go).
	queue     string
	exclusive bool
	prefetch  int
	args      map[string]any // basic.consume's arguments (plainTable); not modified
}

// Deliver sends one message to the client. The frames are queued while
// ch.mu is held, so delivery tags reach the client in ascending order. A
// stream record (an AMQP 1.0 message) is converted first
// (internal/msgconv); a queue history reader's record is not.
func (cs *consumer) Deliver(d *queues.Delivery) {
	ch := cs.ch
	exchange, key, props, body := d.Exchange, d.RoutingKey, []byte(nil), d.Body
	if d.Stream != nil && !d.History {
		sd := msgconv.StreamRecordTo091(d.Body, d.ID, d.RoutingKey, cs.props)
		cs.props = sd.Props[:0]
		exchange, key, props, body = sd.Exchange, sd.Key, sd.Props, sd.Body
	} else {
		// Quorum redeliveries: x-delivery-count. A history reader's
		// delivery has its x-stream-offset header already.
		props = queues.DeliveryProps(nil, d)
	}
	ch.c.out.waitRoom()
	ch.mu.Lock()
	if ch.mu.closed || ch.mu.consumers[cs.tag] != cs {
		// Cancelled while the message was on its way: give it back.
		ch.mu.Unlock()
		if !cs.noAck {
			d.Settler().Requeue(d.ID)
		}
		return
	}
	ch.mu.nextTag++
	tag := ch.mu.nextTag
	if !cs.noAck {
		ch.mu.unacked = append(ch.mu.unacked, pendingAck{tag: tag, q: d.Settler(), id: d.ID, at: monoNow()})
	}
	ch.c.ctr.Deliver(cs.qt, false, cs.noAck, d.Redelivered)
	cs.deliver = wire.BasicDeliver{
		ConsumerTag: cs.tag,
		DeliveryTag: tag,
		Redelivered: d.Redelivered,
		Exchange:    exchange,
		RoutingKey:  key,
	}
	frameMax := ch.c.frameMax
	ch.c.out.frames(func(b []byte) []byte {
		b = wire.AppendMethodFrame(b, ch.id, &cs.deliver)
		b = wire.AppendHeaderFrame(b, ch.id, wire.ClassBasic, uint64(len(body)), props)
		return wire.AppendBodyFrames(b, ch.id, body, frameMax)
	})
	ch.mu.Unlock()
}

// Cancelled is the queue ending the consumer (the queue or stream was
// deleted): the client hears basic.cancel if it said it understands it.
func (cs *consumer) Cancelled(_ *queues.Queue, tag string) {
	ch := cs.ch
	ch.mu.Lock()
	if ch.mu.consumers[cs.tag] != cs {
		ch.mu.Unlock()
		return
	}
	delete(ch.mu.consumers, cs.tag)
	ch.notifyCancelledLocked(cs.tag)
	ch.mu.Unlock()
}

// notifyCancelledLocked tells the client that the server cancelled its
// consumer tag (basic.cancel, to clients that understand it), after the
// queue.delete-ok when the channel is deleting the queue itself: as in
// RabbitMQ, whose channel handles the queue's cancel notice after the
// delete it is running, a client sees its delete answered first (amqplib
// fails a pending call when it closes the channel on the cancel).
// REQUIRES: ch.mu held.
func (ch *channel) notifyCancelledLocked(tag string) {
	switch {
	case ch.mu.closed || !ch.c.cancelNotify:
	case ch.mu.deferCancels:
		ch.mu.cancelled = append(ch.mu.cancelled, tag)
	default:
		ch.c.send(ch.id, &wire.BasicCancel{ConsumerTag: tag, NoWait: true})
	}
}

func (ch *channel) handleConsume(m *wire.BasicConsume) error {
	if m.Queue == replyToName {
		return ch.consumeReplyTo(m)
	}
	name, err := ch.queueName(m.Queue)
	if err != nil {
		return err
	}
	if err := ch.check(queues.PermRead, "queue", name); err != nil {
		return err
	}
	tag := m.ConsumerTag
	if tag == "" {
		tag = randomName("amq.ctag-")
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.mu.closed {
		return nil // closed by the consumer timeout meanwhile
	}
	if _, dup := ch.mu.consumers[tag]; dup {
		return newError(wire.NotAllowed, "attempt to reuse consumer tag '%s'", tag)
	}
	if max := ch.c.srv.cfg.ConsumerMaxPerChannel; max > 0 && len(ch.mu.consumers) >= max {
		return newError(wire.NotAllowed, "reached maximum (%d) of consumers per channel", max)
	}
	cs := &consumer{ch: ch, tag: tag, noAck: m.NoAck, queue: name, exclusive: m.Exclusive, prefetch: ch.prefetch, args: plainTable(m.Arguments)}
	// Under ch.mu: the first delivery, which takes ch.mu, follows the
	// consume-ok queued below.
	sub, err := ch.c.broker.Consume(ch.c.vhost, name, queues.ConsumerOptions{
		Tag:       tag,
		NoAck:     m.NoAck,
		Exclusive: m.Exclusive,
		Prefetch:  ch.prefetch,
		Channel:   ch.limit,
		Owner:     ch.c,
		Sink:      cs,
	}, m.Arguments)
	if err != nil {
		return err
	}
	cs.sub = sub
	cs.qt = queues.QTStream
	if qc, ok := sub.(*queues.Consumer); ok {
		cs.q = qc.Queue()
		cs.qt = queues.QTypeOf(cs.q.Def().Type)
	} else if _, ok := sub.(queues.RemoteSubscription); ok {
		cs.qt = queues.QTQuorum // another node's queue, through the proxy
	}
	ch.mu.consumers[tag] = cs
	if !m.NoWait {
		ch.c.send(ch.id, &wire.BasicConsumeOk{ConsumerTag: tag})
	}
	return nil
}

func (ch *channel) handleCancel(m *wire.BasicCancel) error {
	ch.mu.Lock()
	cs := ch.mu.consumers[m.ConsumerTag]
	delete(ch.mu.consumers, m.ConsumerTag)
	ch.mu.Unlock()
	if cs != nil {
		cs.stop()
	}
	if !m.NoWait {
		ch.c.send(ch.id, &wire.BasicCancelOk{ConsumerTag: m.ConsumerTag})
	}
	return nil
}

func (ch *channel) handleGet(m *wire.BasicGet) error {
	name, err := ch.queueName(m.Queue)
	if err != nil {
		return err
	}
	if err := ch.check(queues.PermRead, "queue", name); err != nil {
		return err
	}
	q, err := ch.c.broker.Queue(ch.c.vhost, name)
	if err != nil {
		if _, ok := ch.c.broker.LookupStream(ch.c.vhost, name); ok {
			return queues.ErrStreamGet(ch.c.vhost, name)
		}
		return err
	}
	if err := q.CheckGet(); err != nil {
		return err
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	frameMax := ch.c.frameMax
	got, err := q.Get(ch.c, m.NoAck, func(d *queues.Delivery) {
		ch.mu.nextTag++
		tag := ch.mu.nextTag
		if !m.NoAck {
			ch.mu.unacked = append(ch.mu.unacked, pendingAck{tag: tag, q: d.Queue, id: d.ID, at: monoNow()})
		}
		ch.c.ctr.Deliver(queues.QTypeOf(q.Def().Type), true, m.NoAck, d.Redelivered)
		ok := &wire.BasicGetOk{DeliveryTag: tag, Redelivered: d.Redelivered, Exchange: d.Exchange, RoutingKey: d.RoutingKey, MessageCount: d.MessageCount}
		props := queues.DeliveryProps(nil, d) // quorum redeliveries: x-delivery-count
		ch.c.out.frames(func(b []byte) []byte {
			b = wire.AppendMethodFrame(b, ch.id, ok)
			b = wire.AppendHeaderFrame(b, ch.id, wire.ClassBasic, uint64(len(d.Body)), props)
			return wire.AppendBodyFrames(b, ch.id, d.Body, frameMax)
		})
	})
	if err != nil {
		return err
	}
	if !got {
		ch.c.ctr.Delivery[queues.QTypeOf(q.Def().Type)].GetEmpty.Add(1)
		ch.c.send(ch.id, &wire.BasicGetEmpty{})
	}
	return nil
}

// handleAck settles deliveries: tag and everything below it with
// multiple, everything with tag 0 and multiple. An unknown tag is 406.
func (ch *channel) handleAck(tag uint64, multiple bool, mode settleMode) error {
	if ch.tx != nil {
		// Buffered until commit.
		ch.mu.Lock()
		taken, ok := ch.takeLocked(nil, tag, multiple)
		ch.mu.Unlock()
		if !ok {
			return newError(wire.PreconditionFailed, "unknown delivery tag %d", tag)
		}
		ch.tx.acks = append(ch.tx.acks, txAck{acks: taken, mode: mode})
		return nil
	}
	ch.mu.Lock()
	taken, ok := ch.takeLocked(ch.acks[:0], tag, multiple)
	ch.mu.Unlock()
	if !ok {
		return newError(wire.PreconditionFailed, "unknown delivery tag %d", tag)
	}
	ch.settle(taken, mode)
	clear(taken)
	ch.acks = taken[:0]
	ch.kickLimit()
	return nil
}

// takeLocked removes and returns the unacked deliveries an ack covers.
// As RabbitMQ, the tag itself must be outstanding (tag 0 with multiple
// means all).
// REQUIRES: ch.mu held.
func (ch *channel) takeLocked(dst []pendingAck, tag uint64, multiple bool) ([]pendingAck, bool) {
	u := ch.mu.unacked
	if multiple && tag == 0 {
		dst = append(dst, u...)
		clear(u)
		ch.mu.unacked = u[:0]
		return dst, true
	}
	i := sort.Search(len(u), func(i int) bool { return u[i].tag >= tag })
	if i == len(u) || u[i].tag != tag {
		return dst, false
	}
	if multiple {
		dst = append(dst, u[:i+1]...)
		n := copy(u, u[i+1:])
		clear(u[n:])
		ch.mu.unacked = u[:n]
		return dst, true
	}
	dst = append(dst, u[i])
	n := i + copy(u[i:], u[i+1:])
	clear(u[n:])
	ch.mu.unacked = u[:n]
	return dst, true
}

// kickLimit wakes the queues this channel consumes from when a shared
// channel limit may have room again.
func (ch *channel) kickLimit() {
	if ch.limit.Limit == 0 {
		return
	}
	ch.mu.Lock()
	qs := make([]*queues.Queue, 0, len(ch.mu.consumers))
	for _, cs := range ch.mu.consumers {
		if cs.q != nil {
			qs = append(qs, cs.q)
		}
	}
	ch.mu.Unlock()
	for _, q := range qs {
		q.Kick()
	}
}

// recover requeues every unacked delivery of the channel.
func (ch *channel) recover() {
	ch.mu.Lock()
	u := ch.mu.unacked
	ch.mu.unacked = nil
	ch.mu.Unlock()
	ch.settle(u, settleRequeue)
	ch.kickLimit()
}

func (ch *channel) handleQos(m *wire.BasicQos) error {
	if m.PrefetchSize != 0 {
		return newError(wire.NotImplemented, "prefetch_size!=0 (%d)", m.PrefetchSize)
	}
	ch.mu.Lock()
	if !m.Global {
		ch.prefetch = int(m.PrefetchCount)
		ch.mu.prefetch = ch.prefetch
	} else {
		ch.mu.globalPrefetch = int(m.PrefetchCount)
	}
	ch.mu.Unlock()
	if m.Global {
		ch.limit.SetLimit(int(m.PrefetchCount))
		ch.kickLimit()
	}
	ch.c.send(ch.id, &wire.BasicQosOk{})
	return nil
}

// stop ends the consumer at its queue or stream.
func (cs *consumer) stop() {
	if cs.reply != nil {
		cs.stopReply()
		return
	}
	cs.sub.Stop()
}
