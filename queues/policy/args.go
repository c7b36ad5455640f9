package policy

import (
	"strings"
	"time"

	"github.com/warren-mq/warren/queues/internal/fieldval"
)

// Precedence of policy values over declare arguments, per key and queue
// type, as RabbitMQ 4.3.5 resolves them with
// rabbit_queue_type_util:args_policy_lookup/3 (and rabbit_policy:get_arg/3
// for exchanges):
//
//	key                            classic  quorum  stream  source
//	message-ttl, expires           min      min     -       rabbit_amqqueue_process:process_args_policy/1,
//	max-length                     min      min     -         rabbit_quorum_queue:gather_policy_config/2
//	max-length-bytes               min      min     policy  (stream: rabbit_stream_queue:update_stream_conf/2)
//	delivery-limit                 -        dl      -       rabbit_quorum_queue:resolve_delivery_limit/2
//	overflow                       arg      policy  -       process_args_policy/1; gather_policy_config/2
//	dead-letter-exchange,          arg      arg     -       process_args_policy/1;
//	dead-letter-routing-key                                   rabbit_quorum_queue:dead_letter_handler/2
//	dead-letter-strategy           -        arg     -       dead_letter_handler/2
//	consumer-timeout               min      min     min     rabbit_queue_type:get_consumer_timeout/2
//	consumer-disconnected-timeout  -        min     -       rabbit_quorum_queue:get_consumer_disconnected_timeout/1
//	delayed-retry-type             -        policy  -       rabbit_quorum_queue:get_delayed_retry_config/1
//	delayed-retry-min, -max        -        min     -       get_delayed_retry_config/1
//	queue-leader-locator           policy   policy  policy  rabbit_queue_location:leader_locator/1
//	max-age, initial-cluster-size, -        -       policy  rabbit_stream_queue:policy_precedence/2
//	stream-max-segment-size-bytes,
//	stream-filter-size-bytes
//	alternate-exchange (exchange)  arg                      rabbit_exchange:process_alternate/2
//	history-max-length-bytes       min      min     -       Warren's queue history
//	history-max-age                age      age     -       Warren's queue history
//
// min: the smaller of the two; dl: the smaller, unless either is negative
// (unlimited), then the larger; arg: the argument wins; policy: the
// policy wins; age: the shorter of two max-age durations (the one that
// parses, when only one does). "-" marks a key the queue type does not
// read (and, for policies, refuses: see unsupported); EffectiveQueueArg still
// answers for it, with the rule of the type that reads it. A key not in
// the table resolves as rabbit_policy:get_arg/3 does: the argument wins.
// When only one side has the key, it is the value.

// keyAlternateExchange is the one key exchanges take as an argument
// without the x- prefix.
const keyAlternateExchange = "alternate-exchange"

type argRule uint8

const (
	ruleArg argRule = iota
	rulePolicy
	ruleMin
	ruleDeliveryLimit
	ruleMinAge
)

// precedence returns the rule for a policy key on a queue of type typ
// (KindExchange for exchanges).
func precedence(typ, key string) argRule {
	switch key {
	case "message-ttl", "expires", "max-length", "consumer-timeout",
		"consumer-disconnected-timeout", "delayed-retry-min", "delayed-retry-max":
		return ruleMin
	case "history-max-length-bytes":
		return ruleMin
	case "history-max-age":
		return ruleMinAge
	case "max-length-bytes":
		if typ == KindStream {
			return rulePolicy
		}
		return ruleMin
	case "delivery-limit":
		return ruleDeliveryLimit
	case "overflow":
		if typ == KindQuorum {
			return rulePolicy
		}
		return ruleArg
	case "queue-leader-locator", "delayed-retry-type", "max-age", "initial-cluster-size",
		"stream-max-segment-size-bytes", "stream-filter-size-bytes":
		return rulePolicy
	}
	return ruleArg
}

// EffectiveArg returns the value that applies for key on a queue or
// exchange declared with args under policy pol (the zero Policy when none
// applies), with the queue type taken from args' x-queue-type (classic
// when absent, as for exchanges). See EffectiveQueueArg.
func EffectiveArg(key string, args map[string]any, pol Policy) (any, bool) {
	typ, ok := args["x-queue-type"].(string)
	if !ok {
		typ = KindClassic
	}
	return EffectiveQueueArg(typ, key, args, pol)
}

// EffectiveQueueArg returns the value that applies for key on an entity
// of queue type typ (or KindExchange) declared with args under
// policy pol, by the precedence table above; false when neither sets it.
// key is the policy key ("message-ttl"; "x-message-ttl" is accepted too):
// the argument read is "x-"+key, except "alternate-exchange", which
// exchanges take unprefixed. Integers come back as int64, strings as
// string.
func EffectiveQueueArg(typ, key string, args map[string]any, pol Policy) (any, bool) {
	if typ == "queue" {
		typ = KindClassic
	}
	key = strings.TrimPrefix(key, "x-")
	argKey := "x-" + key
	if key == keyAlternateExchange {
		argKey = key
	}
	av, hasArg := args[argKey]
	pv, hasPol := pol.Definition[key]
	switch {
	case !hasArg && !hasPol:
		return nil, false
	case !hasPol:
		return normalizeArg(av), true
	case !hasArg:
		return normalizeArg(pv), true
	}
	av, pv = normalizeArg(av), normalizeArg(pv)
	switch precedence(typ, key) {
	case rulePolicy:
		return pv, true
	case ruleMinAge:
		as, _ := av.(string)
		ps, _ := pv.(string)
		a, aok := ParseMaxAge(as)
		p, pok := ParseMaxAge(ps)
		if pok && (!aok || p < a) {
			return pv, true
		}
		return av, true
	case ruleMin, ruleDeliveryLimit:
		a, aok := av.(int64)
		p, pok := pv.(int64)
		switch {
		case !aok && !pok:
			return av, true
		case !aok:
			// Erlang's term order puts numbers before everything else,
			// so min/2 picks the number.
			return p, true
		case !pok:
			return a, true
		}
		if precedence(typ, key) == ruleDeliveryLimit && (a < 0 || p < 0) {
			return max(a, p), true
		}
		return min(a, p), true
	}
	return av, true
}

// normalizeArg returns integers (AMQP integer types, json.Number) as
// int64 and binaries as strings; floats are not integers here.
func normalizeArg(v any) any {
	switch x := v.(type) {
	case float32, float64:
		return v
	case []byte:
		return string(x)
	}
	if n, ok := intOf(v); ok {
		return n
	}
	return v
}

// ParseMaxAge parses RabbitMQ's max-age form, of the x-max-age argument
// and the max-age policy key (fieldval.ParseMaxAge).
func ParseMaxAge(s string) (time.Duration, bool) { return fieldval.ParseMaxAge(s) }
