package route

import (
	"iter"
	"maps"
	"slices"
)

// Index is one vhost's exchanges, queues (as routing destinations) and
// bindings, with each exchange's routing index.
//
// An Index does no locking. Whatever changes it (Apply, the Add and
// Remove methods, SetAlternate, ClearAlternate) needs exclusive access;
// Route and the lookups may run concurrently with each other. A single
// writer may also read it (and build a Change) while routes run, as long
// as it changes it only with exclusive access.
type Index struct {
	vhost     string
	exchanges map[string]*Exchange
	queues    map[string]*Queue
	xIDs      idAlloc // dense exchange ids, for the routing visited set
	qIDs      idAlloc // dense queue ids, for the routing duplicate set
}

// Exchange is a declared exchange with its routing index.
type Exchange struct {
	def    ExchangeDef
	id     int32
	router router
	ae     string // alternate exchange name, when hasAE
	hasAE  bool
	src    map[string]*Binding // bindings from this exchange, by identity
	dst    map[string]*Binding // bindings to this exchange, by identity
}

// Queue is a queue as routing sees it: a destination.
type Queue struct {
	name    string
	durable bool
	id      int32
	dst     map[string]*Binding // bindings to this queue, by identity
}

// Binding is a binding with its endpoints resolved.
type Binding struct {
	def     BindingDef
	ident   string // identity within the vhost; see BindingDef.Ident
	src     *Exchange
	q       *Queue    // destination queue, or nil
	x       *Exchange // destination exchange, or nil
	durable bool      // source and destination are durable
	hm      *headersMatcher
	ring    []ringPoint // x-consistent-hash: its points, until the router takes them
}

// idAlloc hands out small dense ids, reusing freed ones.
type idAlloc struct {
	next int32
	free []int32
}

func (a *idAlloc) get() int32 {
	if n := len(a.free); n > 0 {
		id := a.free[n-1]
		a.free = a.free[:n-1]
		return id
	}
	a.next++
	return a.next - 1
}

func (a *idAlloc) put(id int32) { a.free = append(a.free, id) }

// The exchanges every vhost has (rabbit_vhost:declare_default_exchanges).
var standardExchanges = []ExchangeDef{
	{Name: "", Type: ExchangeDirect, Durable: true},
	{Name: "amq.direct", Type: ExchangeDirect, Durable: true},
	{Name: "amq.fanout", Type: ExchangeFanout, Durable: true},
	{Name: "amq.topic", Type: ExchangeTopic, Durable: true},
	{Name: "amq.headers", Type: ExchangeHeaders, Durable: true},
	{Name: "amq.match", Type: ExchangeHeaders, Durable: true},
	{Name: "amq.rabbitmq.trace", Type: ExchangeTopic, Durable: true, Internal: true},
}

// StandardExchanges returns the exchanges every vhost has, the default
// exchange "" first, without a vhost.
func StandardExchanges() []ExchangeDef { return slices.Clone(standardExchanges) }

// NewIndex returns the index of a new vhost: its standard exchanges, the
// default exchange "" among them.
func NewIndex(vhost string) *Index {
	ix := &Index{
		vhost:     vhost,
		exchanges: map[string]*Exchange{},
		queues:    map[string]*Queue{},
	}
	for _, def := range standardExchanges {
		def.VHost = vhost
		x := NewExchange(def)
		if def.Name == "" {
			x.router = nullRouter{}
		}
		ix.AddExchange(x)
	}
	return ix
}

// NewExchange returns an exchange of def, not yet in an index. def.Type
// must be one KnownType accepts (an exchange of another type routes
// nothing). The alternate exchange is def's alternate-exchange argument,
// if it is a string.
func NewExchange(def ExchangeDef) *Exchange {
	r, ok := newRouter(def.Type)
	if !ok {
		r = nullRouter{}
	}
	if c, ok := r.(*consistentHashRouter); ok {
		c.configure(def.Args)
	}
	x := &Exchange{def: def, router: r, src: map[string]*Binding{}, dst: map[string]*Binding{}}
	if ae, ok := def.Args[ArgAlternateExchange].(string); ok {
		x.ae, x.hasAE = ae, true
	}
	return x
}

// newRouter returns the routing index of an exchange type, or false for
// an unknown type.
func newRouter(typ string) (router, bool) {
	switch typ {
	case ExchangeDirect:
		return &directRouter{keys: map[string][]*Binding{}}, true
	case ExchangeFanout:
		return &fanoutRouter{}, true
	case ExchangeTopic:
		return &topicRouter{trie: newTopicTrie()}, true
	case ExchangeHeaders:
		return &headersRouter{keyIdx: map[string]int32{}}, true
	case ExchangeConsistentHash:
		return newConsistentHashRouter(), true
	case ExchangeModulusHash:
		return &modulusHashRouter{}, true
	case ExchangeLocalRandom:
		return &localRandomRouter{}, true
	}
	return nil, false
}

// Def returns the exchange as declared. Its Args are shared: do not
// modify them.
func (x *Exchange) Def() ExchangeDef { return x.def }

// Internal reports whether x is internal: clients may not publish to
// it. (Def would copy the definition on the publish path.)
func (x *Exchange) Internal() bool { return x.def.Internal }

// Binding returns the binding from x with identity ident, or nil.
func (x *Exchange) Binding(ident string) *Binding { return x.src[ident] }

// Bindings returns the bindings from x, in no order.
func (x *Exchange) Bindings() iter.Seq[*Binding] { return maps.Values(x.src) }

// NumBindings returns the number of bindings from x.
func (x *Exchange) NumBindings() int { return len(x.src) }

// SetAlternate makes name x's alternate exchange.
func (x *Exchange) SetAlternate(name string) { x.ae, x.hasAE = name, true }

// ClearAlternate leaves x without an alternate exchange.
func (x *Exchange) ClearAlternate() { x.ae, x.hasAE = "", false }

// NewQueue returns a queue, not yet in an index.
func NewQueue(name string, durable bool) *Queue {
	return &Queue{name: name, durable: durable, dst: map[string]*Binding{}}
}

// Name returns the queue's name.
func (q *Queue) Name() string { return q.name }

// SetDurable records whether the queue is durable, which makes the
// bindings to it that are made later durable or not. Only NewBinding
// reads it, so the single writer may call it while routes run.
func (q *Queue) SetDurable(durable bool) { q.durable = durable }

// Bindings returns the bindings to q, in no order.
func (q *Queue) Bindings() iter.Seq[*Binding] { return maps.Values(q.dst) }

// NewBinding returns the binding of def from src to the queue q, or to the
// exchange x when q is nil, not yet in ix (see Change.AddB and
// AddBinding). def's VHost becomes ix's. A heavy x-consistent-hash
// binding hashes its ring points here, so that it need not hold
// exclusive access meanwhile.
func (ix *Index) NewBinding(def BindingDef, src *Exchange, q *Queue, x *Exchange) *Binding {
	def.VHost = ix.vhost
	bd := &Binding{def: def, ident: def.Ident(), src: src, q: q, x: x}
	bd.durable = src.def.Durable && bd.destDurable()
	if src.def.Type == ExchangeHeaders {
		bd.hm = newHeadersMatcher(def.Args)
	}
	if src.def.Type == ExchangeConsistentHash {
		bd.ring = newBindingPoints(def)
	}
	return bd
}

// destDurable reports whether a binding's destination is durable.
func (b *Binding) destDurable() bool {
	if b.q != nil {
		return b.q.durable
	}
	return b.x.def.Durable
}

// Def returns the binding as defined. Its Args are shared: do not modify
// them.
func (b *Binding) Def() BindingDef { return b.def }

// Ident returns the binding's identity: def.Ident() unless SetIdent
// changed it.
func (b *Binding) Ident() string { return b.ident }

// SetIdent gives the binding the identity it was stored under, for a
// binding loaded from a catalog written by another version. It must not
// be in an index yet.
func (b *Binding) SetIdent(ident string) { b.ident = ident }

// Durable reports whether the binding outlives a restart: its source and
// destination are durable.
func (b *Binding) Durable() bool { return b.durable }

// Exchange returns the exchange named name, or nil.
func (ix *Index) Exchange(name string) *Exchange { return ix.exchanges[name] }

// Exchanges returns the exchanges, the default exchange "" included, in
// no order.
func (ix *Index) Exchanges() iter.Seq[*Exchange] { return maps.Values(ix.exchanges) }

// Queue returns the queue named name, or nil.
func (ix *Index) Queue(name string) *Queue { return ix.queues[name] }

// AddExchange adds x, which must not be in an index.
func (ix *Index) AddExchange(x *Exchange) {
	x.id = ix.xIDs.get()
	ix.exchanges[x.def.Name] = x
}

// AddQueue adds q, which must not be in an index: the default exchange
// routes to it, and it may be bound.
func (ix *Index) AddQueue(q *Queue) {
	q.id = ix.qIDs.get()
	ix.queues[q.name] = q
}

// RemoveQueue removes q, whose bindings a Change applied before has
// removed.
func (ix *Index) RemoveQueue(q *Queue) {
	delete(ix.queues, q.name)
	ix.qIDs.put(q.id)
}

// AddBinding adds b, made by NewBinding with endpoints in ix.
func (ix *Index) AddBinding(b *Binding) {
	b.src.src[b.ident] = b
	b.src.router.add(b)
	if b.q != nil {
		b.q.dst[b.ident] = b
	} else {
		b.x.dst[b.ident] = b
	}
}

// removeBinding removes b, if it is in ix.
func (ix *Index) removeBinding(b *Binding) {
	if b.src.src[b.ident] != b {
		return
	}
	delete(b.src.src, b.ident)
	b.src.router.remove(b)
	if b.q != nil {
		delete(b.q.dst, b.ident)
	} else {
		delete(b.x.dst, b.ident)
	}
}

// Apply applies c: its deletions, then its additions.
func (ix *Index) Apply(c *Change) {
	for _, b := range c.DelB {
		ix.removeBinding(b)
	}
	for _, x := range c.DelX {
		delete(ix.exchanges, x.def.Name)
		ix.xIDs.put(x.id)
	}
	if c.AddX != nil {
		ix.AddExchange(c.AddX)
	}
	for _, b := range c.AddB {
		ix.AddBinding(b)
	}
}
