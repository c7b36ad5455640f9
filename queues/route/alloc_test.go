//go:build !race

// Not under the race detector: it makes sync.Pool drop pooled items at
// random, so routing's scratch is reallocated.

package route

import (
	"fmt"
	"testing"
)

// Ensure routing allocates nothing once its pooled scratch has grown and
// dst has room, for every exchange type and through exchange-to-exchange
// bindings, alternate exchanges and the default exchange.
func TestRouteAllocs(t *testing.T) {
	ix := NewIndex("/")
	for i := range 10 {
		addQueue(ix, fmt.Sprintf("q%d", i))
	}
	for _, typ := range []string{ExchangeDirect, ExchangeFanout, ExchangeTopic, ExchangeHeaders,
		ExchangeConsistentHash, ExchangeModulusHash, ExchangeLocalRandom} {
		declare(t, ix, typ, typ, nil)
		for i := range 10 {
			args := map[string]any{"x-match": "any", "h": int32(i)}
			bindQ(t, ix, typ, fmt.Sprintf("q%d", i), "1", args)
		}
	}
	declare(t, ix, "ae", ExchangeDirect, map[string]any{ArgAlternateExchange: ExchangeFanout})
	bindX(t, ix, ExchangeTopic, ExchangeFanout, "#")
	m := &RoutingMessage{Keys: []string{"1"}, Headers: map[string]any{"h": int64(3)}, Props: RoutingProps{MessageID: []byte("m")}}
	dst := make([]string, 0, 16)
	for x, want := range map[string]int{
		ExchangeDirect: 10, ExchangeFanout: 10, ExchangeTopic: 10, ExchangeHeaders: 1,
		ExchangeConsistentHash: 1, ExchangeModulusHash: 1, ExchangeLocalRandom: 1, "ae": 10, "": 0,
	} {
		from := ix.Exchange(x)
		allocs := testing.AllocsPerRun(100, func() {
			if qs := ix.Route(from, m.Keys, m.Headers, &m.Props, dst[:0]); len(qs) != want {
				t.Fatalf("%q routed to %q, want %d queues", x, qs, want)
			}
		})
		if allocs != 0 {
			t.Errorf("Route(%q) allocs = %v, want 0", x, allocs)
		}
	}
	m.Keys = []string{"q1", "q2"}
	allocs := testing.AllocsPerRun(100, func() { ix.Route(ix.Exchange(""), m.Keys, nil, &m.Props, dst[:0]) })
	if allocs != 0 {
		t.Errorf("Route of the default exchange allocs = %v, want 0", allocs)
	}
}
