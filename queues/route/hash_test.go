package route

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"
)

// counts returns how many keys each queue got.
func counts(p map[string]string) map[string]int {
	n := map[string]int{}
	for _, q := range p {
		n[q]++
	}
	return n
}

// checkRing checks a consistent hash exchange's ring: sorted, and each
// destination owning hashPointsPerWeight points per unit of its largest
// weight.
func checkRing(t testing.TB, ix *Index, x string, wantWeights map[string]int) {
	t.Helper()
	c := ix.Exchange(x).router.(*consistentHashRouter)
	if !slices.IsSortedFunc(c.ring, c.cmpPoints) {
		t.Fatal("ring not sorted")
	}
	got := map[string]int{}
	for _, p := range c.ring {
		got[c.slots[p.slot].key.name]++
	}
	if len(got) != len(wantWeights) || len(c.dests) != len(wantWeights) {
		t.Fatalf("ring owners %v, want weights %v", got, wantWeights)
	}
	for q, w := range wantWeights {
		if got[q] != w*hashPointsPerWeight {
			t.Fatalf("%s owns %d points, want %d", q, got[q], w*hashPointsPerWeight)
		}
	}
}

// Ensure a key always reaches the same queue, a fourth queue takes keys
// only for itself (about a quarter), and unbinding it puts every key back.
func TestConsistentHashRebalance(t *testing.T) {
	ix := NewIndex("/")
	declare(t, ix, "ch", "x-consistent-hash", nil)
	for _, q := range []string{"q1", "q2", "q3", "q4"} {
		addQueue(ix, q)
	}
	for _, q := range []string{"q1", "q2", "q3"} {
		bindQ(t, ix, "ch", q, "1", nil)
	}
	checkRing(t, ix, "ch", map[string]int{"q1": 1, "q2": 1, "q3": 1})
	keys := hashKeys(10_000)
	before := placement(t, ix, "ch", keys)
	if again := placement(t, ix, "ch", keys); !maps.Equal(before, again) {
		t.Fatal("placement changed with no binding change")
	}
	for q, n := range counts(before) {
		if n < 2500 || n > 4200 {
			t.Errorf("%s got %d of 10000 keys, want about a third", q, n)
		}
	}

	bindQ(t, ix, "ch", "q4", "1", nil)
	checkRing(t, ix, "ch", map[string]int{"q1": 1, "q2": 1, "q3": 1, "q4": 1})
	after := placement(t, ix, "ch", keys)
	moved := 0
	for _, k := range keys {
		switch {
		case after[k] == before[k]:
		case after[k] == "q4":
			moved++
		default:
			t.Fatalf("key %q moved from %s to %s, not to the new queue", k, before[k], after[k])
		}
	}
	if moved < 1700 || moved > 3300 {
		t.Errorf("%d of 10000 keys moved to the new queue, want about a quarter", moved)
	}
	t.Logf("shares of 3: %v; moved to the 4th: %d", counts(before), moved)

	// Unbinding (or deleting) it gives its keys back: the ring is a
	// function of the bindings.
	unbind(ix, BindingDef{Source: "ch", Dest: "q4", Key: "1"})
	if p := placement(t, ix, "ch", keys); !maps.Equal(p, before) {
		t.Fatal("placement differs after unbinding the fourth queue")
	}
	bindQ(t, ix, "ch", "q4", "1", nil)
	removeQueue(ix, "q4")
	if p := placement(t, ix, "ch", keys); !maps.Equal(p, before) {
		t.Fatal("placement differs after deleting the fourth queue")
	}
	// Removing a queue moves only its own keys.
	unbind(ix, BindingDef{Source: "ch", Dest: "q2", Key: "1"})
	for k, q := range placement(t, ix, "ch", keys) {
		if before[k] != "q2" && q != before[k] {
			t.Fatalf("key %q moved from %s to %s when q2 left", k, before[k], q)
		}
	}
	checkRing(t, ix, "ch", map[string]int{"q1": 1, "q3": 1})
}

// Ensure weights split keys in proportion: 1 and 3 give about 1:3 over
// 4,000 keys; a destination bound twice owns the points of its larger
// weight; an exchange destination owns points too.
func TestConsistentHashWeights(t *testing.T) {
	ix := NewIndex("/")
	declare(t, ix, "ch", "x-consistent-hash", nil)
	addQueue(ix, "light")
	addQueue(ix, "heavy")
	bindQ(t, ix, "ch", "light", "1", nil)
	bindQ(t, ix, "ch", "heavy", "3", nil)
	n := counts(placement(t, ix, "ch", hashKeys(4000)))
	if share := float64(n["light"]) / 4000; share < 0.20 || share > 0.30 {
		t.Errorf("weights 1:3 split %v, light share %.3f, want 0.25±0.05", n, share)
	}
	t.Logf("weights 1:3: %v", n)

	// Bound again with a larger weight: the larger counts; unbinding it
	// goes back to the smaller one.
	bindQ(t, ix, "ch", "light", "3", nil)
	checkRing(t, ix, "ch", map[string]int{"light": 3, "heavy": 3})
	bindQ(t, ix, "ch", "light", "2", nil)
	checkRing(t, ix, "ch", map[string]int{"light": 3, "heavy": 3})
	unbind(ix, BindingDef{Source: "ch", Dest: "light", Key: "3"})
	checkRing(t, ix, "ch", map[string]int{"light": 2, "heavy": 3})
	unbind(ix, BindingDef{Source: "ch", Dest: "light", Key: "2"})
	checkRing(t, ix, "ch", map[string]int{"light": 1, "heavy": 3})
	if got := counts(placement(t, ix, "ch", hashKeys(4000))); got["light"] != n["light"] {
		t.Fatalf("after unbinding the extra weights: %v, want %v", got, n)
	}

	// Through an exchange destination, which fans out.
	declare(t, ix, "ch2", "x-consistent-hash", nil)
	declare(t, ix, "fan", "fanout", nil)
	bindX(t, ix, "ch2", "fan", "1")
	bindQ(t, ix, "fan", "light", "", nil)
	bindQ(t, ix, "fan", "heavy", "", nil)
	wantRoute(t, ix, "ch2", nil, []string{"k"}, "heavy", "light")
	// No binding: unroutable, so the alternate exchange is tried.
	declare(t, ix, "empty", "x-consistent-hash", map[string]any{"alternate-exchange": "fan"})
	wantRoute(t, ix, "empty", nil, []string{"k"}, "heavy", "light")
}

// Ensure hash-header and hash-property route on the header or property,
// a header's value by its text, and a message lacking it to one queue.
func TestConsistentHashHeaderAndProperty(t *testing.T) {
	ix := NewIndex("/")
	queues := []string{"q1", "q2", "q3", "q4", "q5"}
	declare(t, ix, "rk", "x-consistent-hash", nil)
	declare(t, ix, "hdr", "x-consistent-hash", map[string]any{"hash-header": "shard"})
	for _, p := range []string{"message_id", "correlation_id", "timestamp"} {
		declare(t, ix, p, "x-consistent-hash", map[string]any{"hash-property": p})
	}
	for _, q := range queues {
		addQueue(ix, q)
		for _, x := range []string{"rk", "hdr", "message_id", "correlation_id", "timestamp"} {
			bindQ(t, ix, x, q, "1", nil)
		}
	}
	one := func(x string, m *RoutingMessage) string {
		t.Helper()
		qs := routeMessage(t, ix, x, m)
		if len(qs) != 1 {
			t.Fatalf("%s: routed to %q", x, qs)
		}
		return qs[0]
	}
	// The routing key: the same key lands with a header of that text,
	// whatever the routing key of the header message, and integer widths
	// do not matter.
	seen := map[string]bool{}
	for i := range 200 {
		k := strconv.Itoa(i)
		want := one("rk", &RoutingMessage{Keys: []string{k}})
		seen[want] = true
		for _, v := range []any{k, []byte(k), int8(i), int64(i), uint32(i), []any{k, "ignored"}} {
			if i > 127 {
				if _, small := v.(int8); small {
					continue
				}
			}
			m := &RoutingMessage{Keys: []string{"other" + k}, Headers: map[string]any{"shard": v}}
			if got := one("hdr", m); got != want {
				t.Fatalf("header %T %v went to %s, routing key %q to %s", v, v, got, k, want)
			}
		}
		// CC keys do not move a message.
		if got := one("rk", &RoutingMessage{Keys: []string{k, "cc1", "cc2"}}); got != want {
			t.Fatalf("with CC keys %q went to %s, not %s", k, got, want)
		}
		props := []struct {
			x     string
			props RoutingProps
		}{
			{"message_id", RoutingProps{MessageID: []byte(k), CorrelationID: []byte("c")}},
			{"correlation_id", RoutingProps{CorrelationID: []byte(k), MessageID: []byte("m")}},
			{"timestamp", RoutingProps{Timestamp: uint64(i), HasTimestamp: true, MessageID: []byte("m")}},
		}
		for _, p := range props {
			if got := one(p.x, &RoutingMessage{Keys: []string{"x" + k}, Props: p.props}); got != want {
				t.Fatalf("%s %q went to %s, routing key to %s", p.x, k, got, want)
			}
		}
	}
	if len(seen) != len(queues) {
		t.Fatalf("200 keys reached only %v", seen)
	}
	// Without the header or property: all to the queue of the empty key.
	empty := one("rk", &RoutingMessage{Keys: []string{""}})
	for i := range 50 {
		k := []string{strconv.Itoa(i)}
		for x, m := range map[string]*RoutingMessage{
			"hdr":            {Keys: k, Headers: map[string]any{"other": "v"}},
			"message_id":     {Keys: k},
			"correlation_id": {Keys: k, Props: RoutingProps{MessageID: []byte(k[0])}},
			"timestamp":      {Keys: k},
		} {
			if got := one(x, m); got != empty {
				t.Fatalf("%s without its value went to %s, want %s", x, got, empty)
			}
		}
	}
	// Route (no properties) and a void header hash as absent too.
	if got := one("hdr", &RoutingMessage{Keys: []string{"z"}, Headers: map[string]any{"shard": nil}}); got != empty {
		t.Fatalf("void header went to %s, want %s", got, empty)
	}
	wantRoute(t, ix, "message_id", nil, []string{"z"}, empty)
	// Other header types hash consistently.
	for _, v := range []any{true, 1.5, float32(2.5), time.Unix(1700000000, 0), map[string]any{"a": int32(1)}, []any{}} {
		m := &RoutingMessage{Keys: []string{"a"}, Headers: map[string]any{"shard": v}}
		first := one("hdr", m)
		m.Keys = []string{"b"}
		if got := one("hdr", m); got != first {
			t.Fatalf("header %T %v went to %s then %s", v, v, first, got)
		}
	}
	if one("hdr", &RoutingMessage{Headers: map[string]any{"shard": time.Unix(1700000000, 0)}}) !=
		one("rk", &RoutingMessage{Keys: []string{"1700000000"}}) {
		t.Fatal("a timestamp header does not hash as its seconds")
	}
}

// Ensure x-modulus-hash spreads keys over its bindings, a destination
// bound twice counts twice, and placement depends on the set of bindings
// only.
func TestModulusHash(t *testing.T) {
	mk := func(order []string) *Index {
		ix := NewIndex("/")
		declare(t, ix, "m", "x-modulus-hash", nil)
		for _, q := range order {
			addQueue(ix, q)
			bindQ(t, ix, "m", q, "", nil)
		}
		return ix
	}
	ix := mk([]string{"q1", "q2", "q3"})
	keys := hashKeys(6000)
	p := placement(t, ix, "m", keys)
	for q, n := range counts(p) {
		if n < 1700 || n > 2300 {
			t.Errorf("%s got %d of 6000 keys, want about 2000", q, n)
		}
	}
	if again := placement(t, mk([]string{"q3", "q1", "q2"}), "m", keys); !maps.Equal(p, again) {
		t.Fatal("placement depends on the binding order")
	}
	// CC keys do not move a message.
	wantRoute(t, ix, "m", nil, []string{"key-1", "cc"}, p["key-1"])
	// A second binding of q1 gives it half.
	bindQ(t, ix, "m", "q1", "again", nil)
	if n := counts(placement(t, ix, "m", keys)); n["q1"] < 2700 || n["q1"] > 3300 {
		t.Errorf("q1 bound twice got %v", n)
	}
	unbind(ix, BindingDef{Source: "m", Dest: "q1", Key: "again"})
	if again := placement(t, ix, "m", keys); !maps.Equal(p, again) {
		t.Fatal("placement differs after unbinding the second binding")
	}
	removeQueue(ix, "q2")
	if n := counts(placement(t, ix, "m", keys)); n["q2"] != 0 || n["q1"]+n["q3"] != len(keys) {
		t.Fatalf("after q2 went: %v", n)
	}
}

// Ensure x-local-random sends each message to exactly one bound queue,
// each about equally often, and an unbound exchange's messages to its
// alternate exchange.
func TestLocalRandom(t *testing.T) {
	ix := NewIndex("/")
	declare(t, ix, "r", "x-local-random", map[string]any{"alternate-exchange": "amq.fanout"})
	addQueue(ix, "ae")
	bindQ(t, ix, "amq.fanout", "ae", "", nil)
	wantRoute(t, ix, "r", nil, []string{"k"}, "ae")
	qs := []string{"q1", "q2", "q3"}
	for _, q := range qs {
		addQueue(ix, q)
		bindQ(t, ix, "r", q, "", nil)
	}
	const n = 6000
	got := map[string]int{}
	for i := range n {
		for _, q := range routed(t, ix, "r", nil, "k"+strconv.Itoa(i%3)) {
			got[q]++
		}
	}
	total := 0
	for _, q := range qs {
		// Binomial(6000, 1/3): σ ≈ 37; ±300 is 8σ.
		if got[q] < n/3-300 || got[q] > n/3+300 {
			t.Errorf("%s got %d of %d, want about %d", q, got[q], n, n/3)
		}
		total += got[q]
	}
	if total != n || got["ae"] != 0 {
		t.Fatalf("deliveries %v, want %d in all, one per message", got, n)
	}
	removeQueue(ix, "q1")
	removeQueue(ix, "q2")
	for range 20 {
		wantRoute(t, ix, "r", nil, []string{"k"}, "q3")
	}
}

// Ensure a consistent hash ring does not depend on the order points
// arrive in, collisions included.
func TestConsistentHashRingOrder(t *testing.T) {
	mk := func() *consistentHashRouter { return newConsistentHashRouter() }
	bd := func(q, key string) *Binding {
		return &Binding{def: BindingDef{Dest: q, Key: key}, q: &Queue{name: q}}
	}
	a, c := mk(), mk()
	names := []string{"a", "b", "c", "d", "e", "f"}
	for i, q := range names {
		a.add(bd(q, strconv.Itoa(1+i%3)))
	}
	for i := len(names) - 1; i >= 0; i-- {
		c.add(bd(names[i], strconv.Itoa(1+i%3)))
	}
	owner := func(r *consistentHashRouter) []string {
		out := make([]string, len(r.ring))
		for i, p := range r.ring {
			out[i] = fmt.Sprintf("%x/%s/%d", p.hash, r.slots[p.slot].key.name, p.idx)
		}
		return out
	}
	if !slices.Equal(owner(a), owner(c)) {
		t.Fatal("rings differ with the binding order")
	}
	// A forced collision sorts by owner, then index.
	r := mk()
	r.add(bd("x", "1"))
	r.add(bd("y", "1"))
	r.ring[0].hash, r.ring[1].hash = 0, 0
	slices.SortFunc(r.ring, r.cmpPoints)
	if k0, k1 := r.slots[r.ring[0].slot].key.name, r.slots[r.ring[1].slot].key.name; cmp.Compare(k0, k1) > 0 ||
		k0 == k1 && r.ring[0].idx > r.ring[1].idx {
		t.Fatalf("collision order %s/%d, %s/%d", k0, r.ring[0].idx, k1, r.ring[1].idx)
	}
}

// BenchmarkConsistentHashBind is the cost of binding a queue of weight
// w beside 10 queues of weight 10 (10,000 points): "points" hashes and
// sorts its points, before the change is applied; "apply" merges them
// into the ring and removes them again, which the broker does with the
// vhost's routing lock held.
func BenchmarkConsistentHashBind(b *testing.B) {
	for _, w := range []int{1, 10, 10_000} {
		c := newConsistentHashRouter()
		for i := range 10 {
			q := fmt.Sprintf("q%d", i)
			c.add(&Binding{def: BindingDef{Dest: q, Key: "10"}, q: &Queue{name: q}})
		}
		def := BindingDef{Dest: "new", Key: strconv.Itoa(w)}
		b.Run(fmt.Sprintf("w=%d/points", w), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				newBindingPoints(def)
			}
		})
		b.Run(fmt.Sprintf("w=%d/apply", w), func(b *testing.B) {
			pts := newBindingPoints(def)
			nb := &Binding{def: def, q: &Queue{name: "new"}}
			b.ReportAllocs()
			for range b.N {
				b.StopTimer()
				nb.ring = slices.Clone(pts)
				b.StartTimer()
				c.add(nb)
				c.remove(nb)
			}
		})
	}
}
