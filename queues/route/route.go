package route

import (
	"slices"
	"sync"
)

// Routing: a worklist traversal from the published-to exchange over
// exchange-to-exchange bindings and alternate exchanges, as
// rabbit_exchange:route/3 does. Each exchange is visited once and each
// queue is added once, tracked with generation stamps indexed by the dense
// exchange and queue ids, so that routing allocates nothing once the
// pooled scratch has grown to the vhost's size.

// router is an exchange type's routing index. add and remove run with
// exclusive access to the Index, route with shared access.
type router interface {
	add(b *Binding)
	remove(b *Binding)
	// route calls r.hit for every binding matching the message.
	route(r *routing, keys []string, headers map[string]any)
}

// routing is the scratch state of one Route call, pooled.
type routing struct {
	gen   uint32   // this call's stamp
	xSeen []uint32 // by exchange id: gen when visited
	qSeen []uint32 // by queue id: gen when added to dst
	work  []*Exchange
	dst   []string
	// matched is set when the exchange being routed matched a binding;
	// if not, its alternate exchange is tried.
	matched bool

	topic   topicScratch
	headers headersScratch
	props   RoutingProps // the message's, for x-consistent-hash
}

var routingPool = sync.Pool{New: func() any { return new(routing) }}

// begin starts a Route call over ix.
func (r *routing) begin(ix *Index, dst []string) {
	r.gen++
	if r.gen == 0 {
		clear(r.xSeen)
		clear(r.qSeen)
		r.gen = 1
	}
	r.xSeen = growStamps(r.xSeen, int(ix.xIDs.next))
	r.qSeen = growStamps(r.qSeen, int(ix.qIDs.next))
	r.dst = dst
}

// growStamps returns s with at least n entries; new entries are zero,
// which no generation equals.
func growStamps(s []uint32, n int) []uint32 {
	if len(s) >= n {
		return s
	}
	return slices.Grow(s, n-len(s))[:n]
}

// visit adds x to the worklist unless it was visited.
func (r *routing) visit(x *Exchange) {
	if r.xSeen[x.id] == r.gen {
		return
	}
	r.xSeen[x.id] = r.gen
	r.work = append(r.work, x)
}

// addQueue appends q to dst unless it is there.
func (r *routing) addQueue(q *Queue) {
	if r.qSeen[q.id] == r.gen {
		return
	}
	r.qSeen[q.id] = r.gen
	r.dst = append(r.dst, q.name)
}

// hit records a matching binding.
func (r *routing) hit(b *Binding) {
	r.matched = true
	if b.q != nil {
		r.addQueue(b.q)
	} else {
		r.visit(b.x)
	}
}

// Route appends to dst the names of the queues a message published to
// from reaches, each once. keys are the routing key followed by the CC and BCC
// keys; headers are the message headers (nil when none), used by headers
// exchanges; props are the properties x-consistent-hash may hash.
// Exchange-to-exchange bindings and alternate exchanges are followed,
// each exchange visited once. The default exchange routes to the queue
// named by each key. Route keeps none of its arguments but dst, and
// allocates nothing in the steady state when dst has room.
func (ix *Index) Route(from *Exchange, keys []string, headers map[string]any, props *RoutingProps, dst []string) []string {
	if from.def.Name == "" {
		return ix.routeDefault(keys, dst)
	}
	r := routingPool.Get().(*routing)
	r.begin(ix, dst)
	r.props = *props
	r.visit(from)
	for len(r.work) > 0 {
		x := r.work[len(r.work)-1]
		r.work[len(r.work)-1] = nil
		r.work = r.work[:len(r.work)-1]
		r.matched = false
		x.router.route(r, keys, headers)
		if !r.matched && x.hasAE {
			if ae := ix.exchanges[x.ae]; ae != nil {
				r.visit(ae)
			}
		}
	}
	dst = r.dst
	r.dst = nil
	r.props = RoutingProps{}
	r.headers.release()
	routingPool.Put(r)
	return dst
}

// routeDefault routes a message published to the default exchange: to
// the queue named by each routing key.
func (ix *Index) routeDefault(keys []string, dst []string) []string {
	start := len(dst)
	for _, k := range keys {
		q := ix.queues[k]
		if q != nil && !slices.Contains(dst[start:], q.name) {
			dst = append(dst, q.name)
		}
	}
	return dst
}

// nullRouter routes nothing. It is the default exchange reached other
// than by publishing to it (as an alternate exchange): RabbitMQ then
// routes it as a direct exchange with no explicit bindings, to nothing.
// NewExchange gives it to an exchange of an unknown type too.
type nullRouter struct{}

func (nullRouter) add(*Binding)                             {}
func (nullRouter) remove(*Binding)                          {}
func (nullRouter) route(*routing, []string, map[string]any) {}

// directRouter: exact routing key lookup.
type directRouter struct {
	keys map[string][]*Binding
}

func (d *directRouter) add(b *Binding) { d.keys[b.def.Key] = append(d.keys[b.def.Key], b) }

func (d *directRouter) remove(b *Binding) {
	bs := removeBinding(d.keys[b.def.Key], b)
	if len(bs) == 0 {
		delete(d.keys, b.def.Key)
	} else {
		d.keys[b.def.Key] = bs
	}
}

func (d *directRouter) route(r *routing, keys []string, _ map[string]any) {
	for _, k := range keys {
		for _, b := range d.keys[k] {
			r.hit(b)
		}
	}
}

// fanoutRouter: every binding.
type fanoutRouter struct {
	all []*Binding
}

func (f *fanoutRouter) add(b *Binding)    { f.all = append(f.all, b) }
func (f *fanoutRouter) remove(b *Binding) { f.all = removeBinding(f.all, b) }

func (f *fanoutRouter) route(r *routing, _ []string, _ map[string]any) {
	for _, b := range f.all {
		r.hit(b)
	}
}

// topicRouter: the topic trie.
type topicRouter struct {
	trie *topicTrie
}

func (t *topicRouter) add(b *Binding)    { t.trie.insert(b.def.Key, b) }
func (t *topicRouter) remove(b *Binding) { t.trie.remove(b.def.Key, b) }

func (t *topicRouter) route(r *routing, keys []string, _ map[string]any) {
	for _, k := range keys {
		for _, n := range t.trie.match(&r.topic, k) {
			for _, b := range t.trie.nodes[n].dests {
				r.hit(b)
			}
		}
	}
}

// removeBinding removes b from bs, keeping the order.
func removeBinding(bs []*Binding, b *Binding) []*Binding {
	if i := slices.Index(bs, b); i >= 0 {
		bs = slices.Delete(bs, i, i+1)
	}
	return bs
}
