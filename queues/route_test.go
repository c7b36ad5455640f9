package queues

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// routeFixture is a broker with one exchange of each type, bound to
// transient queues (nothing is written to the catalog), and a message for
// each.
type routeFixture struct {
	b       *Broker
	x       string
	keys    []string
	headers map[string]any
	want    int // queues reached
}

func directFixture(tb testing.TB) routeFixture {
	b := newTopoBroker(tb, tb.TempDir())
	declare(tb, b, "d", "direct", false, nil)
	for i := range 1000 {
		q := fmt.Sprintf("q%d", i)
		b.topoQueueAdded("/", q, false)
		bindQ(tb, b, "d", q, fmt.Sprintf("key.%d", i%500), nil)
	}
	return routeFixture{b: b, x: "d", keys: []string{"key.42"}, want: 2}
}

func fanoutFixture(tb testing.TB) routeFixture {
	b := newTopoBroker(tb, tb.TempDir())
	declare(tb, b, "f", "fanout", false, nil)
	for i := range 10 {
		q := fmt.Sprintf("q%d", i)
		b.topoQueueAdded("/", q, false)
		bindQ(tb, b, "f", q, "", nil)
	}
	return routeFixture{b: b, x: "f", keys: []string{"k"}, want: 10}
}

// topicWords is the vocabulary of the topic fixture.
var topicWords = []string{"eu", "us", "apac", "stock", "bond", "fx", "nyse", "lse", "tse", "buy", "sell",
	"limit", "market", "gold", "oil", "tech", "bank", "retail", "open", "close"}

// topicFixture has 10,000 bindings on one topic exchange: 12-word
// patterns with literal words, '*' and up to two '#', to 1,000 queues.
func topicFixture(tb testing.TB) routeFixture {
	b := newTopoBroker(tb, tb.TempDir())
	declare(tb, b, "t", "topic", false, nil)
	for i := range 1000 {
		b.topoQueueAdded("/", fmt.Sprintf("q%d", i), false)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 10000 {
		words := make([]string, 12)
		hashes := 0
		for j := range words {
			switch r := rng.IntN(20); {
			case r < 3:
				words[j] = "*"
			case r < 4 && hashes < 2 && j > 3:
				words[j] = "#"
				hashes++
			default:
				words[j] = topicWords[rng.IntN(len(topicWords))]
			}
		}
		// A few broad patterns so that the key matches something.
		switch i % 1000 {
		case 0:
			words = []string{"eu", "stock", "#"}
		case 1:
			words = []string{"*", "stock", "*", "#", "close"}
		case 2:
			words = []string{"#", "oil", "#"}
		}
		bindQ(tb, b, "t", fmt.Sprintf("q%d", i%1000), strings.Join(words, "."), nil)
	}
	key := "eu.stock.nyse.buy.limit.gold.oil.tech.bank.retail.open.close"
	qs, err := b.Route("/", "t", []string{key}, nil, nil)
	must(tb, err)
	return routeFixture{b: b, x: "t", keys: []string{key}, want: len(qs)}
}

// headersFixture has 100 headers bindings, half all and half any, and a
// message with five headers.
func headersFixture(tb testing.TB) routeFixture {
	b := newTopoBroker(tb, tb.TempDir())
	declare(tb, b, "h", "headers", false, nil)
	want := 0
	for i := range 100 {
		q := fmt.Sprintf("q%d", i)
		b.topoQueueAdded("/", q, false)
		args := map[string]any{"format": "pdf", "type": fmt.Sprintf("t%d", i%10), "size": int32(i % 7)}
		if i%2 == 0 {
			args["x-match"] = "all"
			if i%10 == 4 && i%7 == 3 {
				want++
			}
		} else {
			args["x-match"] = "any"
			want++ // format matches
		}
		bindQ(tb, b, "h", q, "", args)
	}
	headers := map[string]any{"format": "pdf", "type": "t4", "size": int64(3), "lang": "en", "x-trace": true}
	return routeFixture{b: b, x: "h", headers: headers, want: want}
}

// Ensure the fixtures route what they should, and that routing allocates
// nothing once dst has room.
func TestRouteAllocs(t *testing.T) {
	for name, mk := range map[string]func(testing.TB) routeFixture{
		"direct": directFixture, "fanout": fanoutFixture, "topic": topicFixture, "headers": headersFixture,
	} {
		t.Run(name, func(t *testing.T) {
			f := mk(t)
			dst := make([]string, 0, 1024)
			qs, err := f.b.Route("/", f.x, f.keys, f.headers, dst)
			must(t, err)
			if len(qs) != f.want || f.want == 0 {
				t.Fatalf("routed to %d queues, want %d (> 0)", len(qs), f.want)
			}
			allocs := testing.AllocsPerRun(100, func() {
				qs, _ = f.b.Route("/", f.x, f.keys, f.headers, dst[:0])
			})
			if allocs != 0 && !raceEnabled {
				t.Fatalf("Route allocs = %v, want 0", allocs)
			}
		})
	}
	// Through e2e bindings, an alternate exchange and the default exchange.
	b := newTopoBroker(t, t.TempDir())
	b.topoQueueAdded("/", "q", false)
	declare(t, b, "x", "direct", false, map[string]any{"alternate-exchange": "amq.fanout"})
	bindX(t, b, "amq.fanout", "amq.topic", "")
	bindQ(t, b, "amq.topic", "q", "#", nil)
	dst := make([]string, 0, 4)
	keys := []string{"q"} // Route's keys escape: callers reuse theirs
	for _, x := range []string{"x", ""} {
		allocs := testing.AllocsPerRun(100, func() {
			qs, _ := b.Route("/", x, keys, nil, dst[:0])
			if len(qs) != 1 {
				t.Fatalf("got %q", qs)
			}
		})
		if allocs != 0 && !raceEnabled {
			t.Fatalf("Route(%q) allocs = %v, want 0", x, allocs)
		}
	}
}

func benchRoute(b *testing.B, f routeFixture) {
	dst := make([]string, 0, 1024)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		qs, err := f.b.Route("/", f.x, f.keys, f.headers, dst[:0])
		if err != nil || len(qs) != f.want {
			b.Fatalf("routed to %d, %v", len(qs), err)
		}
	}
}

func BenchmarkRouteDirect(b *testing.B)           { benchRoute(b, directFixture(b)) }
func BenchmarkRouteFanout10(b *testing.B)         { benchRoute(b, fanoutFixture(b)) }
func BenchmarkRouteTopic10kBindings(b *testing.B) { benchRoute(b, topicFixture(b)) }
func BenchmarkRouteHeaders(b *testing.B)          { benchRoute(b, headersFixture(b)) }

// BenchmarkRouteParallel is the direct exchange from many goroutines:
// what the read lock costs under contention.
func BenchmarkRouteParallel(b *testing.B) {
	f := directFixture(b)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		dst := make([]string, 0, 8)
		for pb.Next() {
			if qs, _ := f.b.Route("/", f.x, f.keys, f.headers, dst[:0]); len(qs) != f.want {
				b.Errorf("routed to %d", len(qs))
				return
			}
		}
	})
}
