package classic

import (
	"cmp"
	"slices"
	"strings"

	"github.com/warren-mq/warren/internal/amqptab"
)

// Quorum queues (x-queue-type=quorum) as a view over the classic queue
// machinery: one node, so "quorum" is the local log, which durable queues
// already fsync before confirming (the broker opens their logs with
// FsyncAlways and group commit). What differs from a classic queue:
//
//   - declare: always durable, never exclusive or auto-delete, never
//     server-named, and the arguments of the quorum type only
//     (rabbit_quorum_queue:declare, rabbit_amqqueue:check_arguments_key;
//     the broker checks them: queues/queue_quorum.go);
//   - delivery counting: every return of a delivered message (reject or
//     nack with requeue, recover, a channel or connection closed before
//     the ack) counts; redeliveries carry x-delivery-count (the number of
//     earlier returns), and a message returned more than the delivery
//     limit times (x-delivery-limit / policy delivery-limit, default 20,
//     negative: unlimited) is dead-lettered with reason delivery_limit, or
//     dropped without a dead-letter exchange.
//
// Unlike RabbitMQ 4.3, which counts only "failed" deliveries
// (basic.reject, a lost channel) and lets nack(requeue=true) loop forever
// (PR #15387), Warren counts nack(requeue=true) too, as RabbitMQ ≤4.2 did.
// Delivery counts survive a restart (persist.go): a crash returns
// what was out, counted, and the count never goes back.

// defaultDeliveryLimit is RabbitMQ 4's default x-delivery-limit.
const defaultDeliveryLimit = 20

// hdrDeliveryCount is the header redeliveries of quorum queues carry.
const hdrDeliveryCount = "x-delivery-count"

// Quorum reports whether q is a quorum queue.
func (q *Queue) Quorum() bool { return q.def.Type == TypeQuorum }

// kind is the queue's type for policies and effective arguments.
func (q *Queue) kind() string {
	if q.def.Type == TypeQuorum {
		return TypeQuorum
	}
	return TypeClassic
}

// deliveryLimitOf resolves a quorum queue's delivery limit from its
// effective delivery-limit (argument and policy combined by the
// broker's Args): -1 for unlimited.
func deliveryLimitOf(v any, ok bool) int64 {
	if !ok {
		return defaultDeliveryLimit
	}
	n, isInt := amqptab.DecodedInt(v)
	switch {
	case !isInt:
		return defaultDeliveryLimit
	case n < 0:
		return -1
	}
	return n
}

// acquiredFlag, set in a message's delivery count, says it went out
// before even when no delivery counted: a released delivery (Release)
// is not counted, as RabbitMQ 4.x counts only failed ones for AMQP 1.0,
// but the message is still redelivered. The low bits count deliveries.
const acquiredFlag = 1 << 31

// counted returns the deliveries that count of count (delivery limit,
// x-delivery-count).
func counted(count uint32) uint32 { return count &^ acquiredFlag }

// uncount takes the last delivery, which count includes, out of the
// counted ones and flags the message as acquired before.
func uncount(count uint32) uint32 {
	if n := counted(count); n > 0 {
		return (n - 1) | acquiredFlag
	}
	return count | acquiredFlag
}

// overDeliveryLimitLocked reports whether a message returned after its
// count-th delivery is past the queue's delivery limit.
// REQUIRES: q.mu held.
func (q *Queue) overDeliveryLimitLocked(count uint32) bool {
	if !q.Quorum() {
		return false
	}
	lim := q.config().deliveryLimit
	return lim >= 0 && int64(counted(count)) > lim
}

// HeaderEntry is one entry of an AMQP 0-9-1 headers table: its key and
// its value as the table encodes it (type tag and value).
type HeaderEntry struct {
	Key string
	Raw []byte
}

// Annotate adds headers to what a delivered, unsettled message of a
// quorum queue carries when it goes out again (merged over those an
// earlier Annotate added): the message annotations of an AMQP 1.0
// modified outcome, which RabbitMQ 4.x keeps for quorum queues. Classic
// queues ignore them, as RabbitMQ's do. Call it before the Requeue or
// Release that returns the message. They live in memory: a restart
// drops them (the message itself is kept).
func (q *Queue) Annotate(id uint64, hs []HeaderEntry) {
	if !q.Quorum() || len(hs) == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.mu.unacked[id]; !ok {
		return
	}
	if q.mu.anns == nil {
		q.mu.anns = map[uint64][]HeaderEntry{}
	}
	merged := slices.Clone(q.mu.anns[id])
	for _, h := range hs {
		if i := slices.IndexFunc(merged, func(e HeaderEntry) bool { return e.Key == h.Key }); i >= 0 {
			merged[i] = h
		} else {
			merged = append(merged, h)
		}
	}
	q.mu.anns[id] = merged
	q.sweepAnnsLocked()
}

// dropAnnsLocked forgets the annotations of a message leaving the queue.
// REQUIRES: q.mu held.
func (q *Queue) dropAnnsLocked(id uint64) {
	if q.mu.anns != nil {
		delete(q.mu.anns, id)
	}
}

// sweepAnnsLocked drops the annotations of messages that left the queue
// by a way that does not drop them one by one (purge, expiry, length
// limits), once they outnumber the unacked and requeued messages: the
// map stays within twice what the queue holds annotated.
// REQUIRES: q.mu held.
func (q *Queue) sweepAnnsLocked() {
	n := len(q.mu.unacked)
	for p := range q.mu.levels {
		n += q.mu.levels[p].req.len()
	}
	if len(q.mu.anns) <= max(64, 2*n) {
		return
	}
	for id := range q.mu.anns {
		if _, ok := q.mu.unacked[id]; ok {
			continue
		}
		requeued := false
		for p := range q.mu.levels {
			es := q.mu.levels[p].req.entries()
			if _, ok := slices.BinarySearchFunc(es, id, func(e reqEntry, id uint64) int { return cmp.Compare(e.id, id) }); ok {
				requeued = true
				break
			}
		}
		if !requeued {
			delete(q.mu.anns, id)
		}
	}
}

// DeliveryProps returns the properties to send with d to an AMQP 0-9-1
// consumer: d.Props, or for a quorum queue's redelivery a copy (appended
// to dst) whose headers table has x-delivery-count (long) set to
// d.DeliveryCount and d.Annotations merged in, keys kept sorted. The
// log's record is not changed.
func DeliveryProps(dst []byte, d *Delivery) []byte {
	// A delivery through the proxy (Via) has its annotations merged
	// already and a count only from a quorum queue.
	if (d.DeliveryCount == 0 && len(d.Annotations) == 0) || (d.Queue == nil && d.Via == nil) || (d.Queue != nil && !d.Queue.Quorum()) {
		return d.Props
	}
	extra := d.Annotations
	if d.DeliveryCount > 0 {
		extra = append(slices.Clip(extra), HeaderEntry{hdrDeliveryCount, amqptab.AppendLong(nil, int64(d.DeliveryCount))})
	}
	out, err := withHeaders(dst, d.Props, extra)
	if err != nil {
		return d.Props
	}
	return out
}

// AnnotatedProps is d.Props with d.Annotations merged into its headers
// (a copy appended to dst when there are any), for an AMQP 1.0 consumer,
// which gets the delivery count in the message header instead.
func AnnotatedProps(dst []byte, d *Delivery) []byte {
	if len(d.Annotations) == 0 {
		return d.Props
	}
	out, err := withHeaders(dst, d.Props, d.Annotations)
	if err != nil {
		return d.Props
	}
	return out
}

// withHeaders appends props with the extra headers set in its headers
// table (replacing those of the same keys), entries sorted by key.
func withHeaders(dst, props []byte, extra []HeaderEntry) ([]byte, error) {
	pv, err := amqptab.ScanProps(props)
	if err != nil {
		return nil, err
	}
	type entry struct {
		key string
		val []byte // tag and value
	}
	var es []entry
	if hdrs := pv.Value(props, amqptab.FlagHeaders); hdrs != nil {
		err := amqptab.ScanTable(hdrs, func(key []byte, tag byte, v []byte) error {
			if !slices.ContainsFunc(extra, func(h HeaderEntry) bool { return h.Key == string(key) }) {
				es = append(es, entry{string(key), amqptab.AppendRaw(nil, tag, v)})
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	for _, h := range extra {
		es = append(es, entry{h.Key, h.Raw})
	}
	slices.SortStableFunc(es, func(a, b entry) int { return strings.Compare(a.key, b.key) })
	table, start := amqptab.Begin(nil)
	for _, e := range es {
		table = amqptab.AppendKey(table, e.key)
		table = append(table, e.val...)
	}
	table = amqptab.End(table, start)
	return amqptab.AppendProps(dst, props, &pv, 0, table), nil
}
