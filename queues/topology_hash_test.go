package queues

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"

	"github.com/warren-mq/warren/internal/testutil"
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

// hashKeys returns n keys to place: key-0, key-1, ...
func hashKeys(n int) []string { return testutil.Keys("key-", n) }

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
