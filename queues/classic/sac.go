package classic

import (
	"github.com/warren-mq/warren/queues/qerr"
)

// Consumer priorities (x-priority) and single active consumer
// (x-single-active-consumer) for classic queues.
//
// q.mu.consumers is kept sorted by descending priority, in registration
// order among equals. Without differing priorities the dispatcher's plain
// round robin runs; with them, reservePriorityLocked serves the highest
// priority group that has a consumer with room, round robin within it.
//
// A single-active-consumer queue (as rabbit_amqqueue_process) makes the
// first consumer active; the others get nothing. When the active one
// goes, the highest-priority remaining consumer (first registered among
// equals) becomes active. Exclusive consumers are refused (403).

// singleActive reports whether the queue has x-single-active-consumer.
func (q *Queue) singleActive() bool {
	v, _ := q.def.Args["x-single-active-consumer"].(bool)
	return v
}

// CheckGet refuses basic.get on a quorum queue with single active
// consumer (405), as rabbit_quorum_queue:dequeue.
func (q *Queue) CheckGet() error {
	if q.Quorum() && q.singleActive() {
		return qerr.Errorf(qerr.CodeResourceLocked, "cannot obtain access to locked %s. basic.get operations are not supported by quorum queues with single active consumer", qerr.Resource("queue", q.def.Name, q.def.VHost))
	}
	return nil
}

// addConsumerLocked inserts c after the consumers of its priority or
// higher.
// REQUIRES: q.mu held.
func (q *Queue) addConsumerLocked(c *Consumer) {
	cs := q.mu.consumers
	i := len(cs)
	for i > 0 && cs[i-1].priority < c.priority {
		i--
	}
	if i == len(cs) {
		q.mu.consumers = append(cs, c)
		return
	}
	cs = append(cs, nil)
	copy(cs[i+1:], cs[i:])
	cs[i] = c
	q.mu.consumers = cs
	if q.mu.rr >= i {
		q.mu.rr++
	}
}

// tryReserveLocked reserves a delivery for c if it has room.
// REQUIRES: q.mu held.
func (q *Queue) tryReserveLocked(c *Consumer) bool {
	if !c.hasRoomLocked() {
		return false
	}
	if !c.noAck {
		if c.ch != nil && !c.ch.acquire(q) {
			return false
		}
		c.unacked++
	}
	q.mu.delivering = c
	return true
}

// reserveActiveLocked is reserveLocked for a single-active-consumer
// queue.
// REQUIRES: q.mu held.
func (q *Queue) reserveActiveLocked() *Consumer {
	if c := q.mu.active; q.tryReserveLocked(c) {
		return c
	}
	return nil
}

// reservePriorityLocked is reserveLocked when consumers' priorities
// differ.
// REQUIRES: q.mu held.
func (q *Queue) reservePriorityLocked() *Consumer {
	cs := q.mu.consumers
	n := len(cs)
	for lo := 0; lo < n; {
		hi := lo + 1
		for hi < n && cs[hi].priority == cs[lo].priority {
			hi++
		}
		m := hi - lo
		start := 0
		if q.mu.rr > lo && q.mu.rr < hi {
			start = q.mu.rr - lo
		}
		for i := 0; i < m; i++ {
			j := lo + (start+i)%m
			if c := cs[j]; q.tryReserveLocked(c) {
				q.mu.rr = j + 1
				return c
			}
		}
		lo = hi
	}
	return nil
}
