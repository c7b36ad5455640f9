package queues

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

// router is an exchange type's routing index. add and remove run with the
// vhost's mu held for writing, route with it held for reading.
type router interface {
	add(b *binding)
	remove(b *binding)
	// route calls r.hit for every binding matching the message.
	route(r *routing, keys []string, headers map[string]any)
}

// routing is the scratch state of one Route call, pooled.
type routing struct {
	gen   uint32   // this call's stamp
	xSeen []uint32 // by exchange id: gen when visited
	qSeen []uint32 // by queue id: gen when added to dst
	work  []*exchange
	dst   []string
	// matched is set when the exchange being routed matched a binding;
	// if not, its alternate exchange is tried.
	matched bool

	topic   topicScratch
	headers headersScratch
	props   RoutingProps // the message's, for x-consistent-hash
}

var routingPool = sync.Pool{New: func() any { return new(routing) }}

// begin starts a Route call over vt.
// REQUIRES: vt.mu held.
func (r *routing) begin(vt *vhostTopo, dst []string) {
	r.gen++
	if r.gen == 0 {
		clear(r.xSeen)
		clear(r.qSeen)
		r.gen = 1
	}
	r.xSeen = growStamps(r.xSeen, int(vt.xIDs.next))
	r.qSeen = growStamps(r.qSeen, int(vt.qIDs.next))
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
func (r *routing) visit(x *exchange) {
	if r.xSeen[x.id] == r.gen {
		return
	}
	r.xSeen[x.id] = r.gen
	r.work = append(r.work, x)
}

// addQueue appends q to dst unless it is there.
func (r *routing) addQueue(q *queueEntry) {
	if r.qSeen[q.id] == r.gen {
		return
	}
	r.qSeen[q.id] = r.gen
	r.dst = append(r.dst, q.name)
}

// hit records a matching binding.
func (r *routing) hit(b *binding) {
	r.matched = true
	if b.q != nil {
		r.addQueue(b.q)
	} else {
		r.visit(b.x)
	}
}

// routeLocked routes from the exchange published to.
// REQUIRES: vt.mu held.
func (vt *vhostTopo) routeLocked(from *exchange, keys []string, headers map[string]any, props *RoutingProps, dst []string) []string {
	r := routingPool.Get().(*routing)
	r.begin(vt, dst)
	r.props = *props
	r.visit(from)
	for len(r.work) > 0 {
		x := r.work[len(r.work)-1]
		r.work[len(r.work)-1] = nil
		r.work = r.work[:len(r.work)-1]
		r.matched = false
		x.router.route(r, keys, headers)
		if !r.matched && x.hasAE {
			if ae := vt.exchanges[x.ae]; ae != nil {
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

// routeDefaultLocked routes a message published to the default exchange:
// to the queue named by each routing key.
// REQUIRES: vt.mu held.
func (vt *vhostTopo) routeDefaultLocked(keys []string, dst []string) []string {
	start := len(dst)
	for _, k := range keys {
		q := vt.queues[k]
		if q != nil && !slices.Contains(dst[start:], q.name) {
			dst = append(dst, q.name)
		}
	}
	return dst
}

// defaultRouter is the default exchange reached other than by publishing
// to it (as an alternate exchange): RabbitMQ then routes it as a direct
// exchange with no explicit bindings, to nothing.
type defaultRouter struct{}

func (defaultRouter) add(*binding)                             {}
func (defaultRouter) remove(*binding)                          {}
func (defaultRouter) route(*routing, []string, map[string]any) {}

// directRouter: exact routing key lookup.
type directRouter struct {
	keys map[string][]*binding
}

func (d *directRouter) add(b *binding) { d.keys[b.def.Key] = append(d.keys[b.def.Key], b) }

func (d *directRouter) remove(b *binding) {
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
	all []*binding
}

func (f *fanoutRouter) add(b *binding)    { f.all = append(f.all, b) }
func (f *fanoutRouter) remove(b *binding) { f.all = removeBinding(f.all, b) }

func (f *fanoutRouter) route(r *routing, _ []string, _ map[string]any) {
	for _, b := range f.all {
		r.hit(b)
	}
}

// topicRouter: the topic trie.
type topicRouter struct {
	trie *topicTrie
}

func (t *topicRouter) add(b *binding)    { t.trie.insert(b.def.Key, b) }
func (t *topicRouter) remove(b *binding) { t.trie.remove(b.def.Key, b) }

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
func removeBinding(bs []*binding, b *binding) []*binding {
	if i := slices.Index(bs, b); i >= 0 {
		bs = slices.Delete(bs, i, i+1)
	}
	return bs
}
