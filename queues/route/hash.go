package route

import (
	"cmp"
	"encoding/binary"
	"slices"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
	"github.com/warren-mq/warren/queues/internal/fieldval"
)

// The x-consistent-hash exchange (rabbitmq_consistent_hash_exchange's
// rabbit_exchange_type_consistent_hash, RabbitMQ 4.3). The single-pick
// types, x-modulus-hash and x-local-random, are in hash_pick.go. The
// broker validates the arguments and binding keys before they get here
// (ValidHashProperty, ParseHashWeight).

// Exchange arguments of x-consistent-hash.
const (
	ArgHashHeader   = "hash-header"
	ArgHashProperty = "hash-property"
)

// MaxHashWeight is the largest x-consistent-hash binding weight
// (?MAX_BINDING_WEIGHT).
const MaxHashWeight = 10_000

// hashPointsPerWeight is the number of ring points one unit of binding
// weight owns. A ring with one point per unit splits keys as unevenly as
// the random arcs between a few points fall (a weight-1 queue beside a
// weight-3 one gets anywhere from almost nothing to most of the keys); a
// hundred points per unit keep a weight-1 queue's share typically within
// a tenth of its expected share (less for heavier ones), at 16 bytes a
// point: a weight-10,000 binding is a million points. Changing it moves
// keys on upgrade, as changing appendPointName does.
const hashPointsPerWeight = 100

// hashSource says what x-consistent-hash hashes.
type hashSource uint8

const (
	hashRoutingKey    hashSource = iota // the routing key (the default)
	hashHeader                          // the header named by hash-header
	hashMessageID                       // hash-property message_id
	hashCorrelationID                   // hash-property correlation_id
	hashTimestamp                       // hash-property timestamp
)

// hashProperties are hash-property's values (?PROPERTIES).
var hashProperties = map[string]hashSource{
	"correlation_id": hashCorrelationID,
	"message_id":     hashMessageID,
	"timestamp":      hashTimestamp,
}

// ValidHashProperty reports whether name is a property hash-property may
// name.
func ValidHashProperty(name string) bool {
	_, ok := hashProperties[name]
	return ok
}

// ParseHashWeight parses a binding key as Erlang's list_to_integer does:
// an optional sign and one or more decimal digits, nothing else. Values
// beyond MaxHashWeight come back as MaxHashWeight+1, negative ones as -1.
func ParseHashWeight(key string) (int, bool) {
	s := key
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if s == "" {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n <= MaxHashWeight {
			n = n*10 + int(c-'0')
		}
	}
	n = min(n, MaxHashWeight+1)
	if neg && n > 0 {
		return -1, true
	}
	return n, true
}

// consistentHashRouter is an x-consistent-hash exchange: a hash ring on
// which each bound destination owns hashPointsPerWeight points per unit
// of its binding's weight. A message goes to the destination owning the
// first point at or after its key's hash (wrapping around), so the same
// key reaches the same destination while the bindings are unchanged, and
// a new binding takes keys only from the arcs its points split.
//
// The key is the routing key (not the CC keys), the value of the header
// named by the exchange's hash-header argument, or the message property
// named by hash-property (message_id, correlation_id, or timestamp in
// seconds as a decimal string). A message lacking the header or property
// hashes as an empty value: all such messages go to one destination, as
// RabbitMQ sends them wherever erlang:phash2(undefined) falls. A header
// value is hashed by its text: strings and byte arrays by their bytes,
// integers (of any width) and timestamps (in seconds) in decimal, so that
// a header "42" and a routing key "42" land together; an array by its
// first element, as RabbitMQ does.
//
// A destination bound more than once owns the points of its largest
// weight (RabbitMQ keeps the first binding's weight and ignores later
// ones, and removing any one of them takes the destination off the ring).
//
// Unlike RabbitMQ, placement does not depend on the order bindings were
// made in, and so survives a restart unchanged. RabbitMQ numbers buckets
// in binding order (each destination takes its weight's worth of bucket
// numbers at the end) and picks a bucket by jump consistent hashing of
// erlang:phash2 of the key: placement depends on that order, and removing
// a binding renumbers the buckets after it, moving keys between the other
// destinations. Here a point's position is xxhash64 of the destination's
// kind, name and the point's index, so the ring is a function of the set
// of bindings alone, reloaded in any order; removing a binding moves only
// the keys it owned. Placement differs from RabbitMQ's for the same
// topology (the hashes differ anyway).
type consistentHashRouter struct {
	on     hashSource
	header string // when on == hashHeader

	dests map[hashDestKey]*hashDest
	slots []*hashDest // by slot; nil when free
	free  []uint32    // free slots
	ring  []ringPoint // sorted by cmpPoints
}

// hashDestKey identifies a binding destination.
type hashDestKey struct {
	kind DestKind
	name string
}

// hashDest is a destination on the ring.
type hashDest struct {
	key      hashDestKey
	slot     uint32
	bindings []*Binding // bindings to the destination; hit uses the first
	points   uint32     // points owned: indexes 0 to points-1
}

// ringPoint is a point on the ring: 16 bytes.
type ringPoint struct {
	hash uint64
	slot uint32 // the owner's slot
	idx  uint32 // the point's index within its owner
}

func newConsistentHashRouter() *consistentHashRouter {
	return &consistentHashRouter{dests: map[hashDestKey]*hashDest{}}
}

// configure reads the exchange's hash-header and hash-property arguments
// (validated at declaration).
func (c *consistentHashRouter) configure(args map[string]any) {
	if h, ok := args[ArgHashHeader].(string); ok {
		c.on, c.header = hashHeader, h
	} else if p, ok := args[ArgHashProperty].(string); ok {
		c.on = hashProperties[p]
	}
}

func (c *consistentHashRouter) add(b *Binding) {
	k := hashDestKey{b.def.DestKind, b.def.Dest}
	d := c.dests[k]
	if d == nil {
		d = &hashDest{key: k}
		if n := len(c.free); n > 0 {
			d.slot = c.free[n-1]
			c.free = c.free[:n-1]
			c.slots[d.slot] = d
		} else {
			d.slot = uint32(len(c.slots))
			c.slots = append(c.slots, d)
		}
		c.dests[k] = d
	}
	d.bindings = append(d.bindings, b)
	c.resize(d, b.ring)
	b.ring = nil
}

func (c *consistentHashRouter) remove(b *Binding) {
	k := hashDestKey{b.def.DestKind, b.def.Dest}
	d := c.dests[k]
	if d == nil {
		return
	}
	d.bindings = removeBinding(d.bindings, b)
	c.resize(d, nil)
	if len(d.bindings) == 0 {
		delete(c.dests, k)
		c.slots[d.slot] = nil
		c.free = append(c.free, d.slot)
	}
}

// resize gives d the points of its largest binding weight. pts, when it
// has them all, are those points (from hashPoints); else they are
// computed.
func (c *consistentHashRouter) resize(d *hashDest, pts []ringPoint) {
	w := 0
	for _, b := range d.bindings {
		w = max(w, bindingHashWeight(b.def.Key))
	}
	want := uint32(w * hashPointsPerWeight)
	switch {
	case want > d.points:
		if uint32(len(pts)) != want {
			pts = hashPoints(d.key, w)
		}
		pts = slices.DeleteFunc(pts, func(p ringPoint) bool { return p.idx < d.points })
		for i := range pts {
			pts[i].slot = d.slot
		}
		c.merge(pts)
	case want < d.points:
		c.ring = slices.DeleteFunc(c.ring, func(p ringPoint) bool { return p.slot == d.slot && p.idx >= want })
		if cap(c.ring) > 2*len(c.ring)+4096 {
			c.ring = slices.Clone(c.ring) // give back a heavy binding's room
		}
	}
	d.points = want
}

// bindingHashWeight is the weight of a binding with key (validated by
// the broker before binding): 0 if invalid.
func bindingHashWeight(key string) int {
	w, ok := ParseHashWeight(key)
	if !ok || w < 1 {
		return 0
	}
	return min(w, MaxHashWeight)
}

// hashPoints returns the points of destination k at weight w, sorted,
// without their slot. Bindings get theirs before the change is applied
// (Index.NewBinding), so that a heavy binding does not hold exclusive
// access to the index while its points are hashed and sorted.
func hashPoints(k hashDestKey, w int) []ringPoint {
	n := uint32(w * hashPointsPerWeight)
	pts := make([]ringPoint, n)
	var buf []byte
	for i := range n {
		buf = appendPointName(buf[:0], k, i)
		pts[i] = ringPoint{hash: xxhash.Sum64(buf), idx: i}
	}
	slices.SortFunc(pts, func(a, b ringPoint) int {
		return cmp.Or(cmp.Compare(a.hash, b.hash), cmp.Compare(a.idx, b.idx))
	})
	return pts
}

// newBindingPoints returns the points of an x-consistent-hash binding.
func newBindingPoints(def BindingDef) []ringPoint {
	return hashPoints(hashDestKey{def.DestKind, def.Dest}, bindingHashWeight(def.Key))
}

// merge merges sorted points, of one owner, into the ring.
func (c *consistentHashRouter) merge(pts []ringPoint) {
	// From the back, in place.
	i := len(c.ring) - 1
	c.ring = slices.Grow(c.ring, len(pts))[:len(c.ring)+len(pts)]
	j := len(pts) - 1
	for k := len(c.ring) - 1; j >= 0; k-- {
		if i >= 0 && (c.ring[i].hash > pts[j].hash || c.ring[i].hash == pts[j].hash && c.cmpPoints(c.ring[i], pts[j]) > 0) {
			c.ring[k] = c.ring[i]
			i--
		} else {
			c.ring[k] = pts[j]
			j--
		}
	}
}

// appendPointName appends what a point's position hashes: the owner's
// kind, its name and the point's index. Part of the placement of keys
// across restarts: do not change.
func appendPointName(b []byte, k hashDestKey, idx uint32) []byte {
	b = append(b, byte(k.kind))
	b = binary.BigEndian.AppendUint32(b, idx)
	return append(b, k.name...)
}

// cmpPoints orders points by hash, then (on a collision) by owner and
// index, so that the ring does not depend on the order of insertion.
func (c *consistentHashRouter) cmpPoints(a, b ringPoint) int {
	if a.hash != b.hash {
		return cmp.Compare(a.hash, b.hash)
	}
	ka, kb := c.slots[a.slot].key, c.slots[b.slot].key
	return cmp.Or(cmp.Compare(ka.kind, kb.kind), strings.Compare(ka.name, kb.name), cmp.Compare(a.idx, b.idx))
}

func (c *consistentHashRouter) route(r *routing, keys []string, headers map[string]any) {
	if len(c.ring) == 0 {
		return
	}
	h := c.keyHash(r, keys, headers)
	// The first point at or after h, wrapping to the first.
	lo, hi := 0, len(c.ring)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if c.ring[m].hash < h {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == len(c.ring) {
		lo = 0
	}
	r.hit(c.slots[c.ring[lo].slot].bindings[0])
}

// keyHash hashes what the exchange routes on.
func (c *consistentHashRouter) keyHash(r *routing, keys []string, headers map[string]any) uint64 {
	var buf [24]byte
	switch c.on {
	case hashHeader:
		return hashFieldValue(headers[c.header])
	case hashMessageID:
		return xxhash.Sum64(r.props.MessageID)
	case hashCorrelationID:
		return xxhash.Sum64(r.props.CorrelationID)
	case hashTimestamp:
		if !r.props.HasTimestamp {
			return xxhash.Sum64(nil)
		}
		return xxhash.Sum64(strconv.AppendUint(buf[:0], r.props.Timestamp, 10))
	}
	if len(keys) == 0 {
		return xxhash.Sum64(nil)
	}
	return xxhash.Sum64String(keys[0])
}

// hashFieldValue hashes a header value by its text (see
// consistentHashRouter); nil (absent or void) hashes as empty.
func hashFieldValue(v any) uint64 {
	var buf [32]byte
	switch x := v.(type) {
	case nil:
		return xxhash.Sum64(nil)
	case string:
		return xxhash.Sum64String(x)
	case []byte:
		return xxhash.Sum64(x)
	case bool:
		return xxhash.Sum64String(strconv.FormatBool(x))
	case float32:
		return xxhash.Sum64(strconv.AppendFloat(buf[:0], float64(x), 'g', -1, 32))
	case float64:
		return xxhash.Sum64(strconv.AppendFloat(buf[:0], x, 'g', -1, 64))
	case []any:
		if len(x) == 0 {
			return xxhash.Sum64(nil)
		}
		return hashFieldValue(x[0])
	}
	if i, ok := fieldval.Int(v); ok {
		return xxhash.Sum64(i.AppendText(buf[:0]))
	}
	// Tables and decimals: their canonical encoding (allocates).
	return xxhash.Sum64(fieldval.AppendValue(nil, v))
}
