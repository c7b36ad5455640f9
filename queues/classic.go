package queues

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/warren-mq/warren/osiris"
)

// A classic queue is a view over its private log:
//
//   - A message's id is its log offset. Offsets that hold no message (the
//     tracking chunks osiris writes at the start of each segment) are
//     settled as the cursor passes them.
//   - tail is the offset after the last message whose append was confirmed
//     (after fsync for durable queues); nothing at or past it is delivered.
//   - cursor is the next offset never handed out; [cursor, tail) holds the
//     ready messages not yet delivered, minus settled ones.
//   - unacked maps the ids delivered and not yet settled to their consumer
//     and delivery count; requeue holds returned ids, delivered again in
//     ascending order (redelivered) before the cursor moves on.
//   - settled is a range set of the offsets that are done: acked,
//     discarded, purged, skipped. The head is its first gap from 0: the
//     lowest offset not settled. Sealed segments wholly below the head
//     are deleted.
//
// ready = len(requeue) + the unsettled messages in [cursor, tail).

// Persisted-state settings.
const (
	// persistInterval is the most the ack state lags behind in the
	// catalog while it changes (and how soon settled segments go).
	persistInterval = 100 * time.Millisecond
)

// Queue is an open classic queue. Its methods are safe for concurrent use.
type Queue struct {
	// Static after open.
	b     *Broker
	def   QueueDef
	owner any // the owning connection of an exclusive queue; nil otherwise
	log   *osiris.Stream
	kick  chan struct{} // cap 1: there may be work for the dispatcher; never closed
	timer *time.Timer   // runs persistTick; armed by scheduleLocked

	// pub batches publishes: one batch is in the log's writer at a time,
	// the next accumulates meanwhile (group commit per queue).
	pub struct {
		sync.Mutex
		idle     sync.Cond // signalled when inflight drops
		cur      *pubBatch // accumulating
		spare    *pubBatch // free, or nil
		inflight bool      // a batch is submitted and not done
		closed   bool      // publishes are refused
	}

	// get is basic.get's reader, used under its lock and closed when idle.
	get struct {
		sync.Mutex
		rd   takeReaders
		d    Delivery
		used bool // a Get since the last idle sweep
		strs strCaches
	}

	persistMu sync.Mutex // serialises persist runs with the final close

	mu struct {
		sync.Mutex
		idle sync.Cond // signalled when delivering clears (Cancel and close wait)

		tail           uint64
		cursor         uint64
		ready          int
		unacked        map[uint64]unackedMsg
		requeue        requeueSet
		settled        rangeSet
		deliveredMark  uint64 // offset after the highest delivered (persisted)
		redeliverBelow uint64 // messages below were delivered before the last restart

		consumers         []*Consumer
		rr                int           // round-robin position
		hadConsumer       bool          // for auto-delete
		exclusiveConsumer bool          // a consumer has exclusive use
		dispatching       bool          // the dispatcher goroutine runs
		dispDone          chan struct{} // closed when that dispatcher exits
		delivering        *Consumer     // reserved by the dispatcher: taking or delivering to it
		waiters           int           // goroutines waiting on idle

		closed      bool // deleted or closing: refuses everything
		dirty       bool // ack state changed since persisted
		timerSet    bool // the persist timer is armed
		persistDone bool // final state written: no more persisting
	}
}

// unackedMsg is a delivered, unsettled message.
type unackedMsg struct {
	c     *Consumer // nil for basic.get
	count uint32    // deliveries so far, this one included
}

func newQueue(b *Broker, def QueueDef, owner any, s *osiris.Stream) *Queue {
	q := &Queue{b: b, def: def, owner: owner, log: s, kick: make(chan struct{}, 1)}
	q.pub.idle.L = &q.pub.Mutex
	q.pub.cur = &pubBatch{q: q}
	q.mu.idle.L = &q.mu.Mutex
	q.mu.unacked = map[uint64]unackedMsg{}
	q.timer = time.AfterFunc(time.Hour, q.persistTick)
	q.timer.Stop()
	return q
}

// Def returns the queue's definition. Its Args must not be modified.
func (q *Queue) Def() QueueDef { return q.def }

// Counts returns the number of ready messages and of consumers.
func (q *Queue) Counts() (ready, consumers int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.mu.ready, len(q.mu.consumers)
}

// CheckOwner returns a 405 *Error when the queue is exclusive to another
// connection than owner (for basic.get, queue.purge, queue.bind...).
func (q *Queue) CheckOwner(owner any) error {
	if q.def.Exclusive && q.owner != owner {
		return errQueueLocked(q.def.VHost, q.def.Name)
	}
	return nil
}

// Kick wakes the queue's dispatcher, e.g. when a channel-wide limit its
// consumers wait on frees a slot. (The queue kicks itself for its own
// acks, and ChannelLimit kicks the queues waiting on it.)
func (q *Queue) Kick() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

func (q *Queue) errGone() error { return errNoQueue(q.def.VHost, q.def.Name) }

// Publish appends a message record (as EncodeRecord makes it) to the
// queue and calls done once it is stored (after fsync for durable queues)
// or has failed. rec must not change until done is called. done must not
// block; it may run on the log's writer goroutine. Publishes that arrive
// while a write is in flight are written together with the next one.
func (q *Queue) Publish(rec []byte, persistent bool, done func(error)) {
	if err := checkEntry(rec); err != nil {
		done(err)
		return
	}
	var filter []byte
	if !persistent && q.def.Durable {
		filter = transientFilter
	}
	q.pub.Lock()
	if q.pub.closed {
		q.pub.Unlock()
		done(q.errGone())
		return
	}
	pb := q.pub.cur
	pb.batch.Messages = append(pb.batch.Messages, osiris.Message{Entry: rec, Filter: filter})
	pb.dones = append(pb.dones, done)
	if q.pub.inflight {
		q.pub.Unlock()
		return
	}
	q.pub.inflight = true
	q.pub.cur = q.pub.spare
	if q.pub.cur == nil {
		q.pub.cur = &pubBatch{q: q}
	}
	q.pub.spare = nil
	q.pub.Unlock()
	pb.submit()
}

// pubBatch is a batch of publishes with their done callbacks.
type pubBatch struct {
	q      *Queue
	batch  osiris.Batch
	dones  []func(error)
	doneFn func(osiris.Result) // pb.done, bound once
}

func (pb *pubBatch) submit() {
	if pb.doneFn == nil {
		pb.doneFn = pb.done
	}
	pb.batch.Done = pb.doneFn
	if err := pb.q.log.Submit(&pb.batch); err != nil {
		if errors.Is(err, osiris.ErrClosed) {
			err = pb.q.errGone()
		}
		pb.done(osiris.Result{Err: err})
	}
}

// done runs when the log has stored (or failed) the batch, usually on the
// log's writer goroutine: the messages become ready, the publishers are
// told, and the next accumulated batch goes.
func (pb *pubBatch) done(r osiris.Result) {
	q := pb.q
	if r.Err == nil && r.Written > 0 {
		q.stored(r.LastOffset+1, r.Written)
	}
	for _, d := range pb.dones {
		d(r.Err)
	}
	const keep = 4096 // don't keep a burst's slices forever
	if cap(pb.dones) > keep {
		pb.dones, pb.batch.Messages = nil, nil
	} else {
		clear(pb.dones)
		clear(pb.batch.Messages)
		pb.dones, pb.batch.Messages = pb.dones[:0], pb.batch.Messages[:0]
	}
	q.pub.Lock()
	if next := q.pub.cur; len(next.batch.Messages) > 0 {
		q.pub.cur = pb
		q.pub.Unlock()
		next.submit()
		return
	}
	q.pub.spare = pb
	q.pub.inflight = false
	q.pub.idle.Broadcast()
	q.pub.Unlock()
}

// stored makes the messages up to tail ready.
func (q *Queue) stored(tail uint64, n int) {
	q.mu.Lock()
	if tail > q.mu.tail {
		q.mu.tail = tail
	}
	q.mu.ready += n
	wake := q.mu.dispatching
	q.mu.Unlock()
	if wake {
		q.Kick()
	}
}

// closePublishing refuses new publishes and waits for those in flight.
func (q *Queue) closePublishing() {
	q.pub.Lock()
	q.pub.closed = true
	for q.pub.inflight {
		q.pub.idle.Wait()
	}
	q.pub.Unlock()
}

// Get takes one ready message for basic.get and calls fn with it (without
// a queue lock held); it reports false when there is none. owner is the
// connection: an exclusive queue refuses others (405), a deleted queue is
// 404. With noAck the message is settled at once; otherwise it waits for
// Ack, Requeue or Discard with the delivery's ID. Delivery.MessageCount is
// the number of ready messages left.
func (q *Queue) Get(owner any, noAck bool, fn func(*Delivery)) (bool, error) {
	if err := q.CheckOwner(owner); err != nil {
		return false, err
	}
	q.get.Lock()
	defer q.get.Unlock()
	q.mu.Lock()
	if q.mu.closed {
		q.mu.Unlock()
		return false, q.errGone()
	}
	if q.mu.ready == 0 {
		q.mu.Unlock()
		return false, nil
	}
	q.mu.Unlock()
	q.get.rd.init(q.log)
	t, ok, err := q.take(&q.get.rd)
	if err != nil {
		q.b.log.Error("queues: basic.get", "vhost", q.def.VHost, "queue", q.def.Name, "err", err)
		return false, Errorf(CodeInternalError, "basic.get from %s: %v", rs("queue", q.def.Name, q.def.VHost), err)
	}
	if !ok {
		return false, nil
	}
	// q.mu is held (take).
	if noAck {
		q.settleLocked(t.id)
	} else {
		q.mu.unacked[t.id] = unackedMsg{nil, t.count + 1}
	}
	q.noteDeliveredLocked(t.id)
	left := q.mu.ready
	q.get.used = true
	q.scheduleLocked() // the idle sweep closes the reader
	q.mu.Unlock()
	d := &q.get.d
	q.get.strs.fill(d, q, "", &t)
	d.MessageCount = uint32(left)
	fn(d)
	return true, nil
}

// Ack settles delivered messages. Unknown ids are ignored (the front end
// checks delivery tags).
func (q *Queue) Ack(ids ...uint64) { q.settleDelivered(ids) }

// Discard settles delivered messages that were rejected or nacked without
// requeue.
func (q *Queue) Discard(ids ...uint64) {
	// Dead-lettering (x-dead-letter-exchange, reason "rejected") hooks in
	// here: the ids are read back from the log and republished through
	// the dead-letter exchange before they are settled.
	q.settleDelivered(ids)
}

func (q *Queue) settleDelivered(ids []uint64) {
	q.mu.Lock()
	n := 0
	for _, id := range ids {
		u, ok := q.mu.unacked[id]
		if !ok {
			continue
		}
		delete(q.mu.unacked, id)
		q.releaseLocked(u.c)
		q.mu.settled.add(id)
		n++
	}
	if n > 0 {
		q.markDirtyLocked()
	}
	wake := n > 0 && q.mu.dispatching && q.mu.ready > 0
	q.mu.Unlock()
	if wake {
		q.Kick()
	}
}

// Requeue returns delivered messages to the queue. They are delivered
// again, redelivered, in their original order before any message that was
// never delivered.
func (q *Queue) Requeue(ids ...uint64) {
	q.mu.Lock()
	n := 0
	for _, id := range ids {
		u, ok := q.mu.unacked[id]
		if !ok {
			continue
		}
		delete(q.mu.unacked, id)
		q.releaseLocked(u.c)
		q.mu.requeue.add(reqEntry{id, u.count})
		q.mu.ready++
		n++
	}
	wake := n > 0 && q.mu.dispatching
	q.mu.Unlock()
	if wake {
		q.Kick()
	}
}

// Purge drops the ready messages (not the delivered, unacked ones) and
// returns how many there were.
func (q *Queue) Purge() (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.closed {
		return 0, q.errGone()
	}
	n := q.mu.ready
	if q.mu.cursor < q.mu.tail {
		q.mu.settled.addRange(q.mu.cursor, q.mu.tail)
		q.mu.cursor = q.mu.tail
	}
	for _, e := range q.mu.requeue.entries() {
		q.mu.settled.add(e.id)
	}
	q.mu.requeue.clear()
	q.mu.ready = 0
	q.markDirtyLocked()
	return n, nil
}

// settleLocked marks id done.
// REQUIRES: q.mu held.
func (q *Queue) settleLocked(id uint64) {
	q.mu.settled.add(id)
	q.markDirtyLocked()
}

// noteDeliveredLocked raises the delivered mark past id.
// REQUIRES: q.mu held.
func (q *Queue) noteDeliveredLocked(id uint64) {
	if id >= q.mu.deliveredMark {
		q.mu.deliveredMark = id + 1
		q.markDirtyLocked()
	}
}

// markDirtyLocked notes a change of the ack state and arms the persist
// timer.
// REQUIRES: q.mu held.
func (q *Queue) markDirtyLocked() {
	q.mu.dirty = true
	q.scheduleLocked()
}

// scheduleLocked arms the persist timer unless it is armed.
// REQUIRES: q.mu held.
func (q *Queue) scheduleLocked() {
	if !q.mu.timerSet && !q.mu.persistDone {
		q.mu.timerSet = true
		q.timer.Reset(persistInterval)
	}
}

// beginShutdown marks the queue closed (refusing consumers, gets and
// purges) unless ifUnused or ifEmpty refuse; it returns the ready count.
func (q *Queue) beginShutdown(ifUnused, ifEmpty bool) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.mu.closed:
		return 0, q.errGone()
	case ifUnused && len(q.mu.consumers) > 0:
		return 0, Errorf(CodePreconditionFailed, "%s in use", rs("queue", q.def.Name, q.def.VHost))
	case ifEmpty && q.mu.ready > 0:
		return 0, Errorf(CodePreconditionFailed, "%s not empty", rs("queue", q.def.Name, q.def.VHost))
	}
	q.mu.closed = true
	return q.mu.ready, nil
}

// finishShutdown ends a queue after beginShutdown: its consumers are
// cancelled (and told, when deleted), the dispatcher stops, publishes in
// flight finish, and then the log is closed with the ack state persisted,
// or deleted with it.
func (q *Queue) finishShutdown(deleted bool) error {
	q.mu.Lock()
	consumers := q.mu.consumers
	q.mu.consumers = nil
	for _, c := range consumers {
		c.cancelled = true
	}
	for q.mu.delivering != nil {
		q.mu.waiters++
		q.mu.idle.Wait()
		q.mu.waiters--
	}
	done := q.mu.dispDone
	q.mu.Unlock()
	q.Kick()
	if done != nil {
		<-done
	}
	if deleted {
		for _, c := range consumers {
			c.sink.Cancelled(q, c.tag)
		}
	}
	q.closePublishing()
	q.get.Lock()
	q.get.rd.close()
	q.get.Unlock()

	q.persistMu.Lock()
	defer q.persistMu.Unlock()
	q.timer.Stop()
	var errs []error
	if !deleted && q.def.Durable {
		errs = append(errs, q.writeAckState(true))
	}
	q.mu.Lock()
	q.mu.persistDone = true
	q.mu.Unlock()
	if deleted || !q.def.Durable {
		errs = append(errs, q.log.Delete())
		if q.def.Durable {
			errs = append(errs, q.b.cat.delete(ackKey(q.def.ID)))
		}
	} else {
		errs = append(errs, q.log.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("queues: close %s: %w", rs("queue", q.def.Name, q.def.VHost), err)
	}
	return nil
}
