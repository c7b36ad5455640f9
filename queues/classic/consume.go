package classic

import (
	"context"
	"errors"
	"runtime/pprof"
	"slices"
	"sync"

	"github.com/warren-mq/warren/queues/qerr"
)

// Consumers and the dispatcher.
//
// A queue with consumers runs one dispatcher goroutine; it exits when the
// last consumer goes, so an idle queue has none. The dispatcher reserves a
// consumer with room (round robin; per-consumer prefetch and the optional
// channel-wide limit), takes the next ready message (requeued ones first),
// records it as unacked (or settles it for no-ack consumers) and calls
// the consumer's Sink without a queue lock held. One dispatcher per queue
// delivers in queue order to each consumer.

// ChannelLimit is a prefetch limit shared by the consumers of one channel
// (basic.qos global=true) across queues. Limit 0 means unlimited. Set
// Limit before the limit is used and change it with SetLimit.
type ChannelLimit struct {
	Limit int

	mu struct {
		sync.Mutex
		unacked int      // deliveries awaiting ack on the channel
		waiting []*Queue // queues whose consumers found no room
	}
}

// SetLimit changes the limit; queues waiting for room are woken.
func (l *ChannelLimit) SetLimit(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.Limit = n
	l.wakeLocked()
}

// Unacked returns the number of unacked deliveries counted against the
// limit.
func (l *ChannelLimit) Unacked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.unacked
}

// acquire takes a slot for a delivery by q; when there is none, q is woken
// when one frees.
func (l *ChannelLimit) acquire(q *Queue) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.Limit > 0 && l.mu.unacked >= l.Limit {
		if !slices.Contains(l.mu.waiting, q) {
			l.mu.waiting = append(l.mu.waiting, q)
		}
		return false
	}
	l.mu.unacked++
	return true
}

// hasRoom reports whether a delivery would fit now, without taking a slot.
func (l *ChannelLimit) hasRoom() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.Limit <= 0 || l.mu.unacked < l.Limit
}

// release gives back a slot.
func (l *ChannelLimit) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.unacked--
	l.wakeLocked()
}

// REQUIRES: l.mu held.
func (l *ChannelLimit) wakeLocked() {
	if len(l.mu.waiting) > 0 && (l.Limit <= 0 || l.mu.unacked < l.Limit) {
		for _, q := range l.mu.waiting {
			q.Kick()
		}
		clear(l.mu.waiting)
		l.mu.waiting = l.mu.waiting[:0]
	}
}

// Consumer is a registered consumer.
type Consumer struct {
	// Static after Consume.
	q         *Queue
	tag       string
	noAck     bool
	exclusive bool
	prefetch  int
	priority  int
	ch        *ChannelLimit
	sink      Sink
	credited  bool // room is credit (ConsumerOptions.Credited)

	// Guarded by q.mu.
	unacked   int  // unacked deliveries, including a reserved one
	cancelled bool // no more deliveries
	credit    int  // deliveries a credited consumer may still get
}

// Tag returns the consumer tag.
func (c *Consumer) Tag() string { return c.tag }

// Queue returns the consumer's queue.
func (c *Consumer) Queue() *Queue { return c.q }

// Stop cancels the consumer at its queue (Cancel).
func (c *Consumer) Stop() { c.q.Cancel(c) }

// Active reports whether the consumer may be delivered to: false for a
// waiting consumer of a single-active-consumer queue (as Consumers
// reports it).
func (c *Consumer) Active() bool {
	q := c.q
	if !q.singleActive() {
		return true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.mu.active == c
}

// SingleActive reports whether the queue has x-single-active-consumer.
func (q *Queue) SingleActive() bool { return q.singleActive() }

// hasRoomLocked reports whether c may get another delivery, leaving the
// channel limit aside.
// REQUIRES: c.q.mu held.
func (c *Consumer) hasRoomLocked() bool {
	if c.credited {
		return !c.cancelled && c.credit > 0
	}
	return !c.cancelled && (c.noAck || c.prefetch <= 0 || c.unacked < c.prefetch)
}

// Consume registers a consumer. An exclusive consumer needs a queue
// without consumers, and no consumer joins one that has an exclusive
// consumer (403); an exclusive queue refuses other connections (405).
func (q *Queue) Consume(o ConsumerOptions) (*Consumer, error) {
	if o.Sink == nil {
		return nil, qerr.Errorf(qerr.CodeInternalError, "consumer without a sink")
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.closed {
		return nil, q.errGone()
	}
	if err := q.CheckOwner(o.Owner); err != nil {
		return nil, err
	}
	if q.mu.exclusiveConsumer || (o.Exclusive && len(q.mu.consumers) > 0) {
		return nil, qerr.Errorf(qerr.CodeAccessRefused, "%s in exclusive use", qerr.Resource("queue", q.def.Name, q.def.VHost))
	}
	sac := q.singleActive()
	if sac && o.Exclusive {
		return nil, qerr.Errorf(qerr.CodeAccessRefused, "%s in exclusive use", qerr.Resource("queue", q.def.Name, q.def.VHost))
	}
	c := &Consumer{q: q, tag: o.Tag, noAck: o.NoAck, exclusive: o.Exclusive, prefetch: o.Prefetch, priority: o.Priority, ch: o.Channel, sink: o.Sink}
	if o.Credited {
		c.credited, c.credit, c.prefetch, c.ch = true, max(o.Credit, 0), 0, nil
	}
	q.addConsumerLocked(c)
	if sac && q.mu.active == nil {
		q.mu.active = c
	}
	q.mu.hadConsumer = true
	if o.Exclusive {
		q.mu.exclusiveConsumer = true
	}
	q.armExpiresLocked() // in use: x-expires waits
	if q.def.Durable {
		q.renewLocked() // reserve ahead now rather than at the first delivery (persist.go)
	}
	if !q.mu.dispatching {
		q.mu.dispatching = true
		done := make(chan struct{})
		q.mu.dispDone = done
		go pprof.Do(context.Background(), pprof.Labels("queue-dispatcher", q.def.VHost+"/"+q.def.Name),
			func(context.Context) { q.dispatch(done) })
	}
	q.Kick()
	return c, nil
}

// Cancel stops deliveries to c. When it returns no Deliver call for c is
// running or will start. c's unacked messages stay unacked until the
// front end acks, requeues or discards them. When the last consumer of an
// auto-delete queue goes, the queue is deleted.
//
// Cancel waits for a Deliver to c in progress: it must not be called from
// that Deliver, nor while holding a lock that the Sink's Deliver takes.
func (q *Queue) Cancel(c *Consumer) {
	q.mu.Lock()
	if c.cancelled {
		q.mu.Unlock()
		return
	}
	c.cancelled = true
	if q.mu.waiters > 0 {
		q.mu.idle.Broadcast() // a DrainCredit of c stops waiting
	}
	if i := slices.Index(q.mu.consumers, c); i >= 0 {
		q.mu.consumers = slices.Delete(q.mu.consumers, i, i+1)
	}
	if q.mu.active == c {
		q.mu.active = nil
		if len(q.mu.consumers) > 0 {
			q.mu.active = q.mu.consumers[0] // highest priority, first registered
		}
	}
	if c.exclusive {
		q.mu.exclusiveConsumer = false
	}
	for q.mu.delivering == c {
		q.mu.waiters++
		q.mu.idle.Wait()
		q.mu.waiters--
	}
	autoDelete := q.def.AutoDelete && q.mu.hadConsumer && len(q.mu.consumers) == 0 && !q.mu.closed
	if len(q.mu.consumers) == 0 && !q.mu.closed {
		q.touchLocked()     // unused from now: x-expires counts from here
		q.markDirtyLocked() // the persisted state goes back to exact (persist.go)
	}
	q.mu.Unlock()
	q.Kick() // a dispatcher without consumers exits
	if autoDelete {
		q.env.Broker.Unused(q)
	}
}

// reserveLocked picks the next consumer with room, round robin, and
// reserves a delivery for it (counting it as unacked), or returns nil.
// REQUIRES: q.mu held.
func (q *Queue) reserveLocked() *Consumer {
	if q.mu.active != nil {
		return q.reserveActiveLocked()
	}
	n := len(q.mu.consumers)
	if n > 1 && q.mu.consumers[0].priority != q.mu.consumers[n-1].priority {
		return q.reservePriorityLocked()
	}
	for i := 0; i < n; i++ {
		c := q.mu.consumers[(q.mu.rr+i)%n]
		if !c.hasRoomLocked() {
			continue
		}
		if !c.noAck {
			if c.ch != nil && !c.ch.acquire(q) {
				continue
			}
			c.unacked++
		}
		q.mu.rr = (q.mu.rr + i + 1) % n
		q.mu.delivering = c
		return c
	}
	return nil
}

// releaseLocked gives back an unacked slot of c (nil: basic.get).
// REQUIRES: q.mu held.
func (q *Queue) releaseLocked(c *Consumer) {
	if c == nil || c.noAck {
		return
	}
	c.unacked--
	if c.ch != nil {
		c.ch.release()
	}
}

// endDeliveryLocked clears the dispatcher's reservation.
// REQUIRES: q.mu held.
func (q *Queue) endDeliveryLocked() {
	q.mu.delivering = nil
	if q.mu.waiters > 0 {
		q.mu.idle.Broadcast()
	}
}

// dispatch is the dispatcher goroutine; it exits (closing done) when the
// queue has no consumers or closes.
func (q *Queue) dispatch(done chan struct{}) {
	defer close(done)
	var rd takeReaders
	rd.init(q)
	defer rd.close()
	d := Delivery{Queue: q}
	var strs strCaches
	for {
		q.mu.Lock()
		if q.mu.closed || len(q.mu.consumers) == 0 {
			q.mu.dispatching = false
			q.mu.Unlock()
			return
		}
		var c *Consumer
		if q.mu.ready > 0 {
			c = q.reserveLocked()
			if c == nil && len(q.mu.zeros) > 0 {
				q.expireZerosLocked() // TTL 0: no consumer can take them now
			}
		} else if len(q.mu.zeros) > 0 {
			q.mu.zeros = q.mu.zeros[:0]
		}
		q.mu.Unlock()
		if c == nil {
			<-q.kick
			continue
		}
		t, ok, err := q.take(&rd)
		if !ok {
			q.mu.Lock()
			q.releaseLocked(c)
			q.endDeliveryLocked()
			q.mu.Unlock()
			if errors.Is(err, errPersistWait) {
				<-q.kick // the persister kicks when the state is written
				continue
			}
			if err != nil {
				q.env.Logger.Error("queues: dispatch", "vhost", q.def.VHost, "queue", q.def.Name, "err", err)
				<-q.kick // retry on the next event rather than spin
			}
			continue
		}
		// q.mu is held (take).
		q.deliveredLocked(&t, c, c.noAck)
		q.mu.Unlock()
		strs.fill(&d, q, c.tag, &t)
		c.sink.Deliver(&d)
		q.mu.Lock()
		q.endDeliveryLocked()
		q.mu.Unlock()
	}
}

// strCaches keeps the last exchange and routing key strings, so that a
// run of messages with the same ones converts them once.
type strCaches struct{ exchange, routingKey string }

func (s *strCaches) fill(d *Delivery, q *Queue, tag string, t *taken) {
	if string(t.rec.exchange) != s.exchange {
		s.exchange = string(t.rec.exchange)
	}
	if string(t.rec.routingKey) != s.routingKey {
		s.routingKey = string(t.rec.routingKey)
	}
	*d = Delivery{
		Queue:         q,
		ConsumerTag:   tag,
		ID:            t.id,
		Redelivered:   t.count > 0,
		DeliveryCount: counted(t.count),
		Exchange:      s.exchange,
		RoutingKey:    s.routingKey,
		Props:         t.rec.props,
		Body:          t.rec.body,
		Annotations:   t.anns,
		AMQP10Props:   t.rec.props10,
	}
}
