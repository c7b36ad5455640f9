package classic

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warren-mq/warren/internal/rangeset"
	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/queues/qerr"
)

// A classic queue is a view over its private log:
//
//   - A message's id is its log offset. Offsets that hold no message
//     (tracking chunks: the snapshot that starts a segment once the log
//     has tracking, and a LogState queue's ack state, persist.go) are
//     settled when the batch after them is stored (batchIDs), so the
//     head passes them.
//   - tail is the offset after the last message whose append was confirmed
//     (after fsync for durable queues); nothing at or past it is delivered.
//   - The ready messages are in levels (ready.go): per priority, the
//     requeued ones and spans of fresh ones; a queue without
//     x-max-priority has one level, whose fresh spans are a cursor moving
//     over the log.
//   - unacked maps the ids delivered and not yet settled to their consumer,
//     delivery count, size, priority and expiry; a requeued id goes back to
//     its level, delivered again in ascending order (redelivered) before
//     that level's fresh messages.
//   - claimed holds the ids taken off the ready set to be dead-lettered,
//     not yet settled (dlx.go).
//   - settled is a range set of the offsets that are done: acked,
//     discarded, dead-lettered, expired, dropped, purged, skipped. The head
//     is its first gap from 0: the lowest offset not settled. Sealed
//     segments wholly below the head are deleted.
//
// TTL and x-expires are in ttl.go, length limits in limits.go, the
// settings (arguments and policy) in config.go.

// Queue types: Def.Type.
const (
	TypeClassic = "classic" // x-queue-type classic (or none)
	TypeQuorum  = "quorum"  // x-queue-type quorum (quorum.go)
)

// Def is a queue as declared.
type Def struct {
	VHost      string
	Name       string
	ID         uint64 // the log's directory id
	Type       string // TypeClassic or TypeQuorum
	Durable    bool
	Exclusive  bool
	AutoDelete bool
	Args       map[string]any
	// LogState keeps the queue's ack state in its log, as osiris
	// tracking (osiris.Stream.StoreState), not in the catalog: set for
	// replicated quorum queues, whose log the members replicate, so that
	// a member promoted to leader recovers the ack state from its copy
	// (persist.go). It requires Durable. Such a queue's records are
	// self-contained (no fan-out by reference: the body log is the
	// node's own).
	LogState bool
}

// Message is a message published to queues.
type Message struct {
	Exchange   string
	RoutingKey string
	// Props are the AMQP 0-9-1 content-header properties exactly as they
	// go to consumers: property flags (u16) followed by the values.
	Props []byte
	// AMQP10Props is the properties section of a message published over
	// AMQP 1.0, kept beside Props when it holds what 0-9-1 properties
	// cannot (to, subject, absolute-expiry-time, group-sequence,
	// reply-to-group-id), so AMQP 1.0 consumers get it back as sent, as
	// RabbitMQ 4.x keeps the 1.0 message; nil otherwise.
	AMQP10Props []byte
	Body        []byte
	Persistent  bool // delivery-mode 2
}

// Delivery is a message handed to a consumer or to basic.get. Its slices
// are valid only during the call that receives it.
type Delivery struct {
	Queue *Queue
	// Stream is set instead of Queue for a record a stream consumer
	// (package queues) read: it settles the delivery (settling gives
	// credit back), ID is the record's offset, Body an AMQP 1.0 message
	// (the front end converts it) and RoutingKey the stream's name, for
	// records that carry no routing key of their own.
	Stream Settler
	// History is set, with Stream, for a record a queue's history reader
	// read (history.go): the message fields are as for Queue (a queue
	// record, not an AMQP 1.0 message), ID is the record's offset, and
	// Props carry it as the x-stream-offset header.
	History bool
	// Via is set instead of Queue for a message of a queue another node
	// runs, delivered through the proxy (package queues): it settles the
	// delivery; the message fields are as for Queue, Props final (the
	// node running the queue merged its annotations and delivery count).
	Via           Settler
	ConsumerTag   string
	ID            uint64 // the message's id in the queue, for Ack/Requeue/Discard
	Redelivered   bool
	DeliveryCount uint32 // times delivered before
	// Annotations are headers added to the message since it was stored
	// (an AMQP 1.0 modified outcome on a quorum queue): DeliveryProps
	// and AnnotatedProps merge them into Props.
	Annotations []HeaderEntry
	// AMQP10Props is Message.AMQP10Props of the stored message.
	AMQP10Props  []byte
	Exchange     string
	RoutingKey   string
	Props        []byte
	Body         []byte
	MessageCount uint32 // basic.get: ready messages left after this one
}

// Settler is where deliveries are settled: a classic or quorum queue, or
// the stream consumer that read them from a stream. ids are Delivery.IDs.
type Settler interface {
	Ack(ids ...uint64)
	Requeue(ids ...uint64)
	// Release requeues without counting the delivery toward a quorum
	// queue's delivery limit or x-delivery-count: AMQP 1.0's released
	// outcome, and modified without delivery-failed (RabbitMQ 4.x).
	Release(ids ...uint64)
	Discard(ids ...uint64)
}

var _ Settler = (*Queue)(nil)

// Settler returns where d is settled: its stream consumer, or its queue.
func (d *Delivery) Settler() Settler {
	if d.Stream != nil {
		return d.Stream
	}
	if d.Via != nil {
		return d.Via
	}
	return d.Queue
}

// Sink receives a consumer's deliveries.
type Sink interface {
	// Deliver is called by the queue (never with a queue lock held) for
	// each message given to the consumer, in queue order. It is called
	// from the queue's dispatcher goroutine, one call at a time per queue.
	Deliver(d *Delivery)
	// Cancelled is called when the queue ends the consumer itself (the
	// queue was deleted).
	Cancelled(q *Queue, tag string)
}

// ConsumerOptions is a basic.consume.
type ConsumerOptions struct {
	Tag       string
	NoAck     bool
	Exclusive bool
	Prefetch  int           // unacked deliveries allowed to this consumer; 0: unlimited
	Channel   *ChannelLimit // optional shared channel limit
	Owner     any           // the connection, for exclusive queues
	Sink      Sink
	// Priority is x-priority: consumers with room of the highest priority
	// are served first, round robin among equals.
	Priority int
	// Credited makes the consumer's room link credit, as an AMQP 1.0
	// receiver grants it: Credit deliveries, each taking one however
	// many are unacked, and settling gives none back; Prefetch and
	// Channel are ignored. SetCredit and DrainCredit change it.
	Credited bool
	Credit   int
	// Match, when set, selects a stream consumer's records one by one
	// (after the chunk Bloom filter): a record it rejects is skipped
	// without taking credit, as rabbit_stream_queue skips the messages
	// an AMQP 1.0 receiver's filter expressions reject. It is called on
	// the consumer's goroutine with the record (an AMQP 1.0 message),
	// which it must not keep. Classic and quorum queues ignore it.
	Match func(record []byte) bool
}

// NoQueueError is the 404 of a missing (or deleted) queue.
func NoQueueError(vhost, name string) *qerr.Error {
	return qerr.Errorf(qerr.CodeNotFound, "no %s", qerr.Resource("queue", name, vhost))
}

// LockedError is the 405 of an exclusive queue used by another
// connection than its owner.
func LockedError(vhost, name string) *qerr.Error {
	return qerr.Errorf(qerr.CodeResourceLocked, "cannot obtain exclusive access to locked %s. It could be originally "+
		"declared on another connection or the exclusive property value does not match that of the original declaration.",
		qerr.Resource("queue", name, vhost))
}

// Persisted-state settings.
const (
	// persistInterval is the most the ack state lags behind in the
	// catalog while it changes (and how soon settled segments go).
	persistInterval = 100 * time.Millisecond
)

// Queue is an open classic queue. Its methods are safe for concurrent use.
type Queue struct {
	// Static after open.
	env   *Env // the broker's side (env.go)
	def   Def
	owner any // the owning connection of an exclusive queue; nil otherwise
	log   *osiris.Stream
	kick  chan struct{} // cap 1: there may be work for the dispatcher; never closed
	timer *time.Timer   // runs persistTick (the sweep); armed by scheduleLocked
	// maxPrio is the highest priority level (0: no priorities).
	maxPrio int

	// cfg is the effective settings (config.go); replaced whole.
	cfg atomic.Pointer[queueConfig]
	// cycleLogged: a dead-letter cycle drop was logged.
	cycleLogged atomic.Bool
	// histReaders counts the attached history readers (history.go).
	histReaders atomic.Int64
	// refsUnsynced: a batch of references only was written without an
	// fsync since the last SyncRefs (refs.go).
	refsUnsynced atomic.Bool
	// journalFloor: the sweep keeps the log from this offset on, where a
	// rebuild of lost references looks for the last one the log kept
	// (refs.go); noFloor when the queue has taken no reference.
	journalFloor atomic.Uint64
	// ttlTimer runs ttlTick, expTimer expiresTick; created lazily and
	// armed under mu.
	ttlTimer *time.Timer
	expTimer *time.Timer

	// pub batches publishes: one batch is in the log's writer at a time,
	// the next accumulates meanwhile (group commit per queue).
	pub struct {
		sync.Mutex
		idle     sync.Cond // signalled when inflight drops
		cur      *pubBatch // accumulating
		spare    *pubBatch // free, or nil
		flying   *pubBatch // the batch submitted and not done, or nil
		inflight bool      // a batch is submitted and not done
		closed   bool      // publishes are refused
		// gate is the vhost's body log once the queue has taken a
		// reference record (PublishRef); refs counts them; refLow is
		// what RefLow last found (refs.go).
		gate       BodyGate
		refs       uint64
		refLow     refLowCache
		refWaiters int // RefsWritten calls waiting on idle
	}

	// get is basic.get's reader, used under its lock and closed when idle.
	get struct {
		sync.Mutex
		rd   takeReaders
		d    Delivery
		used bool // a Get since the last idle sweep
		strs strCaches
	}

	persistMu sync.Mutex // serialises sweeps with the final close

	mu struct {
		sync.Mutex
		idle sync.Cond // signalled when delivering clears (Cancel and close wait)

		tail           uint64
		levels         []level // ready messages by priority
		ready          int     // ready messages
		readyBytes     int64   // their body bytes (those whose size is known)
		unacked        map[uint64]unackedMsg
		settled        rangeset.Set
		claimed        rangeset.Set // taken off ready to be dead-lettered, not settled
		deliveredMark  uint64       // offset after the highest delivered
		redeliverBelow uint64       // messages below were delivered before the last restart
		unackedMulti   int          // unacked entries with count >= 2
		// anns are the headers an AMQP 1.0 modified outcome added to a
		// quorum queue's messages (Annotate), by id, kept while the
		// message is in the queue; nil when none. Not persisted.
		anns map[uint64][]HeaderEntry

		// The ack state's persisting (persist.go).
		markSafe    uint64    // the delivered mark on disk: fresh messages below it may go out
		markAtFlush uint64    // deliveredMark when the state was last encoded
		flushAt     time.Time // and when
		stride      uint64    // the reservation's distance ahead of deliveredMark
		renewAsked  bool      // an early write of the reservation is asked for
		markWanted  bool      // a taker waits for a write: kick when it lands
		reqSeq      uint64    // the next requeue's seq
		reqCovered  uint64    // requeues below this seq may go out again (quorum)

		expq     expiryHeap // expiries of ready messages
		expqNext int        // expq size that next triggers a compaction
		zeros    []idRange  // TTL-0 messages that may be ready
		ttlArmed bool       // ttlTimer is armed for ttlAt
		ttlAt    int64
		lastUsed int64 // for x-expires, Unix ms

		pendPub   int   // publishes admitted under a reject overflow, not stored
		pendBytes int64 // their body bytes

		dl        []dlWork // dead-lettering to do
		dlRunning bool     // the dead-letter worker runs
		dlDone    chan struct{}
		// dlQueued counts the dlWork items ever appended to dl, dlFinished
		// those the worker has finished; dlWaiters wait for a count
		// (WaitDeadLetters).
		dlQueued, dlFinished uint64
		dlWaiters            []dlWaiter

		consumers         []*Consumer
		rr                int           // round-robin position
		hadConsumer       bool          // for auto-delete
		exclusiveConsumer bool          // a consumer has exclusive use
		active            *Consumer     // x-single-active-consumer: the one served (sac.go)
		dispatching       bool          // the dispatcher goroutine runs
		dispDone          chan struct{} // closed when that dispatcher exits
		delivering        *Consumer     // reserved by the dispatcher: taking or delivering to it
		waiters           int           // goroutines waiting on idle

		unackedBytes int64 // body bytes of the unacked messages
		counts       Counters

		closed bool // deleted or closing: refuses everything
		dirty  bool // ack state changed since encoded: queued in the persister
		// stateWriting: a LogState queue's encoded state is being
		// written to its log (StoreState) and has not landed yet.
		stateWriting bool
		timerSet     bool // the sweep timer is armed
		persistDone  bool // final state written: no more persisting
	}
}

// unackedMsg is a delivered, unsettled message.
type unackedMsg struct {
	c     *Consumer // nil for basic.get
	count uint32    // deliveries so far, this one included (see acquiredFlag)
	size  uint32    // body size
	prio  uint8     // level
	exp   int64     // expiry instant, kept for a requeue; noExpiry
}

func newQueue(env *Env, def Def, owner any, s *osiris.Stream) *Queue {
	q := &Queue{env: env, def: def, owner: owner, log: s, kick: make(chan struct{}, 1)}
	q.maxPrio = maxPriorityOf(def.Args)
	q.pub.idle.L = &q.pub.Mutex
	q.pub.cur = &pubBatch{q: q}
	q.mu.idle.L = &q.mu.Mutex
	q.mu.unacked = map[uint64]unackedMsg{}
	q.mu.levels = make([]level, q.maxPrio+1)
	q.cfg.Store(q.resolveConfig())
	q.journalFloor.Store(noFloor)
	q.mu.lastUsed = q.nowMs()
	q.timer = time.AfterFunc(time.Hour, q.persistTick)
	q.timer.Stop()
	return q
}

// New returns a new queue over its new log s; owner is the connection
// an exclusive queue belongs to (nil otherwise). The queue owns s from
// now on. (A new log may start with a tracking chunk: nothing below its
// end is a message.)
func New(env *Env, def Def, owner any, s *osiris.Stream) *Queue {
	q := newQueue(env, def, owner, s)
	next := s.Stats().NextOffset
	q.mu.settled.AddRange(0, next)
	q.mu.tail = next
	return q
}

// Recover returns a reopened durable queue over its log s, its state
// rebuilt from its ack state and the log (recover.go). journalFloor is
// where the broker's last journal checkpoint found the log's end, for
// a queue it lists (SetJournalFloor); NoJournalFloor otherwise. The
// queue owns s when Recover succeeds; the caller closes it when it
// fails.
func Recover(env *Env, def Def, s *osiris.Stream, journalFloor uint64) (*Queue, error) {
	q := newQueue(env, def, nil, s)
	q.journalFloor.Store(journalFloor)
	if err := q.recover(); err != nil {
		return nil, err
	}
	return q, nil
}

// Start arms the queue's timers and applies its settings to what it
// holds (expired messages, length limits). The broker calls it once the
// queue is registered and, at Open, once every queue is: dead-lettering
// may route to them.
func (q *Queue) Start() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.dropOverLimitLocked()
	q.expireDueLocked()
	q.dropHeadLocked()
	q.armTTLTimerLocked()
	q.armExpiresLocked()
}

// Def returns the queue's definition. Its Args must not be modified.
func (q *Queue) Def() Def { return q.def }

// Counts returns the number of ready messages (expired ones excluded) and
// of consumers.
func (q *Queue) Counts() (ready, consumers int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.expireDueLocked()
	return q.mu.ready, len(q.mu.consumers)
}

// Counters count a queue's messages since it was opened, as RabbitMQ's
// message_stats do (they start at zero on every start).
type Counters struct {
	Published   uint64 // enqueued
	Delivered   uint64 // to consumers (RabbitMQ's deliver plus deliver_no_ack)
	Got         uint64 // by basic.get (get plus get_no_ack)
	Redelivered uint64 // deliveries and gets of messages delivered before
	Acked       uint64
}

// Stats are a queue's counts at one moment, for the management API.
type Stats struct {
	Ready, Unacked, Consumers int
	ReadyBytes, UnackedBytes  int64 // bodies
	Counters
	// ActiveConsumer is the consumer tag a single-active-consumer queue
	// serves ("" otherwise or with none).
	ActiveConsumer string
	// IdleSince is when the queue was last used (x-expires' clock), ms.
	IdleSince int64
}

// Stats returns the queue's counts now.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.expireDueLocked()
	st := Stats{
		Ready: q.mu.ready, Unacked: len(q.mu.unacked), Consumers: len(q.mu.consumers),
		ReadyBytes: q.mu.readyBytes, UnackedBytes: q.mu.unackedBytes, Counters: q.mu.counts,
		IdleSince: q.mu.lastUsed,
	}
	if q.mu.active != nil {
		st.ActiveConsumer = q.mu.active.tag
	}
	return st
}

// ConsumerInfo describes one consumer of a queue.
type ConsumerInfo struct {
	Tag       string
	Owner     any // the ChannelLimit given to Consume (its channel)
	NoAck     bool
	Exclusive bool
	Prefetch  int
	Priority  int
	Unacked   int
	// Active: it may be delivered to (false for a waiting single active
	// consumer).
	Active bool
}

// Consumers returns the queue's consumers in subscription order.
func (q *Queue) Consumers() []ConsumerInfo {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]ConsumerInfo, 0, len(q.mu.consumers))
	sac := q.singleActive()
	for _, c := range q.mu.consumers {
		out = append(out, ConsumerInfo{
			Tag: c.tag, Owner: c.ch, NoAck: c.noAck, Exclusive: c.exclusive, Prefetch: c.prefetch,
			Priority: c.priority, Unacked: c.unacked, Active: !sac || q.mu.active == c,
		})
	}
	return out
}

// Declared notes a queue.declare of the existing queue (for x-expires)
// and returns its counts.
func (q *Queue) Declared() (ready, consumers int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.expireDueLocked()
	if !q.mu.closed {
		q.touchLocked()
	}
	return q.mu.ready, len(q.mu.consumers)
}

// Owner returns the connection an exclusive queue belongs to, nil for
// other queues.
func (q *Queue) Owner() any { return q.owner }

// CheckOwner returns a 405 *Error when the queue is exclusive to another
// connection than owner (for basic.get, queue.purge, queue.bind...).
func (q *Queue) CheckOwner(owner any) error {
	if q.def.Exclusive && q.owner != owner {
		return LockedError(q.def.VHost, q.def.Name)
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

func (q *Queue) errGone() error { return NoQueueError(q.def.VHost, q.def.Name) }

// Publish appends a message record (as EncodeRecord makes it) to the
// queue and calls done once it is stored (after fsync for durable queues)
// or has failed. rec must not change until done is called. done must not
// block; it may run on the log's writer goroutine. Publishes that arrive
// while a write is in flight are written together with the next one. A
// queue at its length limit with x-overflow reject-publish(-dlx) refuses
// the message: done gets ErrRejectPublish.
func (q *Queue) Publish(rec []byte, persistent bool, done func(error)) {
	q.publish(rec, nil, nil, 0, persistent, done)
}

// BodyGate is the body log of fan-out by reference as a queue sees it:
// what its reference records wait for before they are written.
type BodyGate interface {
	// AfterDurable calls fn once every body below offset end is durable,
	// or with the error that keeps one from ever being. fn may run at
	// once on the caller's goroutine or later on another; it must not
	// block.
	AfterDurable(end uint64, fn func(error))
}

// RefAdmission is a queue's acceptance of a message stored once for
// several queues (AdmitRef), taken before the body is written, so that
// the body log names only the queues that took the message.
type RefAdmission struct{ m pubMeta }

// AdmitRef parses rec (a record as EncodeRecord makes it) and applies the
// queue's reject overflow to it, as Publish does: ErrRejectPublish (the
// message dead-lettered for reject-publish-dlx) when the queue refuses
// it. An admission is used by PublishRef or given back by CancelRef.
func (q *Queue) AdmitRef(rec []byte) (RefAdmission, error) {
	m, err := q.admitRec(rec)
	return RefAdmission{m}, err
}

// CancelRef gives back an admission whose body could not be written.
func (q *Queue) CancelRef(a RefAdmission) {
	if a.m.reserved {
		q.mu.Lock()
		q.unreserveLocked([]pubMeta{a.m})
		q.mu.Unlock()
	}
}

// PublishRef is Publish of a message stored once for several queues,
// which AdmitRef admitted: rec is its record (as EncodeRecord makes it),
// stored at offset bodyOff of the vhost's body log, which gate is; ref
// is the reference entry AppendRef made of it, what the queue's log
// gets. The queue writes the reference only once the body is durable, so
// that no reference on disk ever names a body that is not; done is
// called as Publish says, after both. A queue takes its references in
// body order: the caller publishes to a queue in the order of bodyOff.
// rec and ref must not change until done is called.
func (q *Queue) PublishRef(rec, ref []byte, a RefAdmission, gate BodyGate, bodyOff uint64, persistent bool, done func(error)) {
	q.enqueue(rec, ref, a.m, gate, bodyOff, persistent, done)
}

// admitRec parses rec and applies the reject overflow to it.
func (q *Queue) admitRec(rec []byte) (pubMeta, error) {
	if err := checkEntry(rec); err != nil {
		return pubMeta{}, err
	}
	r, err := parseRecord(rec[4:])
	var m pubMeta
	if err == nil && r.ref {
		err = fmt.Errorf("a reference published as a message: %w", errBadRecord)
	}
	if err == nil {
		m, err = parseMeta(r, q.maxPrio)
	}
	if err != nil {
		return m, err
	}
	if c := q.config(); c.overflow != overflowDropHead && c.limited() && !q.admit(c, rec, &m) {
		return m, ErrRejectPublish
	}
	return m, nil
}

// publish is Publish.
func (q *Queue) publish(rec, ref []byte, gate BodyGate, bodyOff uint64, persistent bool, done func(error)) {
	m, err := q.admitRec(rec)
	if err != nil {
		done(err)
		return
	}
	q.enqueue(rec, ref, m, gate, bodyOff, persistent, done)
}

// enqueue adds an admitted message (with ref set, its reference) to the
// batch being formed.
func (q *Queue) enqueue(rec, ref []byte, m pubMeta, gate BodyGate, bodyOff uint64, persistent bool, done func(error)) {
	var filter []byte
	if q.def.Durable {
		switch {
		case !persistent && !q.Quorum(): // quorum queues keep every message
			filter = transientFilter
		case m.msgTTL >= 0:
			filter = expiringFilter
		}
	}
	entry := rec
	if ref != nil {
		entry = ref
		if filter == nil {
			filter = refFilter // every reference's chunk has a Bloom filter (refs.go)
		}
	}
	q.pub.Lock()
	if q.pub.closed {
		q.pub.Unlock()
		if m.reserved {
			q.mu.Lock()
			q.unreserveLocked([]pubMeta{m})
			q.mu.Unlock()
		}
		done(q.errGone())
		return
	}
	pb := q.pub.cur
	pb.batch.Messages = append(pb.batch.Messages, osiris.Message{Entry: entry, Filter: filter})
	pb.metas = append(pb.metas, m)
	pb.dones = append(pb.dones, done)
	if ref == nil {
		pb.direct = true
	} else {
		if pb.bodyEnd == 0 {
			pb.firstBody = bodyOff
		}
		pb.bodyEnd = max(pb.bodyEnd, bodyOff+1)
		q.pub.gate = gate
		q.pub.refs++
		if q.journalFloor.Load() == noFloor {
			// The first since the broker opened (and no checkpoint lists
			// the queue): keep the log from here on.
			q.journalFloor.Store(q.LogNext())
		}
		if !q.pub.refLow.has {
			q.pub.refLow.valid = false // it has one now (refs.go)
		}
	}
	if q.pub.inflight {
		q.pub.Unlock()
		return
	}
	q.pub.inflight = true
	q.pub.flying = pb
	q.pub.cur = q.pub.spare
	if q.pub.cur == nil {
		q.pub.cur = &pubBatch{q: q}
	}
	q.pub.spare = nil
	gate = q.pub.gate
	q.pub.Unlock()
	pb.submit(gate)
}

// pubBatch is a batch of publishes with their done callbacks.
type pubBatch struct {
	q      *Queue
	batch  osiris.Batch
	metas  []pubMeta // by message
	dones  []func(error)
	doneFn func(osiris.Result) // pb.done, bound once
	at     int64               // enqueue instant: when submitted, Unix ms
	ttl    int64               // the queue's message TTL then
	hist   bool                // the queue kept its history then
	// bodyEnd is past the highest body offset the batch's references
	// name, 0 when it holds none; firstBody is the lowest (the first).
	bodyEnd, firstBody uint64
	// direct: the batch holds a message that is not a reference. A batch
	// of references only is written without an fsync: the body log,
	// synced, is their journal (bodies.go in package queues rebuilds
	// what a crash lost of them).
	direct  bool
	gatedFn func(error) // pb.gated, bound once
}

// submit writes the batch; gate is the queue's body log, nil when it has
// never taken a reference.
func (pb *pubBatch) submit(gate BodyGate) {
	if pb.doneFn == nil {
		pb.doneFn = pb.done
		pb.gatedFn = pb.gated
	}
	c := pb.q.config()
	pb.at, pb.ttl, pb.hist = pb.q.nowMs(), c.ttl, c.history()
	pb.batch.Done = pb.doneFn
	if pb.bodyEnd > 0 {
		// References go to disk after the bodies they name.
		gate.AfterDurable(pb.bodyEnd, pb.gatedFn)
		return
	}
	pb.write()
}

// gated is called when the bodies the batch's references name are
// durable, or cannot be.
func (pb *pubBatch) gated(err error) {
	if err != nil {
		pb.done(osiris.Result{Err: err})
		return
	}
	pb.write()
}

// write hands the batch to the log's writer.
func (pb *pubBatch) write() {
	pb.batch.NoSync = pb.bodyEnd > 0 && !pb.direct
	if pb.batch.NoSync {
		pb.q.refsUnsynced.Store(true) // before the write: SyncRefs may not miss it
	}
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
		q.stored(pb, r)
	} else {
		q.mu.Lock()
		q.unreserveLocked(pb.metas)
		q.mu.Unlock()
	}
	for _, d := range pb.dones {
		d(r.Err)
	}
	const keep = 4096 // don't keep a burst's slices forever
	if cap(pb.dones) > keep {
		pb.dones, pb.batch.Messages, pb.metas = nil, nil, nil
	} else {
		clear(pb.dones)
		clear(pb.batch.Messages)
		pb.dones, pb.batch.Messages, pb.metas = pb.dones[:0], pb.batch.Messages[:0], pb.metas[:0]
	}
	q.pub.Lock()
	pb.bodyEnd, pb.firstBody, pb.direct = 0, 0, false // RefLow reads them under q.pub
	if next := q.pub.cur; len(next.batch.Messages) > 0 {
		q.pub.cur = pb
		q.pub.flying = next
		gate := q.pub.gate
		if q.pub.refWaiters > 0 {
			q.pub.idle.Broadcast() // RefsWritten
		}
		q.pub.Unlock()
		next.submit(gate)
		return
	}
	q.pub.spare = pb
	q.pub.flying = nil
	q.pub.inflight = false
	q.pub.idle.Broadcast()
	q.pub.Unlock()
}

// stored makes a stored batch's messages ready, applies the length
// limits and TTL 0, and wakes the dispatcher.
func (q *Queue) stored(pb *pubBatch, r osiris.Result) {
	q.mu.Lock()
	prev := q.mu.tail
	q.mu.Unlock()
	ids, err := q.batchIDs(prev, r)
	metas := pb.metas
	if err != nil || len(metas) != r.Written {
		// Cannot happen: the batch's messages are in the log, but which
		// offsets they have is unknown. Take every offset as a message
		// (one that is not is dropped when taken; sizes unknown, priority
		// 0) rather than lose them.
		q.env.Logger.Error("queues: cannot place stored messages", "vhost", q.def.VHost, "queue", q.def.Name, "err", err)
		ids, metas = []idRange{{prev, r.LastOffset + 1}}, nil
	}
	q.mu.Lock()
	end := r.LastOffset + 1
	// Offsets in [prev, end) that hold no message are settled.
	from := prev
	for _, x := range ids {
		q.mu.settled.AddRange(from, x.lo)
		from = x.hi
	}
	q.mu.settled.AddRange(from, end)
	if end > q.mu.tail {
		q.mu.tail = end
	}
	q.unreserveLocked(pb.metas)
	q.enqueueLocked(ids, metas, pb.at, pb.ttl)
	q.dropHeadLocked()
	if pb.hist {
		q.scheduleLocked() // the log grew: history limits may let settled segments go
	}
	if len(q.mu.zeros) > 0 && !q.consumerCanTakeLocked() {
		q.expireZerosLocked()
	}
	wake := q.mu.dispatching && q.mu.ready > 0
	q.mu.Unlock()
	if wake {
		q.Kick()
	}
}

// batchIDs returns the offsets of a stored batch's r.Written messages,
// which follow prev (the tail before it): [prev, r.LastOffset] when they
// are contiguous, the usual case. A batch that rolled the log to a new
// segment has tracking chunks among its messages; their positions are
// read from the chunk headers (a few small reads, once per segment).
func (q *Queue) batchIDs(prev uint64, r osiris.Result) ([]idRange, error) {
	end := r.LastOffset + 1
	if n := uint64(r.Written); end >= n && end-n == prev {
		return []idRange{{prev, end}}, nil
	}
	rd, err := q.log.NewReader(osiris.AtOffset(prev), osiris.ReaderOptions{})
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	var ids []idRange
	n := 0
	for {
		c, ok, err := rd.TryNext()
		if err != nil {
			return nil, err
		}
		if !ok || c.Header.ChunkID >= end {
			break
		}
		lo, hi := max(c.Header.ChunkID, prev), min(c.Header.NextOffset(), end)
		if lo < hi {
			ids = append(ids, idRange{lo, hi})
			n += int(hi - lo)
		}
	}
	if n != r.Written {
		return nil, fmt.Errorf("batch of %d messages before offset %d: found %d in the log", r.Written, end, n)
	}
	return ids, nil
}

// closePublishing refuses new publishes and waits for those in flight.
// A LogState queue (a replicated log) waits at most logStateWait, and
// not at all in a handoff: a leader that lost its majority (cut off, or
// replaced by a new leader) commits nothing more, and the log's Close,
// which follows, fails what still waits for the commit (its publishers
// get nacks).
func (q *Queue) closePublishing(handoff bool) {
	q.pub.Lock()
	defer q.pub.Unlock()
	q.pub.closed = true
	if q.def.LogState && handoff {
		return
	}
	expired := false
	if q.def.LogState && q.pub.inflight {
		t := time.AfterFunc(logStateWait, func() {
			q.pub.Lock()
			expired = true
			q.pub.idle.Broadcast()
			q.pub.Unlock()
		})
		defer t.Stop()
	}
	for q.pub.inflight && !expired {
		q.pub.idle.Wait()
	}
	if expired {
		q.env.Logger.Warn("queues: publishes not committed in time; the log's close fails them",
			"vhost", q.def.VHost, "queue", q.def.Name, "wait", logStateWait)
	}
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
	q.touchLocked()
	q.expireDueLocked()
	if len(q.mu.zeros) > 0 && !q.consumerCanTakeLocked() {
		q.expireZerosLocked()
	}
	if q.mu.ready == 0 {
		q.mu.Unlock()
		return false, nil
	}
	q.mu.Unlock()
	q.get.rd.init(q)
	t, ok, err := q.take(&q.get.rd)
	for errors.Is(err, errPersistWait) {
		<-q.env.Persister.hurry()
		t, ok, err = q.take(&q.get.rd)
	}
	if err != nil {
		q.env.Logger.Error("queues: basic.get", "vhost", q.def.VHost, "queue", q.def.Name, "err", err)
		return false, qerr.Errorf(qerr.CodeInternalError, "basic.get from %s: %v", qerr.Resource("queue", q.def.Name, q.def.VHost), err)
	}
	if !ok {
		return false, nil
	}
	// q.mu is held (take).
	q.deliveredLocked(&t, nil, noAck)
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
func (q *Queue) Ack(ids ...uint64) { q.settleDelivered(ids, 0) }

// Discard settles delivered messages that were rejected or nacked without
// requeue; with a dead-letter exchange they are dead-lettered (reason
// rejected) first.
func (q *Queue) Discard(ids ...uint64) { q.settleDelivered(ids, reasonRejected) }

// settleDelivered settles delivered messages, or dead-letters them for
// reason (0: acked).
func (q *Queue) settleDelivered(ids []uint64, reason deathReason) {
	q.mu.Lock()
	var dead func(idRange)
	if reason != 0 {
		dead = q.deadFn(reason)
	}
	n := 0
	for _, id := range ids {
		if _, ok := q.takeUnackedLocked(id); !ok {
			continue
		}
		q.dropAnnsLocked(id)
		if dead != nil {
			dead(idRange{id, id + 1})
		} else {
			q.mu.settled.Add(id)
			q.mu.counts.Acked++
		}
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
// again, redelivered, in their original order before any message of their
// priority that was never delivered. One whose expiry has passed expires
// instead; length limits apply (drop-head drops from the head, where
// requeued messages go).
func (q *Queue) Requeue(ids ...uint64) { q.requeue(ids, true) }

// Release requeues delivered messages as Requeue does, but their last
// delivery does not count: not in x-delivery-count and not toward the
// delivery limit. They are still redelivered (redelivered=true,
// first-acquirer=false).
func (q *Queue) Release(ids ...uint64) { q.requeue(ids, false) }

func (q *Queue) requeue(ids []uint64, counted bool) {
	q.mu.Lock()
	now := q.nowMs()
	n := 0
	var dead func(idRange)
	for _, id := range ids {
		u, ok := q.takeUnackedLocked(id)
		if !ok {
			continue
		}
		if !counted {
			u.count = uncount(u.count)
		}
		if q.overDeliveryLimitLocked(u.count) {
			// A quorum queue counts every return (quorum.go).
			q.dropAnnsLocked(id)
			q.deadFn(reasonDeliveryLimit)(idRange{id, id + 1})
			continue
		}
		if u.exp <= now {
			q.dropAnnsLocked(id)
			if dead == nil {
				dead = q.deadFn(reasonExpired)
			}
			dead(idRange{id, id + 1})
			continue
		}
		q.returnReadyLocked(reqEntry{id: id, count: u.count, size: u.size, exp: u.exp}, u.prio)
		n++
	}
	if n > 0 {
		q.dropHeadLocked()
	}
	wake := n > 0 && q.mu.dispatching
	q.mu.Unlock()
	if wake {
		q.Kick()
	}
}

// Purge drops the ready messages (not the delivered, unacked ones) and
// returns how many there were (expired ones excluded). Purged messages
// are not dead-lettered.
func (q *Queue) Purge() (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.closed {
		return 0, q.errGone()
	}
	q.expireDueLocked()
	n := q.clearReadyLocked(func(r idRange) { q.mu.settled.AddRange(r.lo, r.hi) })
	clear(q.mu.expq)
	q.mu.expq, q.mu.zeros = q.mu.expq[:0], q.mu.zeros[:0]
	q.markDirtyLocked()
	return n, nil
}

// settleLocked marks id done.
// REQUIRES: q.mu held.
func (q *Queue) settleLocked(id uint64) {
	q.mu.settled.Add(id)
	q.markDirtyLocked()
}

// deliveredLocked records a message take returned as delivered to c
// (nil: basic.get): unacked, or settled at once for noAck.
// REQUIRES: q.mu held.
func (q *Queue) deliveredLocked(t *taken, c *Consumer, noAck bool) {
	if c == nil {
		q.mu.counts.Got++
	} else {
		q.mu.counts.Delivered++
		if c.credited {
			c.credit--
		}
	}
	if t.count > 0 {
		q.mu.counts.Redelivered++
		if q.mu.anns != nil {
			t.anns = q.mu.anns[t.id]
		}
	}
	if noAck {
		q.settleLocked(t.id)
	} else {
		u := t.unacked(c)
		q.mu.unacked[t.id] = u
		q.mu.unackedBytes += int64(u.size)
		if u.count >= 2 {
			q.mu.unackedMulti++
		}
	}
	if t.id >= q.mu.deliveredMark {
		q.mu.deliveredMark = t.id + 1
		q.markDirtyLocked()
		if q.def.Durable {
			q.renewLocked()
		}
	}
}

// takeUnackedLocked removes id from the unacked messages and gives back
// its consumer's slot.
// REQUIRES: q.mu held.
func (q *Queue) takeUnackedLocked(id uint64) (unackedMsg, bool) {
	u, ok := q.mu.unacked[id]
	if !ok {
		return u, false
	}
	delete(q.mu.unacked, id)
	q.mu.unackedBytes -= int64(u.size)
	if u.count >= 2 {
		q.mu.unackedMulti--
	}
	q.releaseLocked(u.c)
	return u, true
}

// returnReadyLocked makes a delivered message ready again (requeued) at
// priority level prio.
// REQUIRES: q.mu held.
func (q *Queue) returnReadyLocked(e reqEntry, prio uint8) {
	e.seq = q.mu.reqSeq
	q.mu.reqSeq++
	l := &q.mu.levels[min(int(prio), len(q.mu.levels)-1)]
	l.req.add(e)
	q.mu.ready++
	q.mu.readyBytes += int64(e.size)
	if e.exp != noExpiry {
		q.pushExpiryLocked(expiry{e.exp, e.id, e.id + 1})
	}
}

// markDirtyLocked notes a change of the ack state: a durable queue's goes
// to the persister. It arms the sweep timer.
// REQUIRES: q.mu held.
func (q *Queue) markDirtyLocked() {
	if q.def.Durable && !q.mu.dirty && !q.mu.persistDone {
		q.mu.dirty = true
		q.env.Persister.add(q)
	}
	q.scheduleLocked()
}

// scheduleLocked arms the sweep timer unless it is armed.
// REQUIRES: q.mu held.
func (q *Queue) scheduleLocked() { q.scheduleInLocked(persistInterval) }

// scheduleInLocked arms the sweep timer to run after d unless it is
// armed.
// REQUIRES: q.mu held.
func (q *Queue) scheduleInLocked(d time.Duration) {
	if !q.mu.timerSet && !q.mu.persistDone {
		q.mu.timerSet = true
		q.timer.Reset(d)
	}
}

// BeginShutdown marks the queue closed (refusing consumers, gets and
// purges) unless ifUnused or ifEmpty refuse; it returns the ready count.
func (q *Queue) BeginShutdown(ifUnused, ifEmpty bool) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.mu.closed:
		return 0, q.errGone()
	case ifUnused && len(q.mu.consumers) > 0:
		return 0, qerr.Errorf(qerr.CodePreconditionFailed, "%s in use", qerr.Resource("queue", q.def.Name, q.def.VHost))
	}
	q.expireDueLocked()
	if ifEmpty && q.mu.ready > 0 {
		return 0, qerr.Errorf(qerr.CodePreconditionFailed, "%s not empty", qerr.Resource("queue", q.def.Name, q.def.VHost))
	}
	q.mu.closed = true
	return q.mu.ready, nil
}

// FinishShutdown ends a queue after BeginShutdown: its consumers are
// cancelled (and told, when deleted), the dispatcher stops, publishes in
// flight finish, and then the log is closed with the ack state persisted,
// or deleted with it.
func (q *Queue) FinishShutdown(deleted bool) error {
	if deleted {
		return q.finishShutdown(endDelete)
	}
	return q.finishShutdown(endClose)
}

// FinishHandoff ends a queue that another instance (a replicated
// queue's new leader) takes over, after BeginShutdown: as FinishShutdown
// without deleting, but its consumers are told they were cancelled, as
// they are when it is deleted. It waits for nothing the log would have
// to commit: the log is reopened as the new leader's replica and cut
// back to what the new leader holds, so neither the publishes in flight
// nor a final ack state can commit through this instance any more (the
// publishers get nacks when the log closes).
func (q *Queue) FinishHandoff() error { return q.finishShutdown(endHandoff) }

// ending is how a queue instance ends.
type ending uint8

const (
	endClose   ending = iota // closed with its state, to be opened again (FinishShutdown(false))
	endDelete                // deleted, with its log (FinishShutdown(true))
	endHandoff               // another member leads it now (FinishHandoff)
)

// Log returns the queue's log.
func (q *Queue) Log() *osiris.Stream { return q.log }

func (q *Queue) finishShutdown(end ending) error {
	deleted, notify := end == endDelete, end != endClose
	q.mu.Lock()
	consumers := q.mu.consumers
	q.mu.consumers = nil
	for _, c := range consumers {
		c.cancelled = true
	}
	if q.mu.waiters > 0 {
		q.mu.idle.Broadcast() // DrainCredit calls stop waiting
	}
	for q.mu.delivering != nil {
		q.mu.waiters++
		q.mu.idle.Wait()
		q.mu.waiters--
	}
	done, dlDone := q.mu.dispDone, q.mu.dlDone
	if q.ttlTimer != nil {
		q.ttlTimer.Stop()
	}
	if q.expTimer != nil {
		q.expTimer.Stop()
	}
	q.mu.Unlock()
	q.Kick()
	if done != nil {
		<-done
	}
	if dlDone != nil {
		<-dlDone // its appends in flight finish; what it settled is persisted below
	}
	q.mu.Lock()
	waiters := q.mu.dlWaiters
	q.mu.dlWaiters = nil
	q.mu.Unlock()
	for _, w := range waiters {
		w.fn() // the queue is gone: nothing more will be dead-lettered
	}
	if notify {
		for _, c := range consumers {
			c.sink.Cancelled(q, c.tag)
		}
	}
	q.closePublishing(end == endHandoff)
	q.get.Lock()
	q.get.rd.close()
	q.get.Unlock()

	q.persistMu.Lock()
	defer q.persistMu.Unlock()
	q.timer.Stop()
	errs := []error{q.env.Persister.final(q, end)}
	if deleted || !q.def.Durable {
		errs = append(errs, q.log.Delete())
	} else {
		errs = append(errs, q.log.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("queues: close %s: %w", qerr.Resource("queue", q.def.Name, q.def.VHost), err)
	}
	return nil
}
