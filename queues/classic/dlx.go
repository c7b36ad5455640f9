package classic

import (
	"context"
	"errors"
	"runtime/pprof"
	"sync"
	"sync/atomic"

	"github.com/warren-mq/warren/queues/qerr"
)

// Dead-lettering (x-dead-letter-exchange, x-dead-letter-routing-key),
// after rabbit_dead_letter:publish/5.
//
// A message is dead-lettered when it is rejected (basic.reject or
// basic.nack with requeue=false: Discard), when it expires, and when it
// is dropped or refused at a length limit (maxlen). Without a dead-letter
// exchange it is just settled. With one, it is claimed (q.mu.claimed: no
// longer ready, not yet settled) and handed to the queue's dead-letter
// worker, a goroutine that runs while there is work: it reads the message
// back from the log, makes the new record (death.go), routes it
// through the dead-letter exchange (a missing exchange drops the message,
// as RabbitMQ does), leaves out the target queues that would close a
// cycle without a rejection (a cycle drops the message, as RabbitMQ),
// appends it to the targets' logs and, once every target has stored it,
// settles it in this queue. So dead-lettering is at least once: a crash
// before the targets stored the copy leaves the message in this queue,
// where recovery finds it again (and expires it again, if it expired).
// RabbitMQ's classic queues dead-letter at most once.
//
// A target refusing the copy (its own reject-publish) drops it there.
// The copy is a new record in each target's log: a different queue's log
// cannot share this one's bytes.

// DeadLetterCounters count dead-lettered messages as RabbitMQ's
// rabbitmq_global_messages_dead_lettered_*_total do: by source queue
// type (0 classic, 1 quorum), dead-letter strategy (0 "disabled": the
// queue has no dead-letter exchange and the message is dropped; 1
// "at_most_once": it has one) and reason (rejected, expired, maxlen,
// delivery_limit, in that order). They count where the message dies, on
// the queue's own paths, which are not the publish or deliver paths.
type DeadLetterCounters [2][2][4]atomic.Uint64

// Load returns a counter: quorum or classic, with or without a
// dead-letter exchange, and reason 0 rejected, 1 expired, 2 maxlen, 3
// delivery_limit.
func (c *DeadLetterCounters) Load(quorum, withDLX bool, reason int) uint64 {
	return c[b2i(quorum)][b2i(withDLX)][reason].Load()
}

func (c *DeadLetterCounters) add(quorum, withDLX bool, reason deathReason, n uint64) {
	if c == nil || reason < reasonRejected || reason > reasonDeliveryLimit || n == 0 {
		return
	}
	c[b2i(quorum)][b2i(withDLX)][reason-reasonRejected].Add(n)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// dlWork is dead-lettering to do.
type dlWork struct {
	r      idRange // claimed message ids, when rec is nil
	rec    []byte  // a refused publish's record (not in the log)
	reason deathReason
}

// dlBatch is how many messages the worker has in flight at a time.
const dlBatch = 256

// deadFn returns what to do with ready (or unacked) messages that die for
// reason: claim and dead-letter them, or settle them when the queue has
// no dead-letter exchange.
// REQUIRES: q.mu held while the returned function is called.
func (q *Queue) deadFn(reason deathReason) func(r idRange) {
	if !q.config().hasDLX {
		return func(r idRange) {
			q.env.DeadLettered.add(q.Quorum(), false, reason, r.hi-r.lo)
			q.mu.settled.AddRange(r.lo, r.hi)
			q.markDirtyLocked()
		}
	}
	return func(r idRange) {
		q.env.DeadLettered.add(q.Quorum(), true, reason, r.hi-r.lo)
		q.mu.claimed.AddRange(r.lo, r.hi)
		if n := len(q.mu.dl); n > 0 && q.mu.dl[n-1].rec == nil && q.mu.dl[n-1].reason == reason && q.mu.dl[n-1].r.hi == r.lo {
			q.mu.dl[n-1].r.hi = r.hi
		} else {
			q.mu.dl = append(q.mu.dl, dlWork{r: r, reason: reason})
			q.mu.dlQueued++
		}
		q.startDeadLetterLocked()
	}
}

// deadRecordLocked dead-letters a refused publish's record (without the
// entry size).
// REQUIRES: q.mu held.
func (q *Queue) deadRecordLocked(rec []byte, reason deathReason) {
	q.env.DeadLettered.add(q.Quorum(), true, reason, 1)
	q.mu.dl = append(q.mu.dl, dlWork{rec: rec, reason: reason})
	q.mu.dlQueued++
	q.startDeadLetterLocked()
}

// startDeadLetterLocked starts the dead-letter worker unless it runs.
// REQUIRES: q.mu held.
func (q *Queue) startDeadLetterLocked() {
	if q.mu.dlRunning || q.mu.closed {
		return
	}
	q.mu.dlRunning = true
	done := make(chan struct{})
	q.mu.dlDone = done
	go pprof.Do(context.Background(), pprof.Labels("queue-dead-letter", q.def.VHost+"/"+q.def.Name),
		func(context.Context) { q.deadLetterLoop(done) })
}

// deadLetterLoop is the dead-letter worker; it exits (closing done) when
// there is nothing left to do or the queue closes (what it had not done
// stays claimed, unsettled: after a restart it is found again).
func (q *Queue) deadLetterLoop(done chan struct{}) {
	defer close(done)
	var cr chunkReader
	cr.s = q.log
	defer cr.close()
	br := bodyReader{q: q}
	defer br.cr.close()
	var batch []dlWork
	var settle []idRange
	var wg sync.WaitGroup
	var dst []string
	var finished uint64 // items of the last batch taken whole
	for {
		q.mu.Lock()
		for _, r := range settle {
			q.mu.claimed.RemoveRange(r.lo, r.hi)
			q.mu.settled.AddRange(r.lo, r.hi)
		}
		if len(settle) > 0 {
			q.markDirtyLocked()
		}
		settle = settle[:0]
		q.mu.dlFinished += finished
		finished = 0
		ready := q.takeDLWaitersLocked()
		if q.mu.closed || len(q.mu.dl) == 0 {
			q.mu.dlRunning = false
			q.mu.Unlock()
			runDLWaiters(ready)
			return
		}
		batch = batch[:0]
		for n := 0; n < dlBatch && len(q.mu.dl) > 0; {
			w := &q.mu.dl[0]
			if w.rec != nil {
				batch = append(batch, *w)
				q.mu.dl = q.mu.dl[1:]
				finished++
				n++
				continue
			}
			take := *w
			if k := uint64(dlBatch - n); w.r.hi-w.r.lo > k {
				take.r.hi = w.r.lo + k
				w.r.lo = take.r.hi
			} else {
				q.mu.dl = q.mu.dl[1:]
				finished++
			}
			batch = append(batch, take)
			n += int(take.r.hi - take.r.lo)
		}
		if len(q.mu.dl) == 0 {
			q.mu.dl = nil
		}
		cfg := q.config()
		q.mu.Unlock()
		runDLWaiters(ready)

		for _, w := range batch {
			if w.rec != nil {
				if rec, err := parseRecord(w.rec); err == nil {
					dst = q.deadLetterOne(&wg, cfg, rec, w.reason, dst)
				}
				continue
			}
			for id := w.r.lo; id < w.r.hi; id++ {
				raw, found, _, err := cr.record(id)
				if err != nil || !found {
					if err == nil {
						err = errors.New("message missing from the log")
					}
					q.env.Logger.Error("queues: dead-letter: dropping unreadable message", "vhost", q.def.VHost, "queue", q.def.Name, "id", id, "err", err)
					continue
				}
				raw, err = br.resolve(raw)
				var rec record
				if err == nil {
					rec, err = parseRecord(raw)
				}
				if err != nil {
					q.logDropped(id, true, err)
					continue
				}
				dst = q.deadLetterOne(&wg, cfg, rec, w.reason, dst)
			}
			settle = append(settle, w.r)
		}
		wg.Wait()
	}
}

// dlWaiter is a WaitDeadLetters call waiting for the worker to finish
// the first seq items.
type dlWaiter struct {
	seq uint64
	fn  func()
}

// WaitDeadLetters calls fn once the messages this queue has dead-lettered
// so far are stored in their target queues (or dropped there), at once
// when there are none; if the queue shuts down first, when it has. A
// channel that rejects messages waits so before its next basic.get, so
// that it sees its own rejections dead-lettered, as it sees its own
// publishes. fn must not block; it may run on the worker goroutine.
func (q *Queue) WaitDeadLetters(fn func()) {
	q.mu.Lock()
	if q.mu.dlFinished >= q.mu.dlQueued || (q.mu.closed && !q.mu.dlRunning) {
		q.mu.Unlock()
		fn()
		return
	}
	q.mu.dlWaiters = append(q.mu.dlWaiters, dlWaiter{q.mu.dlQueued, fn})
	q.mu.Unlock()
}

// takeDLWaitersLocked removes and returns the waiters whose items are
// finished.
// REQUIRES: q.mu held.
func (q *Queue) takeDLWaitersLocked() []dlWaiter {
	var ready []dlWaiter
	keep := q.mu.dlWaiters[:0]
	for _, w := range q.mu.dlWaiters {
		if w.seq <= q.mu.dlFinished {
			ready = append(ready, w)
		} else {
			keep = append(keep, w)
		}
	}
	clear(q.mu.dlWaiters[len(keep):])
	q.mu.dlWaiters = keep
	return ready
}

func runDLWaiters(ws []dlWaiter) {
	for _, w := range ws {
		w.fn()
	}
}

// deadLetterOne republishes rec, which died for reason, to the
// dead-letter exchange of cfg; wg counts the target queues' appends.
// rec may alias a reader's buffer: it is copied before this returns.
func (q *Queue) deadLetterOne(wg *sync.WaitGroup, cfg *queueConfig, rec record, reason deathReason, dst []string) []string {
	if !cfg.hasDLX {
		return dst // the policy that named it went: drop
	}
	dl, err := buildDeadLetter(rec, q.def.Name, reason, cfg.dlx, cfg.dlrk, cfg.hasDLRK, q.nowMs())
	if err != nil {
		q.env.Logger.Error("queues: dead-letter: cannot rewrite message", "vhost", q.def.VHost, "queue", q.def.Name, "err", err)
		return dst
	}
	names, err := q.env.Broker.RouteDeadLetter(q.def.VHost, cfg.dlx, &dl.route, dst[:0])
	if err != nil {
		return names // no such exchange: dropped (rabbit_amqqueue_process:with_dlx)
	}
	for _, name := range names {
		if reason != reasonRejected && isDeathCycle(name, dl.deaths) {
			if !q.cycleLogged.Swap(true) {
				q.env.Logger.Warn("queues: message dropped: dead-letter cycle without reason 'rejected' (logged once per queue)",
					"vhost", q.def.VHost, "queue", q.def.Name, "target", name)
			}
			continue
		}
		tq, err := q.env.Broker.Queue(q.def.VHost, name)
		if err != nil {
			continue
		}
		wg.Add(1)
		tq.Publish(dl.rec, dl.persistent, func(err error) {
			if err != nil && !errors.Is(err, ErrRejectPublish) && !errors.Is(err, qerr.ErrNotFound) {
				q.env.Logger.Error("queues: dead-letter: publish", "vhost", q.def.VHost, "queue", q.def.Name, "target", name, "err", err)
			}
			wg.Done()
		})
	}
	return names
}
