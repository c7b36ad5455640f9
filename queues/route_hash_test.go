package queues

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"
)

// placement routes each key through exchange x and returns the queue it
// reached; each must reach exactly one.
func placement(t testing.TB, b *Broker, x string, keys []string) map[string]string {
	t.Helper()
	out := make(map[string]string, len(keys))
	var dst []string
	for _, k := range keys {
		qs, err := b.Route("/", x, []string{k}, nil, dst[:0])
		must(t, err)
		if len(qs) != 1 {
			t.Fatalf("key %q reached %q, want one queue", k, qs)
		}
		out[k] = qs[0]
		dst = qs
	}
	return out
}

// counts returns how many keys each queue got.
func counts(p map[string]string) map[string]int {
	n := map[string]int{}
	for _, q := range p {
		n[q]++
	}
	return n
}

func hashKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i)
	}
	return keys
}

// checkRing checks a consistent hash exchange's ring: sorted, and each
// destination owning hashPointsPerWeight points per unit of its largest
// weight.
func checkRing(t testing.TB, b *Broker, x string, wantWeights map[string]int) {
	t.Helper()
	vt, err := b.topoVHost("/")
	must(t, err)
	vt.mu.RLock()
	defer vt.mu.RUnlock()
	c := vt.exchanges[x].router.(*consistentHashRouter)
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

// Ensure the declaration checks of the types beyond the four: known
// types, x-consistent-hash's hash-header/hash-property and binding
// weights, x-local-random's binding key and destination, with RabbitMQ's
// texts.
func TestHashExchangeValidation(t *testing.T) {
	b := newTopoBroker(t, t.TempDir())
	b.topoQueueAdded("/", "q", false)
	for _, typ := range []string{"x-consistent-hash", "x-modulus-hash", "x-local-random"} {
		declare(t, b, typ, typ, false, nil)
	}
	wantErr(t, b.DeclareExchange(ExchangeDef{VHost: "/", Name: "u", Type: "x-random"}),
		CodePreconditionFailed, "PRECONDITION_FAILED - unknown exchange type 'x-random'")

	for _, c := range []struct {
		args map[string]any
		text string // "" when valid
	}{
		{map[string]any{"hash-header": "h"}, ""},
		{map[string]any{"hash-property": "message_id"}, ""},
		{map[string]any{"hash-property": "correlation_id"}, ""},
		{map[string]any{"hash-property": "timestamp"}, ""},
		{map[string]any{"hash-property": "app_id"}, "PRECONDITION_FAILED - Unsupported property: app_id"},
		{map[string]any{"hash-header": "h", "hash-property": "message_id"},
			"PRECONDITION_FAILED - hash-header and hash-property are mutually exclusive"},
		{map[string]any{"hash-header": int32(1)},
			"PRECONDITION_FAILED - invalid type 'signedint' for arg 'hash-header' in exchange 'ch' in vhost '/'"},
	} {
		err := b.DeclareExchange(ExchangeDef{VHost: "/", Name: "ch", Type: "x-consistent-hash", Args: c.args})
		if c.text == "" {
			must(t, err)
			must(t, b.DeleteExchange("/", "ch", false))
		} else {
			wantErr(t, err, CodePreconditionFailed, c.text)
		}
	}
	// Redeclaring with other hash arguments is equivalent, as in RabbitMQ
	// (only alternate-exchange is compared), and keeps the first ones.
	declare(t, b, "hh", "x-consistent-hash", false, map[string]any{"hash-header": "h"})
	declare(t, b, "hh", "x-consistent-hash", false, map[string]any{"hash-header": "other"})
	if x, _ := b.Exchange("/", "hh"); x.Args["hash-header"] != "h" {
		t.Fatalf("hh args %v", x.Args)
	}

	for _, c := range []struct {
		key, text string
	}{
		{"1", ""}, {"+7", ""}, {"10000", ""}, {"007", ""},
		{"0", "PRECONDITION_FAILED - The binding key must be greater than 0"},
		{"-3", "PRECONDITION_FAILED - The binding key must be greater than 0"},
		{"10001", "PRECONDITION_FAILED - The binding key must not exceed 10000"},
		{"99999999999999999999999", "PRECONDITION_FAILED - The binding key must not exceed 10000"},
		{"", `PRECONDITION_FAILED - The binding key must be an integer: <<>>`},
		{"abc", `PRECONDITION_FAILED - The binding key must be an integer: <<"abc">>`},
		{" 1", `PRECONDITION_FAILED - The binding key must be an integer: <<" 1">>`},
		{"1.5", `PRECONDITION_FAILED - The binding key must be an integer: <<"1.5">>`},
		{"+", `PRECONDITION_FAILED - The binding key must be an integer: <<"+">>`},
	} {
		def := BindingDef{VHost: "/", Source: "x-consistent-hash", DestKind: DestQueue, Dest: "q", Key: c.key}
		err := b.Bind(def)
		if c.text == "" {
			must(t, err)
			must(t, b.Unbind(def))
		} else {
			wantErr(t, err, CodePreconditionFailed, c.text)
		}
	}
	// The source and destination are checked first.
	wantErr(t, b.Bind(BindingDef{VHost: "/", Source: "x-consistent-hash", Dest: "nope", Key: "x"}),
		CodeNotFound, "NOT_FOUND - no queue 'nope' in vhost '/'")
	bindX(t, b, "x-consistent-hash", "amq.fanout", "2") // to an exchange

	wantErr(t, b.Bind(BindingDef{VHost: "/", Source: "x-local-random", Dest: "q", Key: "k"}),
		CodePreconditionFailed, "PRECONDITION_FAILED - Non empty binding 'k' key not permitted")
	wantErr(t, b.Bind(BindingDef{VHost: "/", Source: "x-local-random", DestKind: DestExchange, Dest: "amq.fanout"}),
		CodePreconditionFailed, "PRECONDITION_FAILED - Destination not found")
	wantErr(t, b.Bind(BindingDef{VHost: "/", Source: "x-local-random", DestKind: DestExchange, Dest: "amq.fanout", Key: "k"}),
		CodePreconditionFailed, "PRECONDITION_FAILED - Non empty binding 'k' key not permitted")
	bindQ(t, b, "x-local-random", "q", "", nil)
	bindQ(t, b, "x-modulus-hash", "q", "anything", nil)
	bindX(t, b, "x-modulus-hash", "amq.fanout", "")
}

// Ensure a key always reaches the same queue, a fourth queue takes keys
// only for itself (about a quarter), and unbinding it puts every key back.
func TestConsistentHashRebalance(t *testing.T) {
	b := newTopoBroker(t, t.TempDir())
	declare(t, b, "ch", "x-consistent-hash", false, nil)
	for _, q := range []string{"q1", "q2", "q3", "q4"} {
		b.topoQueueAdded("/", q, false)
	}
	for _, q := range []string{"q1", "q2", "q3"} {
		bindQ(t, b, "ch", q, "1", nil)
	}
	checkRing(t, b, "ch", map[string]int{"q1": 1, "q2": 1, "q3": 1})
	keys := hashKeys(10_000)
	before := placement(t, b, "ch", keys)
	if again := placement(t, b, "ch", keys); !maps.Equal(before, again) {
		t.Fatal("placement changed with no binding change")
	}
	for q, n := range counts(before) {
		if n < 2500 || n > 4200 {
			t.Errorf("%s got %d of 10000 keys, want about a third", q, n)
		}
	}

	bindQ(t, b, "ch", "q4", "1", nil)
	checkRing(t, b, "ch", map[string]int{"q1": 1, "q2": 1, "q3": 1, "q4": 1})
	after := placement(t, b, "ch", keys)
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
	must(t, b.Unbind(BindingDef{VHost: "/", Source: "ch", Dest: "q4", Key: "1"}))
	if p := placement(t, b, "ch", keys); !maps.Equal(p, before) {
		t.Fatal("placement differs after unbinding the fourth queue")
	}
	bindQ(t, b, "ch", "q4", "1", nil)
	b.topoQueueRemoved("/", "q4")
	if p := placement(t, b, "ch", keys); !maps.Equal(p, before) {
		t.Fatal("placement differs after deleting the fourth queue")
	}
	// Removing a queue moves only its own keys.
	must(t, b.Unbind(BindingDef{VHost: "/", Source: "ch", Dest: "q2", Key: "1"}))
	for k, q := range placement(t, b, "ch", keys) {
		if before[k] != "q2" && q != before[k] {
			t.Fatalf("key %q moved from %s to %s when q2 left", k, before[k], q)
		}
	}
	checkRing(t, b, "ch", map[string]int{"q1": 1, "q3": 1})
}

// Ensure weights split keys in proportion: 1 and 3 give about 1:3 over
// 4,000 keys; a destination bound twice owns the points of its larger
// weight; an exchange destination owns points too.
func TestConsistentHashWeights(t *testing.T) {
	b := newTopoBroker(t, t.TempDir())
	declare(t, b, "ch", "x-consistent-hash", false, nil)
	b.topoQueueAdded("/", "light", false)
	b.topoQueueAdded("/", "heavy", false)
	bindQ(t, b, "ch", "light", "1", nil)
	bindQ(t, b, "ch", "heavy", "3", nil)
	n := counts(placement(t, b, "ch", hashKeys(4000)))
	if share := float64(n["light"]) / 4000; share < 0.20 || share > 0.30 {
		t.Errorf("weights 1:3 split %v, light share %.3f, want 0.25±0.05", n, share)
	}
	t.Logf("weights 1:3: %v", n)

	// Bound again with a larger weight: the larger counts; unbinding it
	// goes back to the smaller one.
	bindQ(t, b, "ch", "light", "3", nil)
	checkRing(t, b, "ch", map[string]int{"light": 3, "heavy": 3})
	bindQ(t, b, "ch", "light", "2", nil)
	checkRing(t, b, "ch", map[string]int{"light": 3, "heavy": 3})
	must(t, b.Unbind(BindingDef{VHost: "/", Source: "ch", Dest: "light", Key: "3"}))
	checkRing(t, b, "ch", map[string]int{"light": 2, "heavy": 3})
	must(t, b.Unbind(BindingDef{VHost: "/", Source: "ch", Dest: "light", Key: "2"}))
	checkRing(t, b, "ch", map[string]int{"light": 1, "heavy": 3})
	if got := counts(placement(t, b, "ch", hashKeys(4000))); got["light"] != n["light"] {
		t.Fatalf("after unbinding the extra weights: %v, want %v", got, n)
	}

	// Through an exchange destination, which fans out.
	declare(t, b, "ch2", "x-consistent-hash", false, nil)
	declare(t, b, "fan", "fanout", false, nil)
	bindX(t, b, "ch2", "fan", "1")
	bindQ(t, b, "fan", "light", "", nil)
	bindQ(t, b, "fan", "heavy", "", nil)
	wantRoute(t, b, "ch2", nil, []string{"k"}, "heavy", "light")
	// No binding: unroutable, so the alternate exchange is tried.
	declare(t, b, "empty", "x-consistent-hash", false, map[string]any{"alternate-exchange": "fan"})
	wantRoute(t, b, "empty", nil, []string{"k"}, "heavy", "light")
}

// Ensure hash-header and hash-property route on the header or property,
// a header's value by its text, and a message lacking it to one queue.
func TestConsistentHashHeaderAndProperty(t *testing.T) {
	b := newTopoBroker(t, t.TempDir())
	queues := []string{"q1", "q2", "q3", "q4", "q5"}
	declare(t, b, "rk", "x-consistent-hash", false, nil)
	declare(t, b, "hdr", "x-consistent-hash", false, map[string]any{"hash-header": "shard"})
	for _, p := range []string{"message_id", "correlation_id", "timestamp"} {
		declare(t, b, p, "x-consistent-hash", false, map[string]any{"hash-property": p})
	}
	for _, q := range queues {
		b.topoQueueAdded("/", q, false)
		for _, x := range []string{"rk", "hdr", "message_id", "correlation_id", "timestamp"} {
			bindQ(t, b, x, q, "1", nil)
		}
	}
	one := func(x string, m *RoutingMessage) string {
		t.Helper()
		qs, err := b.RouteMessage("/", x, m, nil)
		must(t, err)
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
	wantRoute(t, b, "message_id", nil, []string{"z"}, empty)
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

// Ensure placement does not depend on the order of the bindings and
// survives a restart: durable exchanges of the three types reload, and
// keys reach the same queues.
func TestHashExchangesRestart(t *testing.T) {
	qs := []string{"qa", "qb", "qc", "qd", "qe"}
	keys := hashKeys(2000)
	setup := func(dir string, order []string) *Broker {
		b := openBroker(t, dir)
		for _, q := range order {
			_, _, _, err := b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: q, Durable: true}})
			must(t, err)
		}
		declare(t, b, "ch", "x-consistent-hash", true, nil)
		declare(t, b, "chh", "x-consistent-hash", true, map[string]any{"hash-header": "h"})
		declare(t, b, "mod", "x-modulus-hash", true, nil)
		declare(t, b, "rnd", "x-local-random", true, nil)
		for _, q := range order {
			bindQ(t, b, "ch", q, strconv.Itoa(1+int(q[1]-'a')%3), nil) // weights 1, 2, 3, 1, 2
			bindQ(t, b, "chh", q, "2", nil)
			bindQ(t, b, "mod", q, "k"+q, nil)
			bindQ(t, b, "rnd", q, "", nil)
		}
		return b
	}
	// Two brokers with the same bindings made in opposite orders.
	fwd := slices.Clone(qs)
	rev := slices.Clone(qs)
	slices.Reverse(rev)
	dir := t.TempDir()
	b1 := setup(dir, fwd)
	b2 := setup(t.TempDir(), rev)
	defer b2.Close()
	same := func(what string, a, b map[string]string) {
		t.Helper()
		if !maps.Equal(a, b) {
			n := 0
			for k := range a {
				if a[k] != b[k] {
					n++
				}
			}
			t.Fatalf("%s: %d of %d keys placed differently", what, n, len(a))
		}
	}
	for _, x := range []string{"ch", "mod"} {
		same(x+" across binding orders", placement(t, b1, x, keys), placement(t, b2, x, keys))
	}
	same("chh across binding orders", headerPlacement(t, b1, "chh", keys), headerPlacement(t, b2, "chh", keys))
	before := map[string]map[string]string{}
	for _, x := range []string{"ch", "chh", "mod"} {
		before[x] = placement(t, b1, x, keys)
	}
	hdrBefore := headerPlacement(t, b1, "chh", keys)
	must(t, b1.Close())

	b1 = openBroker(t, dir)
	defer b1.Close()
	for _, x := range []string{"ch", "mod"} {
		same(x+" across restart", before[x], placement(t, b1, x, keys))
	}
	same("chh across restart", hdrBefore, headerPlacement(t, b1, "chh", keys))
	if x, err := b1.Exchange("/", "chh"); err != nil || x.Type != "x-consistent-hash" || x.Args["hash-header"] != "h" {
		t.Fatalf("chh after restart: %+v %v", x, err)
	}
	got := map[string]bool{}
	for range 200 {
		qs, err := b1.Route("/", "rnd", []string{"k"}, nil, nil)
		must(t, err)
		if len(qs) != 1 {
			t.Fatalf("rnd routed to %q", qs)
		}
		got[qs[0]] = true
	}
	if len(got) != len(qs) {
		t.Fatalf("rnd after restart reached %v", got)
	}
}

func headerPlacement(t testing.TB, b *Broker, x string, keys []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range keys {
		qs, err := b.Route("/", x, []string{"rk"}, map[string]any{"h": k}, nil)
		must(t, err)
		if len(qs) != 1 {
			t.Fatalf("header %q reached %q", k, qs)
		}
		out[k] = qs[0]
	}
	return out
}

// Ensure x-modulus-hash spreads keys over its bindings, a destination
// bound twice counts twice, and placement depends on the set of bindings
// only.
func TestModulusHash(t *testing.T) {
	mk := func(order []string) *Broker {
		b := newTopoBroker(t, t.TempDir())
		declare(t, b, "m", "x-modulus-hash", false, nil)
		for _, q := range order {
			b.topoQueueAdded("/", q, false)
			bindQ(t, b, "m", q, "", nil)
		}
		return b
	}
	b := mk([]string{"q1", "q2", "q3"})
	keys := hashKeys(6000)
	p := placement(t, b, "m", keys)
	for q, n := range counts(p) {
		if n < 1700 || n > 2300 {
			t.Errorf("%s got %d of 6000 keys, want about 2000", q, n)
		}
	}
	if again := placement(t, mk([]string{"q3", "q1", "q2"}), "m", keys); !maps.Equal(p, again) {
		t.Fatal("placement depends on the binding order")
	}
	// CC keys do not move a message.
	wantRoute(t, b, "m", nil, []string{"key-1", "cc"}, p["key-1"])
	// A second binding of q1 gives it half.
	bindQ(t, b, "m", "q1", "again", nil)
	if n := counts(placement(t, b, "m", keys)); n["q1"] < 2700 || n["q1"] > 3300 {
		t.Errorf("q1 bound twice got %v", n)
	}
	must(t, b.Unbind(BindingDef{VHost: "/", Source: "m", Dest: "q1", Key: "again"}))
	if again := placement(t, b, "m", keys); !maps.Equal(p, again) {
		t.Fatal("placement differs after unbinding the second binding")
	}
	b.topoQueueRemoved("/", "q2")
	if n := counts(placement(t, b, "m", keys)); n["q2"] != 0 || n["q1"]+n["q3"] != len(keys) {
		t.Fatalf("after q2 went: %v", n)
	}
}

// Ensure x-local-random sends each message to exactly one bound queue,
// each about equally often, and an unbound exchange's messages to its
// alternate exchange.
func TestLocalRandom(t *testing.T) {
	b := newTopoBroker(t, t.TempDir())
	declare(t, b, "r", "x-local-random", false, map[string]any{"alternate-exchange": "amq.fanout"})
	b.topoQueueAdded("/", "ae", false)
	bindQ(t, b, "amq.fanout", "ae", "", nil)
	wantRoute(t, b, "r", nil, []string{"k"}, "ae")
	qs := []string{"q1", "q2", "q3"}
	for _, q := range qs {
		b.topoQueueAdded("/", q, false)
		bindQ(t, b, "r", q, "", nil)
	}
	const n = 6000
	got := map[string]int{}
	for i := range n {
		for _, q := range route(t, b, "r", nil, "k"+strconv.Itoa(i%3)) {
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
	b.topoQueueRemoved("/", "q1")
	b.topoQueueRemoved("/", "q2")
	for range 20 {
		wantRoute(t, b, "r", nil, []string{"k"}, "q3")
	}
}

// Ensure a consistent hash ring does not depend on the order points
// arrive in, collisions included.
func TestConsistentHashRingOrder(t *testing.T) {
	mk := func() *consistentHashRouter { return newConsistentHashRouter() }
	bd := func(q, key string) *binding {
		return &binding{def: BindingDef{Dest: q, Key: key}, q: &queueEntry{name: q}}
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

// consistentHashFixture is 10 queues of weight 1 to 10 on one
// x-consistent-hash exchange (5,500 points).
func consistentHashFixture(tb testing.TB) routeFixture {
	b := newTopoBroker(tb, tb.TempDir())
	declare(tb, b, "ch", "x-consistent-hash", false, nil)
	for i := range 10 {
		q := fmt.Sprintf("q%d", i)
		b.topoQueueAdded("/", q, false)
		bindQ(tb, b, "ch", q, strconv.Itoa(i+1), nil)
	}
	return routeFixture{b: b, x: "ch", keys: []string{"order-4711"}, want: 1}
}

// Ensure the new types route without allocating once dst has room: by
// routing key, header and property, and the single-pick types.
func TestRouteHashAllocs(t *testing.T) {
	f := consistentHashFixture(t)
	b := f.b
	declare(t, b, "chh", "x-consistent-hash", false, map[string]any{"hash-header": "h"})
	declare(t, b, "chp", "x-consistent-hash", false, map[string]any{"hash-property": "timestamp"})
	declare(t, b, "mod", "x-modulus-hash", false, nil)
	declare(t, b, "rnd", "x-local-random", false, nil)
	for i := range 10 {
		q := fmt.Sprintf("q%d", i)
		for _, x := range []string{"chh", "chp"} {
			bindQ(t, b, x, q, "1", nil)
		}
		bindQ(t, b, "mod", q, "", nil)
		bindQ(t, b, "rnd", q, "", nil)
	}
	dst := make([]string, 0, 4)
	keys := []string{"order-4711"}
	for _, c := range []struct {
		x string
		m RoutingMessage
	}{
		{"ch", RoutingMessage{Keys: keys}},
		{"chh", RoutingMessage{Keys: keys, Headers: map[string]any{"h": int64(12345)}}},
		{"chp", RoutingMessage{Keys: keys, Props: RoutingProps{Timestamp: 1700000000, HasTimestamp: true}}},
		{"mod", RoutingMessage{Keys: keys}},
		{"rnd", RoutingMessage{Keys: keys}},
	} {
		allocs := testing.AllocsPerRun(100, func() {
			qs, err := b.RouteMessage("/", c.x, &c.m, dst[:0])
			if err != nil || len(qs) != 1 {
				t.Fatalf("%s: %q %v", c.x, qs, err)
			}
		})
		if allocs != 0 && !raceEnabled {
			t.Fatalf("RouteMessage(%s) allocs = %v, want 0", c.x, allocs)
		}
	}
}

func BenchmarkRouteConsistentHash(b *testing.B) { benchRoute(b, consistentHashFixture(b)) }

// BenchmarkRouteConsistentHashKeys varies the key, so the ring search
// is not served from one cache line.
func BenchmarkRouteConsistentHashKeys(b *testing.B) {
	f := consistentHashFixture(b)
	keys := make([][]string, 1024)
	for i := range keys {
		keys[i] = []string{"order-" + strconv.Itoa(i)}
	}
	dst := make([]string, 0, 4)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		qs, err := f.b.Route("/", f.x, keys[i&1023], nil, dst[:0])
		if err != nil || len(qs) != 1 {
			b.Fatalf("routed to %d, %v", len(qs), err)
		}
		i++
	}
}

// BenchmarkConsistentHashBind is the cost of binding a queue of weight
// w beside 10 queues of weight 10 (10,000 points): "points" hashes and
// sorts its points, before the change is applied; "apply" merges them
// into the ring and removes them again, with the vhost's routing lock
// held.
func BenchmarkConsistentHashBind(b *testing.B) {
	for _, w := range []int{1, 10, 10_000} {
		c := newConsistentHashRouter()
		for i := range 10 {
			q := fmt.Sprintf("q%d", i)
			c.add(&binding{def: BindingDef{Dest: q, Key: "10"}, q: &queueEntry{name: q}})
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
			nb := &binding{def: def, q: &queueEntry{name: "new"}}
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
