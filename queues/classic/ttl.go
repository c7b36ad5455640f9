package classic

import (
	"container/heap"
	"time"
)

// Message TTL and queue expiry (x-message-ttl, the expiration property,
// x-expires).
//
// A message's TTL is the smaller of the queue's x-message-ttl (argument
// or policy, as then in effect) and its expiration property; its expiry
// instant is fixed when it is enqueued and kept when it is requeued. The
// enqueue instant is when the queue hands the message's batch to its log
// (at most one group commit after the publish arrived); after a restart
// it is the chunk's timestamp (recover.go).
// RabbitMQ expires classic queue messages only at the head of the queue
// (rabbit_amqqueue_process:drop_expired_msgs), so an expired message
// behind a live one is counted and waits. Warren keeps the expiries of
// the ready messages in a min-heap instead, one entry per publish batch
// for the queue TTL (the batch's messages share it) plus one per message
// whose own TTL is shorter, and expires every due message wherever it
// is:
//
//   - on a timer armed at the earliest expiry, so expired messages are
//     dead-lettered (reason expired) or dropped even with no consumer;
//   - before every count (queue.declare-ok, basic.get-ok, queue.purge-ok,
//     queue.delete-ok), before every take (so an expired message is never
//     delivered), and when a requeued message comes back past its expiry.
//
// TTL 0 means "deliverable only if a consumer can take it at once": such
// messages are kept in q.mu.zeros and expired as soon as no consumer
// has room (when they are stored, when the dispatcher finds no room,
// before basic.get); a requeued one is expired at once.
//
// x-expires: the queue is deleted after being unused for that long: no
// consumers, and no basic.get or queue.declare (passive or not) meanwhile
// (rabbit_amqqueue_process:ensure_expiry_timer). Its messages are not
// dead-lettered.

// expiry is a heap entry: the ready messages with ids in [lo, hi) expire
// at exp (Unix ms).
type expiry struct {
	exp    int64
	lo, hi uint64
}

// expiryHeap is a min-heap of expiries by instant.
type expiryHeap []expiry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].exp < h[j].exp }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// nowMs is the broker clock in Unix milliseconds.
func (q *Queue) nowMs() int64 {
	if now := q.env.Now; now != nil {
		return now().UnixMilli()
	}
	return time.Now().UnixMilli()
}

// pushExpiryLocked registers an expiry and arms the timer for it.
// REQUIRES: q.mu held.
func (q *Queue) pushExpiryLocked(e expiry) {
	if n := len(q.mu.expq); n > 0 && q.mu.expq[n-1].exp == e.exp && q.mu.expq[n-1].hi == e.lo {
		q.mu.expq[n-1].hi = e.hi // a run of messages sharing an instant
	} else {
		heap.Push(&q.mu.expq, e)
		if n := len(q.mu.expq); n >= max(compactAt, q.mu.expqNext) && n > 2*q.mu.ready {
			q.compactExpiriesLocked()
		}
	}
	q.armTTLTimerLocked()
}

// compactAt is the size of the expiry heap, and of the TTL-0 list, from
// which they are rid of the entries whose messages are no longer ready
// (delivered and acked before they expired) when they hold more entries
// than there are ready messages. So a long TTL on a busy queue costs
// memory in proportion to its ready messages, not to its throughput.
const compactAt = 1024

// compactExpiriesLocked drops the expiries without a ready message.
// REQUIRES: q.mu held.
func (q *Queue) compactExpiriesLocked() {
	live := q.mu.expq[:0]
	for _, e := range q.mu.expq {
		if q.hasReadyInLocked(e.lo, e.hi) {
			live = append(live, e)
		}
	}
	clear(q.mu.expq[len(live):])
	q.mu.expq = live
	q.mu.expqNext = 2 * len(live) // amortised: at least as many pushes before the next
	heap.Init(&q.mu.expq)
}

// addZeroLocked notes the TTL-0 messages [lo, hi).
// REQUIRES: q.mu held.
func (q *Queue) addZeroLocked(lo, hi uint64) {
	if n := len(q.mu.zeros); n > 0 && q.mu.zeros[n-1].hi == lo {
		q.mu.zeros[n-1].hi = hi
		return
	}
	if n := len(q.mu.zeros); n >= compactAt && n > 2*q.mu.ready {
		live := q.mu.zeros[:0]
		for _, r := range q.mu.zeros {
			if q.hasReadyInLocked(r.lo, r.hi) {
				live = append(live, r)
			}
		}
		q.mu.zeros = live
	}
	q.mu.zeros = append(q.mu.zeros, idRange{lo, hi})
}

// expireDueLocked expires the ready messages whose expiry has come.
// REQUIRES: q.mu held.
func (q *Queue) expireDueLocked() {
	if len(q.mu.expq) == 0 {
		if q.mu.ready == 0 {
			q.mu.zeros = q.mu.zeros[:0]
		}
		return // no clock read on the fast path
	}
	now := q.nowMs()
	for len(q.mu.expq) > 0 && q.mu.expq[0].exp <= now {
		e := heap.Pop(&q.mu.expq).(expiry)
		if q.mu.ready > 0 {
			q.removeReadyLocked(e.lo, e.hi, q.deadFn(reasonExpired))
		}
	}
	if q.mu.ready == 0 {
		// Nothing ready: the remaining expiries are of messages now
		// delivered (a requeue registers its own), or gone.
		clear(q.mu.expq)
		q.mu.expq = q.mu.expq[:0]
		q.mu.zeros = q.mu.zeros[:0]
	}
}

// expireZerosLocked expires the ready TTL-0 messages.
// REQUIRES: q.mu held.
func (q *Queue) expireZerosLocked() {
	for _, r := range q.mu.zeros {
		if q.mu.ready == 0 {
			break
		}
		q.removeReadyLocked(r.lo, r.hi, q.deadFn(reasonExpired))
	}
	q.mu.zeros = q.mu.zeros[:0]
}

// consumerCanTakeLocked reports whether some consumer has room for a
// delivery now (a TTL-0 message may wait for it).
// REQUIRES: q.mu held.
func (q *Queue) consumerCanTakeLocked() bool {
	for _, c := range q.mu.consumers {
		if c.hasRoomLocked() && (c.noAck || c.ch == nil || c.ch.hasRoom()) {
			return true
		}
	}
	return false
}

// armTTLTimerLocked arms the TTL timer at the earliest expiry, unless it
// is armed for an earlier instant.
// REQUIRES: q.mu held.
func (q *Queue) armTTLTimerLocked() {
	if len(q.mu.expq) == 0 || q.mu.closed {
		return
	}
	at := q.mu.expq[0].exp
	if q.mu.ttlArmed && q.mu.ttlAt <= at {
		return
	}
	if q.ttlTimer == nil {
		q.ttlTimer = time.AfterFunc(time.Hour, q.ttlTick)
	}
	q.mu.ttlArmed, q.mu.ttlAt = true, at
	d := time.Duration(at-q.nowMs()) * time.Millisecond
	q.ttlTimer.Reset(max(d, 0))
}

// ttlTick runs on the TTL timer: it expires what is due and re-arms.
func (q *Queue) ttlTick() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.mu.ttlArmed = false
	if q.mu.closed {
		return
	}
	q.expireDueLocked()
	q.armTTLTimerLocked()
}

// touchLocked notes a use of the queue (queue.declare, basic.get, the
// last consumer going) for x-expires and re-arms its timer.
// REQUIRES: q.mu held.
func (q *Queue) touchLocked() {
	q.mu.lastUsed = q.nowMs()
	q.armExpiresLocked()
}

// armExpiresLocked arms the x-expires timer for an unused queue, or stops
// it.
// REQUIRES: q.mu held.
func (q *Queue) armExpiresLocked() {
	exp := q.config().expires
	if exp <= 0 || q.mu.closed || len(q.mu.consumers) > 0 {
		if q.expTimer != nil {
			q.expTimer.Stop()
		}
		return
	}
	if q.expTimer == nil {
		q.expTimer = time.AfterFunc(time.Hour, q.expiresTick)
	}
	d := time.Duration(q.mu.lastUsed+exp-q.nowMs()) * time.Millisecond
	q.expTimer.Reset(max(d, 0))
}

// expiresTick runs on the x-expires timer.
func (q *Queue) expiresTick() {
	q.mu.Lock()
	exp := q.config().expires
	if exp <= 0 || q.mu.closed || len(q.mu.consumers) > 0 {
		q.mu.Unlock()
		return
	}
	if q.nowMs() < q.mu.lastUsed+exp {
		q.armExpiresLocked() // used meanwhile
		q.mu.Unlock()
		return
	}
	q.mu.Unlock()
	q.env.Broker.Expired(q)
}

// expiredUnusedLocked reports whether the queue has been unused for its
// x-expires period.
// REQUIRES: q.mu held.
func (q *Queue) expiredUnusedLocked() bool {
	exp := q.config().expires
	return exp > 0 && len(q.mu.consumers) == 0 && q.nowMs() >= q.mu.lastUsed+exp
}

// BeginExpiry marks the queue closed, as BeginShutdown does, if its
// x-expires period passed unused; it reports whether it did.
func (q *Queue) BeginExpiry() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.closed || !q.expiredUnusedLocked() {
		return false
	}
	q.mu.closed = true
	return true
}
