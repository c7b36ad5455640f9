package policy

import (
	"cmp"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
)

// Apply-to values (rabbit_policy:apply_to_validation and the queue types'
// policy_apply_to_name/0).
const (
	ApplyAll           = "all"
	ApplyExchanges     = "exchanges"
	ApplyQueues        = "queues"
	ApplyClassicQueues = "classic_queues"
	ApplyQuorumQueues  = "quorum_queues"
	ApplyStreams       = "streams"
)

// Kinds of entity, as Set.Match and EffectiveQueueArg take them: exchanges,
// and queues by their type (x-queue-type).
const (
	KindExchange = "exchange"
	KindClassic  = "classic"
	KindQuorum   = "quorum"
	KindStream   = "stream"
)

// Policy is a RabbitMQ policy (rabbitmqctl set_policy).
type Policy struct {
	VHost   string
	Name    string
	Pattern string // regular expression, unanchored, matched against names
	// ApplyTo is one of the Apply* values; "" means "all".
	ApplyTo  string
	Priority int // the highest matching priority wins
	// Definition maps policy keys ("message-ttl", not "x-message-ttl") to
	// values: int64 for integers and string for strings once Compile has
	// validated it (it accepts any Go integer type, json.Number and
	// integral float64, as encoding/json decodes JSON).
	Definition map[string]any
}

// Compiled is a validated policy with its pattern compiled, made by
// Compile. Its Definition is never modified.
type Compiled struct {
	Policy
	re *regexp.Regexp
}

// Copy returns the policy with its own Definition.
func (c *Compiled) Copy() Policy {
	out := c.Policy
	out.Definition = maps.Clone(c.Definition)
	return out
}

// Set is the policies of one vhost, in resolution order: priority
// descending, then name. A Set is immutable (With and Without return new
// ones), so it may be shared without a lock. The nil *Set is empty.
type Set struct {
	list []*Compiled
}

// NewSet returns the set of list, whose names must be distinct. It sorts
// list and keeps it.
func NewSet(list []*Compiled) *Set {
	slices.SortFunc(list, func(a, b *Compiled) int {
		return cmp.Or(cmp.Compare(b.Priority, a.Priority), strings.Compare(a.Name, b.Name))
	})
	return &Set{list: list}
}

func (s *Set) all() []*Compiled {
	if s == nil {
		return nil
	}
	return s.list
}

// With returns s with c added, replacing the policy of the same name. It
// returns s and false when s already has c as it is: setting a policy to
// what it is changes nothing, as in RabbitMQ.
func (s *Set) With(c *Compiled) (*Set, bool) {
	var list []*Compiled
	for _, old := range s.all() {
		if old.Name != c.Name {
			list = append(list, old)
		} else if reflect.DeepEqual(old.Policy, c.Policy) {
			return s, false
		}
	}
	return NewSet(append(list, c)), true
}

// Without returns s without the policy name, or s and false when it has
// no such policy.
func (s *Set) Without(name string) (*Set, bool) {
	var list []*Compiled
	found := false
	for _, p := range s.all() {
		if p.Name == name {
			found = true
		} else {
			list = append(list, p)
		}
	}
	if !found {
		return s, false
	}
	return NewSet(list), true
}

// Get returns the policy name.
func (s *Set) Get(name string) (Policy, bool) {
	for _, p := range s.all() {
		if p.Name == name {
			return p.Copy(), true
		}
	}
	return Policy{}, false
}

// Policies returns the policies in the order rabbitmqctl list_policies
// prints them (rabbit_policy:sort_by_priority): priority ascending, then
// (where RabbitMQ's order is unspecified) name. It is nil for the nil Set.
func (s *Set) Policies() []Policy {
	if s == nil {
		return nil
	}
	out := make([]Policy, 0, len(s.list))
	for i := len(s.list) - 1; i >= 0; i-- {
		out = append(out, s.list[i].Copy())
	}
	slices.SortStableFunc(out, func(a, b Policy) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), strings.Compare(a.Name, b.Name))
	})
	return out
}

// Match returns the policy that applies to the entity name of kind, or
// nil, as rabbit_policy:match/2 chooses it: among the policies whose
// pattern matches the name anywhere (an unanchored regexp search, as
// rabbit_re:run; "^amq\." anchors it) and whose apply-to fits kind, the
// one with the highest priority. For queues, a policy with a key the queue
// type does not support (its capabilities' unsupported_policies, e.g.
// max-age for a classic queue) is skipped, so a lower priority one may
// apply. Between equal priorities RabbitMQ's choice depends on its table's
// order; here the smallest name wins.
func (s *Set) Match(name, kind string) *Compiled {
	if kind == "queue" {
		kind = KindClassic
	}
	for _, p := range s.all() {
		if fits(p.ApplyTo, kind) && applicable(kind, p.Definition) && p.re.MatchString(name) {
			return p
		}
	}
	return nil
}

// fits is rabbit_policy:matches_type/2 and matches_queue_type/3.
func fits(applyTo, kind string) bool {
	switch applyTo {
	case ApplyAll:
		return true
	case ApplyExchanges:
		return kind == KindExchange
	case ApplyQueues:
		return kind != KindExchange
	case ApplyClassicQueues:
		return kind == KindClassic
	case ApplyQuorumQueues:
		return kind == KindQuorum
	case ApplyStreams:
		return kind == KindStream
	}
	return false
}

// unsupported are the policy keys each queue type refuses
// (capabilities/0 of rabbit_classic_queue, rabbit_quorum_queue and
// rabbit_stream_queue, RabbitMQ 4.3.5), limited to the keys Compile
// accepts. A policy with one of them does not apply to such a queue
// (rabbit_queue_type:is_policy_applicable/2).
var unsupported = map[string][]string{
	KindClassic: {
		"max-age", "stream-max-segment-size-bytes", "initial-cluster-size",
		"delivery-limit", "dead-letter-strategy", "max-in-memory-length",
		"max-in-memory-bytes", "target-group-size",
	},
	KindQuorum: {
		"queue-mode", "queue-master-locator", "max-age",
		"stream-max-segment-size-bytes", "initial-cluster-size",
	},
	KindStream: {
		"expires", "message-ttl", "dead-letter-exchange", "dead-letter-routing-key",
		"max-length", "max-in-memory-length", "max-in-memory-bytes", "overflow",
		"queue-mode", "delivery-limit", "queue-master-locator",
		"dead-letter-strategy", "target-group-size",
		"history-max-age", "history-max-length-bytes", // a stream is all history
	},
}

// applicable is rabbit_queue_type:is_policy_applicable/2; every policy is
// applicable to exchanges.
func applicable(kind string, def map[string]any) bool {
	for _, k := range unsupported[kind] {
		if _, ok := def[k]; ok {
			return false
		}
	}
	return true
}
