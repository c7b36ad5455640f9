package queues

import (
	"strings"

	"github.com/warren-mq/warren/queues/route"
)

// The exchange types' checks of a declaration and of a binding
// (validate/1 and validate_binding/2 of RabbitMQ's exchange type
// modules), with RabbitMQ's reply texts.

// maxTopicHashes is the most '#' words a topic binding key may have
// (rabbit_exchange_type_topic ?MAX_HASH_WILDCARDS, RabbitMQ 4.3.5).
const maxTopicHashes = 2

// validateBinding is the exchange type's validate_binding.
func validateBinding(typ string, def BindingDef) error {
	switch typ {
	case ExchangeHeaders:
		return validateXMatch(def.Args)
	case ExchangeConsistentHash:
		return validateHashWeight(def.Key)
	case ExchangeLocalRandom:
		return validateLocalRandomBinding(def)
	case ExchangeTopic:
		n := 0
		for w := range strings.SplitSeq(def.Key, ".") {
			if w == "#" {
				n++
			}
		}
		if n > maxTopicHashes {
			return Errorf(CodePreconditionFailed, "Topic binding key '%s' uses %d '#' wildcards, at most %d are allowed",
				def.Key, n, maxTopicHashes)
		}
	}
	return nil
}

// validateExchangeArgs is the exchange type's validate, run on the
// declaration of a new exchange after the alternate-exchange check, as
// rabbit_exchange:declare does.
func validateExchangeArgs(def ExchangeDef) error {
	if def.Type != ExchangeConsistentHash {
		return nil
	}
	for _, k := range []string{route.ArgHashHeader, route.ArgHashProperty} {
		if v, ok := def.Args[k]; ok {
			if _, isStr := v.(string); !isStr {
				// RabbitMQ's hash_args matches longstr only and fails
				// with a case_clause (541) on anything else.
				return Errorf(CodePreconditionFailed, "invalid type '%s' for arg '%s' in %s",
					fieldType(v), k, rs("exchange", def.Name, def.VHost))
			}
		}
	}
	_, hasHeader := def.Args[route.ArgHashHeader]
	property, hasProperty := def.Args[route.ArgHashProperty].(string)
	switch {
	case hasHeader && hasProperty:
		return Errorf(CodePreconditionFailed, "hash-header and hash-property are mutually exclusive")
	case hasProperty:
		if !route.ValidHashProperty(property) {
			return Errorf(CodePreconditionFailed, "Unsupported property: %s", property)
		}
	}
	return nil
}

// validateHashWeight is x-consistent-hash's validate_binding: the key is
// the binding's weight, a decimal integer from 1 to route.MaxHashWeight.
func validateHashWeight(key string) error {
	w, ok := route.ParseHashWeight(key)
	switch {
	case !ok:
		return Errorf(CodePreconditionFailed, "The binding key must be an integer: %s", termBinary(key))
	case w < 1:
		return Errorf(CodePreconditionFailed, "The binding key must be greater than 0")
	case w > route.MaxHashWeight:
		return Errorf(CodePreconditionFailed, "The binding key must not exceed %d", route.MaxHashWeight)
	}
	return nil
}

// validateXMatch is rabbit_exchange_type_headers:validate_binding.
func validateXMatch(args map[string]any) error {
	v, ok := args["x-match"]
	if !ok {
		return nil
	}
	s, isStr := v.(string)
	if !isStr {
		return Errorf(CodePreconditionFailed, "Invalid x-match field type %s (value %s); expected longstr",
			fieldType(v), termText(v))
	}
	switch s {
	case route.XMatchAll, route.XMatchAny, route.XMatchAllWithX, route.XMatchAnyWithX:
		return nil
	}
	return Errorf(CodePreconditionFailed, "Invalid x-match field value %s; expected all, any, all-with-x, or any-with-x",
		termBinary(s))
}

// validateLocalRandomBinding is x-local-random's validate_binding: the
// key must be empty, then the destination must be a queue. RabbitMQ also
// refuses queues other than classic ones ("Queue type rabbit_quorum_queue
// not valid for this exchange type"); every queue here is classic.
func validateLocalRandomBinding(def BindingDef) error {
	if def.Key != "" {
		return Errorf(CodePreconditionFailed, "Non empty binding '%s' key not permitted", def.Key)
	}
	if def.DestKind != DestQueue {
		return Errorf(CodePreconditionFailed, "Destination not found")
	}
	return nil
}
