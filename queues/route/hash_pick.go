package route

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// Exchange types that route each message to one of their bindings:
// x-modulus-hash (rabbit_exchange_type_modulus_hash) and x-local-random
// (rabbit_exchange_type_local_random), both in RabbitMQ 4.x core.

// modulusHashRouter is an x-modulus-hash exchange: a message goes to the
// binding at index hash(routing key) mod the number of bindings, in a
// fixed order of the bindings (by destination name, kind, then identity),
// so placement is stable across restarts while the bindings are
// unchanged. Any binding key is accepted and ignored; a destination bound
// twice counts twice. Adding or removing a binding moves most keys (use
// x-consistent-hash to avoid that).
//
// RabbitMQ hashes erlang:phash2 of the list of the routing key and the CC
// keys, over the destinations sorted as resources; here the hash is
// xxhash64 of the routing key alone (CC and BCC keys do not move a
// message), so placements differ from RabbitMQ's.
type modulusHashRouter struct {
	sorted []*Binding // by cmpModulus
}

// cmpModulus is the order of an x-modulus-hash exchange's bindings.
func cmpModulus(a, b *Binding) int {
	return cmp.Or(strings.Compare(a.def.Dest, b.def.Dest), cmp.Compare(a.def.DestKind, b.def.DestKind),
		strings.Compare(a.ident, b.ident))
}

func (m *modulusHashRouter) add(b *Binding) {
	i, _ := slices.BinarySearchFunc(m.sorted, b, cmpModulus)
	m.sorted = slices.Insert(m.sorted, i, b)
}

func (m *modulusHashRouter) remove(b *Binding) { m.sorted = removeBinding(m.sorted, b) }

func (m *modulusHashRouter) route(r *routing, keys []string, _ map[string]any) {
	n := uint64(len(m.sorted))
	if n == 0 {
		return
	}
	var h uint64
	if len(keys) > 0 {
		h = xxhash.Sum64String(keys[0])
	} else {
		h = xxhash.Sum64(nil)
	}
	r.hit(m.sorted[h%n])
}

// localRandomRouter is an x-local-random exchange: each message goes to
// one binding picked uniformly at random. RabbitMQ picks among the bound
// queues local to the node that routes; on one node that is every bound
// queue. The broker lets only bindings with an empty key and a queue
// destination through.
type localRandomRouter struct {
	all []*Binding
}

func (l *localRandomRouter) add(b *Binding)    { l.all = append(l.all, b) }
func (l *localRandomRouter) remove(b *Binding) { l.all = removeBinding(l.all, b) }

func (l *localRandomRouter) route(r *routing, _ []string, _ map[string]any) {
	switch n := len(l.all); n {
	case 0:
	case 1:
		r.hit(l.all[0])
	default:
		r.hit(l.all[rand.IntN(n)])
	}
}
