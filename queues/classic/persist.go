package classic

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/queues/qerr"
)

// Persisting the ack state of durable queues.
//
// Besides its log, a durable queue must remember across a crash what
// changes with every delivery and ack: its settled ranges, its delivered
// mark and, for a quorum queue, delivery counts (the format is in the
// package doc, doc.go). The state is kept in memory and written to the
// catalog by the broker's persister, one goroutine that writes the state
// of every queue that changed in one pebble batch committed with sync, at
// most persistInterval after the change (at once after a quiet spell). An
// ack is on disk within about persistInterval plus one fsync, however many
// queues there are, for one small synced write per interval for the whole
// broker. (A write without sync would not do: pebble keeps an unsynced
// write in its own buffer until 32 KiB accumulate, so a killed process
// loses it.)
//
// Two things must be on disk before they happen rather than after: a
// delivery, so that a message delivered before a crash comes back with
// the redelivered flag, and, in a quorum queue, a redelivery, so that
// x-delivery-count never goes back. A synced write per message would cost
// too much; the persister reserves ahead instead:
//
//   - The delivered mark on disk is a reservation: every message below it
//     may have been delivered. A taker delivers a message for the first
//     time only below q.mu.markSafe, the reservation known to be on disk.
//     While the queue is in use the reservation runs about two intervals
//     of deliveries ahead of the exact mark (markStrideLocked), renewed
//     early when deliveries come within half a stride of it, so takers
//     wait only when the delivery rate jumps. The next write of an unused
//     queue brings it back to the exact mark: after a crash, messages
//     below the mark come back redelivered, and no others.
//   - While a quorum queue has consumers, its requeued messages are
//     written with one delivery more than they had, and one may be
//     redelivered only once such a write has landed (its seq below
//     q.mu.reqCovered). After a crash a count is never below the
//     deliveries that happened; it is exact for messages that were not
//     moving.
//
// Lowering a bound (the reservation, the requeue coverage) takes effect
// when the state is encoded, raising it when the write has landed: a
// taker never goes past what is on disk, whichever of the old and the new
// state a crash leaves there.
//
// A LogState queue (a replicated quorum queue) keeps its ack state in
// its own log instead, as osiris tracking (Stream.StoreState), so that
// its replicas hold it and a replica promoted to leader recovers from
// it. The flush encodes it as any other and hands it to the log; its
// bounds are raised when the log reports the state as durable as its
// messages (committed, on a replicated log: "on disk" above means that),
// in StoreState's callback. The flush waits for those writes, a bounded
// time (logStateWait), alongside its pebble batch. Ordering needs no
// more than for the catalog: the log's writer applies StoreStates in the
// order they were issued, and they are issued under flushMu in the order
// encoded, so an older state never lands after a newer one. A write
// that did not land within logStateWait lands (or fails) later by
// itself; until it has, the queue is not encoded again
// (Queue.mu.stateWriting), so that the state that raises the bounds is
// always the newest encoded.
//
// Lock order: Queue.persistMu → Persister.flushMu → Queue.mu →
// Persister.mu.

// Reservation settings.
const (
	// minMarkStride and maxMarkStride bound how far the delivered mark
	// is reserved ahead of the deliveries of a queue in use.
	minMarkStride = 256
	maxMarkStride = 1 << 18

	// logStateWait bounds how long a flush, or a closing queue, waits
	// for a LogState queue's state to land in its log (a replicated log
	// without a majority commits nothing).
	logStateWait = 2 * time.Second
)

// errPersistWait is take's answer when the next message may go out only
// after the persister has written the queue's state; the persister kicks
// the queue (and closes the channel hurry returned) when it has.
var errPersistWait = errors.New("queues: delivery waits for the ack state to be persisted")

// Persister writes the ack state of the durable queues of one broker (see
// above): one per broker, shared through Env.
type Persister struct {
	db   *pebble.DB
	log  *slog.Logger
	wake chan struct{} // cap 1: there is work, or closing
	done chan struct{} // closed when run exits

	// flushMu serialises writes of queue states: flushes, and a queue's
	// final write or deletion, so that an older state never lands after
	// a newer one.
	flushMu sync.Mutex
	buf     []byte    // encoding scratch, under flushMu
	retryAt time.Time // after a failed flush: no urgent flush before; owned by run

	// covered is when the last flush that landed began (Unix
	// nanoseconds; 0 before the first): see Covered.
	covered atomic.Int64

	mu struct {
		sync.Mutex
		dirty  []*Queue // queues whose state changed since encoded
		urgent bool     // a taker waits: flush now
		// next is closed when the first flush that starts after it was
		// taken has landed (or failed).
		next   chan struct{}
		closed bool
	}
}

// NewPersister starts the persister of the queues whose ack states are
// kept in db (the broker's catalog). Close stops it.
func NewPersister(db *pebble.DB, log *slog.Logger) *Persister {
	p := &Persister{db: db, log: log, wake: make(chan struct{}, 1), done: make(chan struct{})}
	p.mu.next = make(chan struct{})
	go pprof.Do(context.Background(), pprof.Labels("queues", "persister"), func(context.Context) { p.run() })
	return p
}

func (p *Persister) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// add queues q for the next flush.
// REQUIRES: q.mu held; q is durable and not already queued (q.mu.dirty).
func (p *Persister) add(q *Queue) {
	p.mu.Lock()
	p.mu.dirty = append(p.mu.dirty, q)
	first := len(p.mu.dirty) == 1
	p.mu.Unlock()
	if first {
		p.signal()
	}
}

// hurry asks for a flush now and returns a channel closed when a flush
// that started after the call has landed.
func (p *Persister) hurry() <-chan struct{} {
	p.mu.Lock()
	p.mu.urgent = true
	ch := p.mu.next
	p.mu.Unlock()
	p.signal()
	return ch
}

// run is the persister goroutine: it flushes when a taker waits, and
// otherwise at most once per persistInterval while queues change.
func (p *Persister) run() {
	defer close(p.done)
	var due time.Time // the earliest regular flush: persistInterval after the last
	t := time.NewTimer(time.Hour)
	t.Stop()
	for {
		p.mu.Lock()
		closed, urgent, pending := p.mu.closed, p.mu.urgent, len(p.mu.dirty) > 0
		p.mu.Unlock()
		now := time.Now()
		if urgent && now.Before(p.retryAt) {
			urgent, pending = false, true // a failure: wait before trying again
			due = p.retryAt
		}
		switch {
		case closed:
			return
		case urgent || (pending && !now.Before(due)):
			due = now.Add(persistInterval)
			p.flush()
		case pending:
			t.Reset(due.Sub(now))
			select {
			case <-t.C:
			case <-p.wake:
				t.Stop()
			}
		default:
			<-p.wake
		}
	}
}

// Close stops the persister, after the queues' FinishShutdown. Queues
// write their final state themselves (final); whatever else is pending
// is dropped, as a crash would.
func (p *Persister) Close() {
	p.mu.Lock()
	p.mu.closed = true
	p.mu.Unlock()
	p.signal()
	<-p.done
	p.mu.Lock()
	close(p.mu.next) // wake any waiter; it finds its queue closed
	p.mu.next = make(chan struct{})
	p.mu.Unlock()
}

// stateWrite is one queue's encoded state in a flush.
type stateWrite struct {
	q     *Queue
	val   []byte
	mark  uint64 // the delivered mark written (a reservation)
	cover uint64 // requeues below this seq were written with one delivery more
}

// Covered is when the last flush that reached the disk began: every
// change to a queue's ack state made before it (an ack applied, a
// delivery reserved) survives a crash. The zero time before the first.
// Tests of crash safety compare it with when acks were applied, and
// Covered's lag behind the clock is the persister's delay.
func (p *Persister) Covered() time.Time {
	n := p.covered.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// flush writes the state of every queue that changed.
func (p *Persister) flush() {
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	// A change made before began marked its queue dirty before the list
	// is taken below, or before the queue's state is encoded: this flush
	// writes it.
	began := time.Now()
	p.mu.Lock()
	qs := p.mu.dirty
	p.mu.dirty = nil
	p.mu.urgent = false
	landed := p.mu.next
	p.mu.next = make(chan struct{})
	p.mu.Unlock()
	defer close(landed)

	batch := p.db.NewBatch()
	defer batch.Close()
	ws := make([]stateWrite, 0, len(qs))
	var logs []stateWrite // LogState queues: written to their own logs
	skipped := false      // a LogState queue's previous write has not landed
	buf := p.buf[:0]
	for _, q := range qs {
		q.mu.Lock()
		if q.mu.persistDone {
			q.mu.Unlock()
			continue
		}
		if q.def.LogState {
			if q.mu.stateWriting {
				// Encode it once that write has landed (see the top
				// of this file); it stays dirty, for a later flush.
				p.add(q)
				skipped = true
				q.mu.Unlock()
				continue
			}
			var w stateWrite
			w.val, w.mark, w.cover = q.encodeStateLocked(nil, false) // the log keeps it
			q.mu.stateWriting = true
			q.mu.Unlock()
			w.q = q
			logs = append(logs, w)
			continue
		}
		start := len(buf)
		var w stateWrite
		buf, w.mark, w.cover = q.encodeStateLocked(buf, false)
		q.mu.Unlock()
		w.q, w.val = q, buf[start:]
		ws = append(ws, w)
	}
	// Issued in the order encoded, under flushMu (see the top of this
	// file); they are written while the batch below commits.
	var logLanded chan error
	if len(logs) > 0 {
		logLanded = make(chan error, len(logs))
	}
	for _, w := range logs {
		done := w.q.logStateDone(w.mark, w.cover, logLanded)
		if err := w.q.log.StoreState(w.val, done); err != nil {
			done(err)
		}
	}
	var err error
	for _, w := range ws {
		if err = batch.Set(AckKey(w.q.def.ID), w.val, nil); err != nil {
			break
		}
	}
	if err == nil && len(ws) > 0 {
		err = batch.Commit(pebble.Sync)
	}
	if err != nil {
		p.failed(ws, err)
	}
	const keep = 1 << 20 // don't hold a burst's buffer forever
	if cap(buf) <= keep {
		p.buf = buf[:0]
	} else {
		p.buf = nil
	}
	if err == nil {
		for _, w := range ws {
			q := w.q
			q.mu.Lock()
			q.landedLocked(w.mark, w.cover)
			wake := q.mu.markWanted
			q.mu.markWanted = false
			q.mu.Unlock()
			if wake {
				q.Kick()
			}
		}
	}
	logsOK := p.waitLogStates(len(logs), logLanded)
	if err == nil && logsOK && !skipped {
		p.covered.Store(began.UnixNano())
	}
}

// waitLogStates waits, at most logStateWait, for the n log writes of a
// flush to land (their callbacks, logStateDone, have raised the bounds
// or kept the queues dirty) and reports whether all did.
// REQUIRES: p.flushMu held; called by run.
func (p *Persister) waitLogStates(n int, landed <-chan error) bool {
	if n == 0 {
		return true
	}
	t := time.NewTimer(logStateWait)
	defer t.Stop()
	var failed int
	var first error
	for range n {
		select {
		case err := <-landed:
			if err != nil {
				failed++
				first = cmp.Or(first, err)
			}
		case <-t.C:
			// The rest land or fail by themselves.
			p.log.Warn("queues: ack state not written to the log in time", "wait", logStateWait)
			p.retryAt = time.Now().Add(persistInterval)
			return false
		}
	}
	if failed > 0 {
		p.log.Error("queues: persist ack state in the log", "queues", failed, "err", first)
		p.retryAt = time.Now().Add(persistInterval)
		return false
	}
	return true
}

// logStateDone returns the callback of the StoreState that writes a
// state of q encoded with delivered mark mark and requeue coverage
// cover: it raises q's bounds once the state has landed, or keeps q
// dirty (retried by a later flush) when it could not be written, as
// failed does; then it sends the outcome to landed, which has room.
// It runs on the log's writer goroutine (or the flush's, for a
// StoreState refused at once).
func (q *Queue) logStateDone(mark, cover uint64, landed chan<- error) func(error) {
	return func(err error) {
		q.mu.Lock()
		q.mu.stateWriting = false
		if err == nil {
			q.landedLocked(mark, cover)
		} else {
			q.markDirtyLocked()
		}
		wake := q.mu.markWanted
		q.mu.markWanted = false
		q.mu.Unlock()
		if wake {
			q.Kick()
		}
		landed <- err
	}
}

// failed handles a flush that could not be written: the queues stay
// dirty and are tried again after persistInterval; their takers keep
// the bounds lowered at encoding.
// REQUIRES: p.flushMu held; called by run.
func (p *Persister) failed(ws []stateWrite, err error) {
	p.log.Error("queues: persist ack state", "queues", len(ws), "err", err)
	p.retryAt = time.Now().Add(persistInterval)
	for _, w := range ws {
		q := w.q
		q.mu.Lock()
		q.markDirtyLocked()
		wake := q.mu.markWanted
		q.mu.markWanted = false
		q.mu.Unlock()
		if wake {
			q.Kick() // a taker asks again: at the next regular flush
		}
	}
}

// final writes q's last state (or deletes it, for a deleted queue) and
// stops its persisting. The queue has no consumers and takes nothing any
// more. A LogState queue writes it to its log, which goes with the queue
// when it is deleted, and which a handoff leaves to the new leader (a
// state written now could not commit: FinishHandoff).
func (p *Persister) final(q *Queue, end ending) error {
	deleted := end == endDelete
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	q.mu.Lock()
	q.mu.persistDone = true
	var val []byte
	if q.def.Durable && !deleted {
		val, _, _ = q.encodeStateLocked(nil, true)
	}
	q.mu.Unlock()
	switch {
	case !q.def.Durable, q.def.LogState && (deleted || end == endHandoff):
		return nil
	case q.def.LogState:
		return q.finalLogState(val)
	case deleted:
		if err := p.db.Delete(AckKey(q.def.ID), pebble.Sync); err != nil {
			return fmt.Errorf("queues: delete ack state of %s: %w", qerr.Resource("queue", q.def.Name, q.def.VHost), err)
		}
		return nil
	}
	if err := p.db.Set(AckKey(q.def.ID), val, pebble.Sync); err != nil {
		return fmt.Errorf("queues: persist ack state of %s: %w", qerr.Resource("queue", q.def.Name, q.def.VHost), err)
	}
	return nil
}

// finalLogState writes a LogState queue's final state to its log and
// waits for it, at most logStateWait. When the log cannot take it (it
// is closed, or no longer the leader) or does not commit it in time,
// the state written last stands: what was settled since comes back (at
// least once), which is no error.
// REQUIRES: p.flushMu held.
func (q *Queue) finalLogState(val []byte) error {
	landed := make(chan error, 1)
	err := q.log.StoreState(val, func(err error) { landed <- err })
	if err == nil {
		t := time.NewTimer(logStateWait)
		defer t.Stop()
		select {
		case err = <-landed:
		case <-t.C:
			q.env.Logger.Warn("queues: final ack state not written to the log in time",
				"vhost", q.def.VHost, "queue", q.def.Name, "wait", logStateWait)
			return nil
		}
	}
	if err == nil || errors.Is(err, osiris.ErrClosed) || errors.Is(err, osiris.ErrNotLeader) {
		return nil
	}
	return fmt.Errorf("queues: persist ack state of %s in its log: %w", qerr.Resource("queue", q.def.Name, q.def.VHost), err)
}

// load reads queue id's ack state, the zero state when it has none.
func (p *Persister) load(id uint64) (ackState, error) {
	val, closer, err := p.db.Get(AckKey(id))
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		return ackState{}, nil
	case err != nil:
		return ackState{}, err
	}
	defer closer.Close()
	return decodeAckState(val)
}

// encodeStateLocked appends the queue's persisted state to dst and
// returns it with the delivered mark and requeue coverage it writes,
// lowering the queue's bounds to them now (see the top of this file).
// A final state is exact: no reservation, no delivery ahead.
// REQUIRES: q.mu held; q durable.
func (q *Queue) encodeStateLocked(dst []byte, final bool) (out []byte, mark, cover uint64) {
	q.mu.dirty = false
	q.mu.renewAsked = false
	now := time.Now()
	inUse := !final && (len(q.mu.consumers) > 0 || q.mu.markWanted || q.mu.deliveredMark != q.mu.markAtFlush)
	mark = q.mu.deliveredMark
	if inUse {
		q.mu.stride = q.markStrideLocked(now)
		mark += q.mu.stride
	}
	q.mu.markAtFlush, q.mu.flushAt = q.mu.deliveredMark, now
	q.mu.markSafe = min(q.mu.markSafe, mark)
	// A quorum queue's requeued messages may go out again before the
	// next write while it has consumers (or a basic.get waits).
	ahead := !final && q.Quorum() && (len(q.mu.consumers) > 0 || q.mu.markWanted)
	if ahead {
		cover = q.mu.reqSeq
	} else {
		q.mu.reqCovered = 0
	}
	if mark > q.mu.deliveredMark && len(q.mu.consumers) == 0 && !final {
		// Write again once unused, to bring the reservation back.
		q.mu.dirty = true
		q.env.Persister.add(q)
	}
	out = q.appendAckStateLocked(dst, mark, ahead)
	return out, mark, cover
}

// landedLocked raises the queue's bounds to what a flush wrote.
// REQUIRES: q.mu held.
func (q *Queue) landedLocked(mark, cover uint64) {
	q.mu.markSafe = mark
	q.mu.reqCovered = max(q.mu.reqCovered, cover)
}

// markStrideLocked is how far ahead of the delivered mark a queue in use
// reserves: twice what it delivered per persistInterval lately.
// REQUIRES: q.mu held.
func (q *Queue) markStrideLocked(now time.Time) uint64 {
	n := float64(q.mu.deliveredMark - q.mu.markAtFlush)
	el := max(now.Sub(q.mu.flushAt), time.Millisecond)
	s := 2 * n * float64(persistInterval) / float64(el)
	switch {
	case math.IsNaN(s) || s < minMarkStride:
		return minMarkStride
	case s > maxMarkStride:
		return maxMarkStride
	}
	return uint64(s)
}

// mayDeliverLocked reports whether the ready message at the head (id,
// requeued or not, with the requeue seq of its entry) may be delivered
// now. When it may not, it asks the persister to write the queue's state
// and notes the wait: the persister kicks the queue when done.
// REQUIRES: q.mu held.
func (q *Queue) mayDeliverLocked(id uint64, req bool, seq uint64) bool {
	switch {
	case !q.def.Durable:
		return true
	case !req && id < q.mu.markSafe:
		return true
	case req && (!q.Quorum() || seq < q.mu.reqCovered):
		return true
	}
	q.mu.markWanted = true
	q.markDirtyLocked()
	q.env.Persister.hurry()
	return false
}

// renewLocked asks for an early write when deliveries come within half
// a stride of the reservation on disk.
// REQUIRES: q.mu held; q durable.
func (q *Queue) renewLocked() {
	if !q.mu.renewAsked && q.mu.deliveredMark+q.mu.stride/2 >= q.mu.markSafe {
		q.mu.renewAsked = true
		q.markDirtyLocked()
		q.env.Persister.hurry()
	}
}

// appendCountsLocked appends a quorum queue's delivery counts
// (appendCounts): every unsettled message delivered twice or more, and
// every requeued one, with one delivery more when ahead. A message
// without an entry below the mark may have been delivered once.
// REQUIRES: q.mu held.
func (q *Queue) appendCountsLocked(dst []byte, ahead bool) []byte {
	var cs []idCount
	if q.mu.unackedMulti > 0 {
		for id, u := range q.mu.unacked {
			if u.count >= 2 {
				cs = append(cs, idCount{id, u.count})
			}
		}
	}
	for p := range q.mu.levels {
		for _, e := range q.mu.levels[p].req.entries() {
			n := e.count
			if ahead {
				n++
			}
			if n >= 2 {
				cs = append(cs, idCount{e.id, n})
			}
		}
	}
	slices.SortFunc(cs, func(a, b idCount) int { return cmp.Compare(a.id, b.id) })
	return appendCounts(dst, cs)
}
