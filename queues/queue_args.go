package queues

import (
	"fmt"
	"maps"
	"reflect"
	"slices"

	"github.com/warren-mq/warren/internal/amqptab"
	"github.com/warren-mq/warren/queues/internal/fieldval"
)

// Queue declare arguments: validation and redeclare equivalence, with
// RabbitMQ's reply texts (rabbit_amqqueue:check_declare_arguments and
// assert_equivalence, rabbit_misc:assert_args_equivalence); and the
// arguments of a basic.consume (ConsumerPriority). What the arguments
// set is applied by the queue (package classic).

// classicEquivalenceArgs are the arguments compared on redeclare of a
// classic queue, in RabbitMQ's order.
var classicEquivalenceArgs = [...]string{
	"x-expires", "x-message-ttl", "x-dead-letter-exchange", "x-dead-letter-routing-key",
	"x-max-length", "x-max-length-bytes", "x-max-priority", "x-overflow", "x-queue-mode",
	"x-queue-version", "x-single-active-consumer", "x-queue-type",
	"x-queue-master-locator", "x-queue-leader-locator",
	"x-history-max-age", "x-history-max-length-bytes", // Warren's queue history
}

// argInt returns an integer argument's value (see amqptab.DecodedInt).
func argInt(v any) (int64, bool) { return amqptab.DecodedInt(v) }

// argEqual is RabbitMQ's comparison of two present arguments: same type
// class and equal values.
func argEqual(a, b any) bool {
	if fieldClass(fieldType(a)) != fieldClass(fieldType(b)) {
		return false
	}
	if x, ok := argInt(a); ok {
		y, ok := argInt(b)
		return ok && x == y
	}
	if x, ok := fieldval.Float(a); ok {
		y, ok := fieldval.Float(b)
		return ok && x == y
	}
	return reflect.DeepEqual(normalizeValue(a), normalizeValue(b))
}

// checkQueueEquivalence compares a redeclare with the existing queue:
// durable, auto_delete, then the classic arguments.
func checkQueueEquivalence(cur QueueDef, durable, autoDelete bool, args map[string]any) error {
	res := rs("queue", cur.Name, cur.VHost)
	if cur.Durable != durable {
		return Errorf(CodePreconditionFailed, "inequivalent arg 'durable' for %s: received '%t' but current is '%t'",
			res, durable, cur.Durable)
	}
	if cur.AutoDelete != autoDelete {
		return Errorf(CodePreconditionFailed, "inequivalent arg 'auto_delete' for %s: received '%t' but current is '%t'",
			res, autoDelete, cur.AutoDelete)
	}
	equiv := classicEquivalenceArgs[:]
	if cur.Type == QueueQuorum {
		equiv = quorumEquivalenceArgs[:]
	}
	for _, k := range equiv {
		old, hadOld := cur.Args[k]
		nv, hasNew := args[k]
		if k == "x-queue-type" && hadOld && !hasNew && old != QueueClassic {
			// The channel's augment_declare_args makes it "classic".
			nv, hasNew = QueueClassic, true
		}
		switch {
		case !hadOld && !hasNew:
			continue
		case hadOld && hasNew:
			if argEqual(old, nv) {
				continue
			}
			// Both present: RabbitMQ prints the bare values.
			return Errorf(CodePreconditionFailed, "inequivalent arg '%s' for %s: received '%s' but current is '%s'",
				k, res, fieldBare(nv), fieldBare(old))
		}
		if k == "x-queue-type" {
			// Absent equals "classic" (rabbitmq-common#341).
			v := old
			if hasNew {
				v = nv
			}
			if s, ok := v.(string); ok && s == QueueClassic {
				continue
			}
		}
		recv, curr := "none", "none"
		if hasNew {
			recv = fieldArgText(nv, true)
		}
		if hadOld {
			curr = fieldArgText(old, true)
		}
		return Errorf(CodePreconditionFailed, "inequivalent arg '%s' for %s: received %s but current is %s",
			k, res, recv, curr)
	}
	return nil
}

// queueTypeOf returns the x-queue-type of args, "classic" when absent.
func queueTypeOf(args map[string]any) string {
	if s, ok := args["x-queue-type"].(string); ok {
		return s
	}
	return QueueClassic
}

// validateQueueArgs checks the arguments of a new queue: the types and
// ranges RabbitMQ enforces for the classic arguments. What they set is
// applied by the queue (classic/config.go).
func validateQueueArgs(vhost, name string, args map[string]any) error {
	res := rs("queue", name, vhost)
	invalid := func(k, reason string) error {
		return Errorf(CodePreconditionFailed, "invalid arg '%s' for %s: %s", k, res, reason)
	}
	intArg := func(k string, v any, check func(int64) string) error {
		n, ok := argInt(v)
		if !ok {
			return invalid(k, fmt.Sprintf("%q", "expected integer, got "+fieldType(v)))
		}
		if r := check(n); r != "" {
			return invalid(k, r)
		}
		return nil
	}
	const maxExpiry = 315_360_000_000 // ten years in ms (rabbit_misc:check_expiry)
	for _, k := range slices.Sorted(maps.Keys(args)) {
		v := args[k]
		var err error
		switch k {
		case "x-queue-type":
			s, ok := v.(string)
			switch {
			case !ok:
				err = invalid(k, fmt.Sprintf("{unacceptable_type,%s}", fieldType(v)))
			case s != QueueClassic && s != QueueQuorum && s != QueueStream:
				err = invalid(k, fmt.Sprintf("%q", "unsupported queue type '"+s+"'"))
			}
		case "x-expires":
			err = intArg(k, v, func(n int64) string {
				switch {
				case n == 0:
					return "{value_zero,0}"
				case n < 0:
					return fmt.Sprintf("{value_negative,%d}", n)
				case n > maxExpiry:
					return fmt.Sprintf("{value_too_large,%d,%d}", n, int64(maxExpiry))
				}
				return ""
			})
		case "x-message-ttl":
			err = intArg(k, v, func(n int64) string {
				switch {
				case n < 0:
					return fmt.Sprintf("{value_negative,%d}", n)
				case n > maxExpiry:
					return fmt.Sprintf("{value_too_large,%d,%d}", n, int64(maxExpiry))
				}
				return ""
			})
		case "x-history-max-age":
			// Warren's queue history: x-max-age's syntax and texts.
			if sv, ok := v.(string); !ok {
				err = invalid(k, fmt.Sprintf("{unacceptable_type,%s}", fieldType(v)))
			} else if !validMaxAge(sv) {
				err = invalid(k, "invalid_max_age")
			}
		case "x-max-length", "x-max-length-bytes", "x-history-max-length-bytes":
			err = intArg(k, v, func(n int64) string {
				if n < 0 {
					return fmt.Sprintf("{value_negative,%d}", n)
				}
				return ""
			})
		case "x-max-priority":
			err = intArg(k, v, func(n int64) string {
				switch {
				case n < 0:
					return fmt.Sprintf("{value_negative,%d}", n)
				case n > 255:
					return fmt.Sprintf("{max_value_exceeded,%d}", n)
				}
				return ""
			})
		case "x-queue-version":
			err = intArg(k, v, func(n int64) string {
				switch {
				case n < 0:
					return fmt.Sprintf("{value_negative,%d}", n)
				case n != 1 && n != 2:
					return fmt.Sprintf("%q", fmt.Sprintf("unsupported queue version '%d'", n))
				}
				return ""
			})
		case "x-dead-letter-exchange":
			if _, ok := v.(string); !ok {
				err = invalid(k, fmt.Sprintf("{unacceptable_type,%s}", fieldType(v)))
			}
		case "x-dead-letter-routing-key":
			if _, ok := v.(string); !ok {
				err = invalid(k, fmt.Sprintf("{unacceptable_type,%s}", fieldType(v)))
			} else if _, ok := args["x-dead-letter-exchange"]; !ok {
				err = invalid(k, "routing_key_but_no_dlx_defined")
			}
		case "x-overflow":
			s, ok := v.(string)
			switch {
			case !ok:
				err = invalid(k, fmt.Sprintf("{unacceptable_type,%s}", fieldType(v)))
			case s != "drop-head" && s != "reject-publish" && s != "reject-publish-dlx":
				err = invalid(k, "invalid_overflow")
			}
		case "x-single-active-consumer":
			if _, ok := v.(bool); !ok {
				err = invalid(k, fmt.Sprintf("{unacceptable_type,%s}", fieldType(v)))
			}
		case "x-queue-mode":
			s, ok := v.(string)
			switch {
			case !ok:
				err = invalid(k, fmt.Sprintf("{unacceptable_type,%s}", fieldType(v)))
			case s != "default" && s != "lazy":
				err = invalid(k, fmt.Sprintf("%q", "unsupported queue mode '"+s+"'"))
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// ConsumerPriority checks a basic.consume's arguments for q (as
// rabbit_amqqueue:check_consume_arguments) and returns its x-priority.
// x-consumer-timeout is for quorum queues only.
func ConsumerPriority(q *Queue, args map[string]any) (int, error) {
	def := q.Def()
	res := rs("queue", def.Name, def.VHost)
	if _, ok := args["x-consumer-timeout"]; ok {
		if !q.Quorum() {
			return 0, Errorf(CodePreconditionFailed, "invalid arg '%s' for %s of queue type rabbit_classic_queue", "x-consumer-timeout", res)
		}
	}
	v, ok := args["x-priority"]
	if !ok {
		return 0, nil
	}
	n, ok := argInt(v)
	if !ok {
		return 0, Errorf(CodePreconditionFailed, "invalid arg '%s' for %s: {unacceptable_type,%s}", "x-priority", res, fieldType(v))
	}
	return int(n), nil
}
