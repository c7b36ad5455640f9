package classic

import (
	"bytes"
	"errors"
)

// Length limits (x-max-length, x-max-length-bytes, x-overflow), as
// rabbit_amqqueue_process applies them (maybe_deliver_or_enqueue/3,
// will_overflow/2, maybe_drop_head/2): they count the ready messages and
// their body bytes, not the delivered unacked ones.
//
//   - drop-head (the default): a message is enqueued, then while the queue
//     is over a limit its head (the message that would be delivered next:
//     in a priority queue the highest priority's, as RabbitMQ's
//     rabbit_priority_queue:drop/2) is dropped, dead-lettered with reason
//     maxlen when the queue has a dead-letter exchange. A requeue or a
//     lowered limit drops the same way.
//   - reject-publish: a publish that would make the queue exceed a limit
//     is refused: Publish reports ErrRejectPublish, which the AMQP front
//     end turns into basic.nack (with confirms; a message routed to
//     several queues is nacked if any refused).
//   - reject-publish-dlx: refused as reject-publish and dead-lettered with
//     reason maxlen.
//
// Publishes in flight to the log (accepted, not yet stored) count toward
// the limit, so that concurrent publishes cannot overshoot it.

// ErrRejectPublish is the refusal of a publish by a queue at its length
// limit with x-overflow reject-publish or reject-publish-dlx.
var ErrRejectPublish = errors.New("queues: queue is full (x-overflow reject-publish)")

// overLimitLocked reports whether the ready messages exceed a limit.
// REQUIRES: q.mu held.
func (q *Queue) overLimitLocked(c *queueConfig) bool {
	return (c.maxLen >= 0 && int64(q.mu.ready) > c.maxLen) || (c.maxBytes >= 0 && q.mu.readyBytes > c.maxBytes)
}

// dropHeadLocked drops heads while the queue is over a limit, when its
// overflow is drop-head.
// REQUIRES: q.mu held.
func (q *Queue) dropHeadLocked() {
	c := q.config()
	if !c.limited() || c.overflow != overflowDropHead || !q.overLimitLocked(c) {
		return
	}
	q.expireDueLocked() // what expired goes first, as expired
	dead := q.deadFn(reasonMaxLen)
	for q.overLimitLocked(c) {
		p, req, _, ok := q.headLocked()
		if !ok {
			return
		}
		h := q.popHeadLocked(p, req)
		dead(idRange{h.id, h.id + 1})
	}
}

// admitLocked decides a publish of m to a queue with a reject overflow:
// false when it would exceed a limit. An admitted publish is counted as
// pending until it is stored.
// REQUIRES: q.mu held.
func (q *Queue) admitLocked(c *queueConfig, m *pubMeta) bool {
	q.expireDueLocked()
	n := int64(q.mu.ready + q.mu.pendPub)
	bytes := q.mu.readyBytes + q.mu.pendBytes
	if (c.maxLen >= 0 && n+1 > c.maxLen) || (c.maxBytes >= 0 && bytes+int64(m.size) > c.maxBytes) {
		return false
	}
	q.mu.pendPub++
	q.mu.pendBytes += int64(m.size)
	m.reserved = true
	return true
}

// unreserveLocked forgets the pending publishes of metas.
// REQUIRES: q.mu held.
func (q *Queue) unreserveLocked(metas []pubMeta) {
	for _, m := range metas {
		if m.reserved {
			q.mu.pendPub--
			q.mu.pendBytes -= int64(m.size)
		}
	}
}

// admit applies a reject overflow to a publish of rec (an entry): it
// reports false, after dead-lettering the message for reject-publish-dlx,
// when the queue refuses it.
func (q *Queue) admit(c *queueConfig, rec []byte, m *pubMeta) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.closed || q.admitLocked(c, m) {
		return true // a closed queue refuses the publish later, as gone
	}
	if c.overflow == overflowRejectPublishDLX && c.hasDLX {
		q.deadRecordLocked(bytes.Clone(rec[4:]), reasonMaxLen)
	}
	return false
}
