package queues

import (
	"fmt"
	"maps"
	"slices"
)

// Quorum queues' declare rules (x-queue-type=quorum): always durable,
// never exclusive or auto-delete, never server-named, and the arguments
// of the quorum type only (rabbit_quorum_queue:declare,
// rabbit_amqqueue:check_arguments_key). What a quorum queue does
// differently once declared is the queue's business (classic/quorum.go).

// quorumTypeModule is how RabbitMQ's texts name the quorum queue type.
const quorumTypeModule = "rabbit_quorum_queue"

// quorumEquivalenceArgs are the arguments compared on redeclare of a
// quorum queue (its queue_arguments), in RabbitMQ's order.
var quorumEquivalenceArgs = [...]string{
	"x-dead-letter-exchange", "x-dead-letter-routing-key", "x-dead-letter-strategy",
	"x-expires", "x-max-length", "x-max-length-bytes", "x-max-in-memory-length",
	"x-max-in-memory-bytes", "x-overflow", "x-single-active-consumer", "x-queue-type",
	"x-quorum-initial-group-size", "x-delivery-limit", "x-message-ttl", "x-queue-leader-locator",
	"x-history-max-age", "x-history-max-length-bytes", // Warren's queue history
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
		return Errorf(CodePreconditionFailed, "invalid property 'auto-delete' for %s", res).Because(ErrTypeProperty)
	case def.Exclusive:
		return Errorf(CodePreconditionFailed, "invalid property 'exclusive-owner' for %s", res).Because(ErrTypeProperty)
	case !def.Durable:
		return Errorf(CodePreconditionFailed, "invalid property 'non-durable' for %s", res).Because(ErrTypeProperty)
	}
	return nil
}

// errServerNamedQuorum is the refusal of a server-named quorum queue.
func errServerNamedQuorum() error {
	return Errorf(CodePreconditionFailed, "Cannot declare a server-named queue for type %s", quorumTypeModule).Because(ErrTypeProperty)
}
