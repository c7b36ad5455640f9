package queues

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/warren-mq/warren/internal/amqptab"
)

// Quorum queues (x-queue-type=quorum) as a view over the classic queue
// machinery: one node, so "quorum" is the local log, which durable queues
// already fsync before confirming (queueLogConfig: FsyncAlways with group
// commit). What differs from a classic queue:
//
//   - declare: always durable, never exclusive or auto-delete, never
//     server-named, and the arguments of the quorum type only
//     (rabbit_quorum_queue:declare, rabbit_amqqueue:check_arguments_key);
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
// Delivery counts survive a restart (queue_persist.go): a crash returns
// what was out, counted, and the count never goes back.

// quorumTypeModule is how RabbitMQ's texts name the quorum queue type.
const quorumTypeModule = "rabbit_quorum_queue"

// defaultDeliveryLimit is RabbitMQ 4's default x-delivery-limit.
const defaultDeliveryLimit = 20

// hdrDeliveryCount is the header redeliveries of quorum queues carry.
const hdrDeliveryCount = "x-delivery-count"

// quorumEquivalenceArgs are the arguments compared on redeclare of a
// quorum queue (its queue_arguments), in RabbitMQ's order.
var quorumEquivalenceArgs = [...]string{
	"x-dead-letter-exchange", "x-dead-letter-routing-key", "x-dead-letter-strategy",
	"x-expires", "x-max-length", "x-max-length-bytes", "x-max-in-memory-length",
	"x-max-in-memory-bytes", "x-overflow", "x-single-active-consumer", "x-queue-type",
	"x-quorum-initial-group-size", "x-delivery-limit", "x-message-ttl", "x-queue-leader-locator",
}

// nonQuorumArgs are the arguments of the other queue types that quorum
// queues refuse (all types' queue arguments minus the quorum type's).
var nonQuorumArgs = map[string]bool{
	"x-max-priority": true, "x-queue-mode": true, "x-queue-version": true,
	"x-queue-master-locator": true, "x-max-age": true,
	"x-stream-max-segment-size-bytes": true, "x-stream-filter-size-bytes": true,
	"x-initial-cluster-size": true,
}

// nonClassicArgs are arguments only other queue types take: a classic
// declare with one is refused, as rabbit_amqqueue's per-type argument
// validation does (unknown arguments are ignored).
var nonClassicArgs = map[string]bool{
	"x-delivery-limit": true, "x-dead-letter-strategy": true, "x-quorum-initial-group-size": true,
	"x-quorum-target-group-size": true, "x-consumer-timeout": true,
	"x-max-age": true, "x-stream-max-segment-size-bytes": true, "x-stream-filter-size-bytes": true,
	"x-initial-cluster-size": true,
}

// checkClassicOnlyArgs refuses a classic declare carrying another type's
// argument, with RabbitMQ's text.
func checkClassicOnlyArgs(def QueueDef) error {
	for _, k := range slices.Sorted(maps.Keys(def.Args)) {
		if nonClassicArgs[k] {
			return Errorf(CodePreconditionFailed, "invalid arg '%s' for %s of queue type rabbit_classic_queue", k, rs("queue", def.Name, def.VHost))
		}
	}
	return nil
}

// Quorum reports whether q is a quorum queue.
func (q *Queue) Quorum() bool { return q.def.Type == QueueQuorum }

// kind is the queue's type for policies and effective arguments.
func (q *Queue) kind() string {
	if q.def.Type == QueueQuorum {
		return QueueQuorum
	}
	return QueueClassic
}

// validateQuorumDeclare checks a new quorum queue's declare as RabbitMQ
// does: the quorum type's arguments (after the shared validators of
// validateQueueArgs), then the properties (rabbit_quorum_queue:declare:
// auto-delete, exclusive, non-durable). def.Durable is as the client sent
// it (before exclusive queues are forced transient).
func validateQuorumDeclare(def QueueDef) error {
	res := rs("queue", def.Name, def.VHost)
	invalid := func(k, reason string) error {
		return Errorf(CodePreconditionFailed, "invalid arg '%s' for %s: %s", k, res, reason)
	}
	for _, k := range slices.Sorted(maps.Keys(def.Args)) {
		v := def.Args[k]
		switch k {
		case "x-dead-letter-strategy":
			s, ok := v.(string)
			switch {
			case !ok:
				return invalid(k, fmt.Sprintf("{unacceptable_type,%s}", fieldType(v)))
			case s != "at-most-once" && s != "at-least-once":
				return invalid(k, "invalid_dead_letter_strategy")
			}
		case "x-quorum-initial-group-size":
			n, ok := argInt(v)
			switch {
			case !ok:
				return invalid(k, fmt.Sprintf("%q", "expected integer, got "+fieldType(v)))
			case n == 0:
				return invalid(k, "{value_zero,0}")
			case n < 0:
				return invalid(k, fmt.Sprintf("{value_negative,%d}", n))
			}
		case "x-consumer-timeout":
			n, ok := argInt(v)
			switch {
			case !ok:
				return invalid(k, fmt.Sprintf("%q", "expected integer, got "+fieldType(v)))
			case n < 0:
				return invalid(k, fmt.Sprintf("{value_negative,%d}", n))
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(def.Args)) {
		if nonQuorumArgs[k] {
			return Errorf(CodePreconditionFailed, "invalid arg '%s' for %s of queue type %s", k, res, quorumTypeModule)
		}
	}
	switch {
	case def.AutoDelete:
		return Errorf(CodePreconditionFailed, "invalid property 'auto-delete' for %s", res)
	case def.Exclusive:
		return Errorf(CodePreconditionFailed, "invalid property 'exclusive-owner' for %s", res)
	case !def.Durable:
		return Errorf(CodePreconditionFailed, "invalid property 'non-durable' for %s", res)
	}
	return nil
}

// errServerNamedQuorum is the refusal of a server-named quorum queue.
func errServerNamedQuorum() error {
	return Errorf(CodePreconditionFailed, "Cannot declare a server-named queue for type %s", quorumTypeModule)
}

// deliveryLimitOf resolves a quorum queue's delivery limit from its
// effective delivery-limit (argument and policy combined by
// EffectiveQueueArg): -1 for unlimited.
func deliveryLimitOf(v any, ok bool) int64 {
	if !ok {
		return defaultDeliveryLimit
	}
	n, isInt := argInt(v)
	switch {
	case !isInt:
		return defaultDeliveryLimit
	case n < 0:
		return -1
	}
	return n
}

// overDeliveryLimitLocked reports whether a message returned after its
// count-th delivery is past the queue's delivery limit.
// REQUIRES: q.mu held.
func (q *Queue) overDeliveryLimitLocked(count uint32) bool {
	if !q.Quorum() {
		return false
	}
	lim := q.config().deliveryLimit
	return lim >= 0 && int64(count) > lim
}

// DeliveryProps returns the properties to send with d: d.Props, or for a
// quorum queue's redelivery a copy (appended to dst) whose headers table
// has x-delivery-count (long) set to d.DeliveryCount, keys kept sorted.
// The log's record is not changed.
func DeliveryProps(dst []byte, d *Delivery) []byte {
	if d.DeliveryCount == 0 || d.Queue == nil || !d.Queue.Quorum() {
		return d.Props
	}
	out, err := withDeliveryCount(dst, d.Props, d.DeliveryCount)
	if err != nil {
		return d.Props
	}
	return out
}

// withDeliveryCount appends props with x-delivery-count set to count in
// its headers table (replacing one already there), entries sorted by key.
func withDeliveryCount(dst, props []byte, count uint32) ([]byte, error) {
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
			if string(key) != hdrDeliveryCount {
				es = append(es, entry{string(key), amqptab.AppendRaw(nil, tag, v)})
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	es = append(es, entry{hdrDeliveryCount, amqptab.AppendLong(nil, int64(count))})
	slices.SortStableFunc(es, func(a, b entry) int { return strings.Compare(a.key, b.key) })
	table, start := amqptab.Begin(nil)
	for _, e := range es {
		table = amqptab.AppendKey(table, e.key)
		table = append(table, e.val...)
	}
	table = amqptab.End(table, start)
	return amqptab.AppendProps(dst, props, &pv, 0, table), nil
}
