package route

import (
	"slices"
	"testing"

	"github.com/warren-mq/warren/internal/testutil"
)

// Helpers that change an index of the vhost "/" as the broker does, the
// broker's checks and catalog left out.

func declare(t testing.TB, ix *Index, name, typ string, args map[string]any) {
	t.Helper()
	if !KnownType(typ) || ix.Exchange(name) != nil {
		t.Fatalf("declare %s %s: unknown type or exists", name, typ)
	}
	ix.Apply(&Change{AddX: NewExchange(ExchangeDef{VHost: "/", Name: name, Type: typ, Args: args})})
}

func addQueue(ix *Index, name string) { ix.AddQueue(NewQueue(name, false)) }

// bind adds a binding unless it exists, as Broker.Bind does.
func bind(t testing.TB, ix *Index, def BindingDef) {
	t.Helper()
	src := ix.Exchange(def.Source)
	var q *Queue
	var x *Exchange
	if def.DestKind == DestQueue {
		q = ix.Queue(def.Dest)
	} else {
		x = ix.Exchange(def.Dest)
	}
	if src == nil || q == nil && x == nil {
		t.Fatalf("bind %+v: no source or destination", def)
	}
	bd := ix.NewBinding(def, src, q, x)
	if src.Binding(bd.Ident()) == nil {
		ix.Apply(&Change{AddB: []*Binding{bd}})
	}
}

func bindQ(t testing.TB, ix *Index, x, q, key string, args map[string]any) {
	t.Helper()
	bind(t, ix, BindingDef{Source: x, DestKind: DestQueue, Dest: q, Key: key, Args: args})
}

func bindX(t testing.TB, ix *Index, src, dst, key string) {
	t.Helper()
	bind(t, ix, BindingDef{Source: src, DestKind: DestExchange, Dest: dst, Key: key})
}

// unbind removes a binding, and the auto-delete exchanges it leaves
// unused, as Broker.Unbind does.
func unbind(ix *Index, def BindingDef) {
	var c Change
	if bd := ix.Exchange(def.Source).Binding(def.Ident()); bd != nil {
		c.DeleteBinding(bd)
	}
	c.AutoDelete()
	ix.Apply(&c)
}

// removeQueue removes a queue and its bindings, as the broker does when
// a queue is deleted.
func removeQueue(ix *Index, name string) {
	q := ix.Queue(name)
	var c Change
	for bd := range q.Bindings() {
		c.DeleteBinding(bd)
	}
	c.AutoDelete()
	ix.Apply(&c)
	ix.RemoveQueue(q)
}

// routeMessage returns the queues m reaches from exchange x, checking
// that none is there twice.
func routeMessage(t testing.TB, ix *Index, x string, m *RoutingMessage) []string {
	t.Helper()
	from := ix.Exchange(x)
	if from == nil {
		t.Fatalf("no exchange %q", x)
	}
	qs := ix.Route(from, m.Keys, m.Headers, &m.Props, nil)
	if len(slices.Compact(slices.Sorted(slices.Values(qs)))) != len(qs) {
		t.Fatalf("route from %q: duplicates in %q", x, qs)
	}
	return qs
}

// routed returns the sorted queues a message reaches.
func routed(t testing.TB, ix *Index, x string, headers map[string]any, keys ...string) []string {
	t.Helper()
	return slices.Sorted(slices.Values(routeMessage(t, ix, x, &RoutingMessage{Keys: keys, Headers: headers})))
}

func wantRoute(t testing.TB, ix *Index, x string, headers map[string]any, keys []string, want ...string) {
	t.Helper()
	if got := routed(t, ix, x, headers, keys...); !slices.Equal(got, want) {
		t.Fatalf("route(%q, %q, %v) = %q, want %q", x, keys, headers, got, want)
	}
}

// placement routes each key through exchange x and returns the queue it
// reached; each must reach exactly one.
func placement(t testing.TB, ix *Index, x string, keys []string) map[string]string {
	t.Helper()
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		qs := routeMessage(t, ix, x, &RoutingMessage{Keys: []string{k}})
		if len(qs) != 1 {
			t.Fatalf("key %q reached %q, want one queue", k, qs)
		}
		out[k] = qs[0]
	}
	return out
}

// hashKeys returns n keys to place: key-0, key-1, ...
func hashKeys(n int) []string { return testutil.Keys("key-", n) }
