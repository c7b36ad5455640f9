package queues

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// The in-memory topology and its persistence.
//
// Lock order (leaves: no topology lock is held while calling out of the
// topology code, so the queue code may call the hooks with its own locks
// held and may call Route from anywhere):
//
//	topoState.dirMu → vhostTopo.wmu → vhostTopo.mu
//
// wmu serialises the changes of one vhost and is held across catalog I/O;
// mu guards the maps and routing indexes and is write-locked only to apply
// a change already on disk, so publishers (Route, read-locking mu) never
// wait for an fsync.

// topoState is a broker's topology: one vhostTopo per vhost, looked up
// through a copy-on-write directory.
type topoState struct {
	dirMu sync.Mutex                            // serialises directory changes
	dir   atomic.Pointer[map[string]*vhostTopo] // immutable; replaced under dirMu
}

// topology returns the broker's topology.
func (b *Broker) topology() *topoState { return &b.topo }

// topoVHost returns the topology of vhost, creating it (with the standard
// exchanges) the first time a catalogued vhost is used.
func (b *Broker) topoVHost(vhost string) (*vhostTopo, error) {
	t := b.topology()
	if m := t.dir.Load(); m != nil {
		if vt := (*m)[vhost]; vt != nil {
			return vt, nil
		}
	}
	if !b.VHostExists(vhost) {
		return nil, fmt.Errorf("vhost %q: %w", vhost, ErrNotFound)
	}
	t.dirMu.Lock()
	defer t.dirMu.Unlock()
	return t.addVHostLocked(vhost), nil
}

// addVHostLocked returns vhost's topology, adding a new one if needed.
// REQUIRES: t.dirMu held.
func (t *topoState) addVHostLocked(vhost string) *vhostTopo {
	old := t.dir.Load()
	if old != nil {
		if vt := (*old)[vhost]; vt != nil {
			return vt
		}
	}
	vt := newVHostTopo(vhost)
	m := make(map[string]*vhostTopo, 1)
	if old != nil {
		maps.Copy(m, *old)
	}
	m[vhost] = vt
	t.dir.Store(&m)
	return vt
}

// removeVHost drops vhost's topology from the directory.
func (t *topoState) removeVHost(vhost string) {
	t.dirMu.Lock()
	defer t.dirMu.Unlock()
	old := t.dir.Load()
	if old == nil || (*old)[vhost] == nil {
		return
	}
	m := maps.Clone(*old)
	delete(m, vhost)
	t.dir.Store(&m)
}

// vhostTopos returns the current vhost topologies.
func (t *topoState) vhostTopos() []*vhostTopo {
	m := t.dir.Load()
	if m == nil {
		return nil
	}
	out := make([]*vhostTopo, 0, len(*m))
	for _, vt := range *m {
		out = append(out, vt)
	}
	return out
}

// vhostTopo is one vhost's exchanges, queues (as routing destinations) and
// bindings.
type vhostTopo struct {
	name string

	wmu sync.Mutex // serialises changes; held across catalog I/O

	mu        sync.RWMutex // guards everything below; write-held only with wmu
	exchanges map[string]*exchange
	queues    map[string]*queueEntry
	xIDs      idAlloc // dense exchange ids, for the routing visited set
	qIDs      idAlloc // dense queue ids, for the routing duplicate set
	// pending holds durable bindings to queues not recovered yet, by
	// queue name: openTopology runs before the queues are opened.
	pending map[string][]pendingBinding
	// recovered is set once the queues are open: pending bindings left
	// then are stale, and later queues are new.
	recovered bool
}

// exchange is a declared exchange with its routing index.
type exchange struct {
	def    ExchangeDef
	id     int32
	router router
	ae     string // alternate exchange name, when hasAE
	hasAE  bool
	src    map[string]*binding // bindings from this exchange, by identity
	dst    map[string]*binding // bindings to this exchange, by identity
}

// queueEntry is a queue as the topology sees it: a routing destination.
type queueEntry struct {
	name    string
	durable bool
	id      int32
	dst     map[string]*binding // bindings to this queue, by identity
}

// binding is a binding with its endpoints resolved.
type binding struct {
	def     BindingDef
	ident   string // identity within the vhost; see bindingIdent
	src     *exchange
	q       *queueEntry // destination queue, or nil
	x       *exchange   // destination exchange, or nil
	durable bool        // persisted: source and destination are durable
	hm      *headersMatcher
	ring    []ringPoint // x-consistent-hash: its points, until the router takes them
}

// pendingBinding is a catalogued binding waiting for its queue.
type pendingBinding struct {
	def   BindingDef
	ident string // as in the catalog key
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

func newVHostTopo(vhost string) *vhostTopo {
	vt := &vhostTopo{
		name:      vhost,
		exchanges: map[string]*exchange{},
		queues:    map[string]*queueEntry{},
		pending:   map[string][]pendingBinding{},
	}
	for _, def := range standardExchanges {
		def.VHost = vhost
		x := newExchange(def)
		if def.Name == "" {
			x.router = defaultRouter{}
		}
		vt.addExchangeLocked(x)
	}
	return vt
}

// newExchange builds an exchange of a type newRouter knows.
func newExchange(def ExchangeDef) *exchange {
	r, _ := newRouter(def.Type)
	if c, ok := r.(*consistentHashRouter); ok {
		c.configure(def.Args)
	}
	x := &exchange{def: def, router: r, src: map[string]*binding{}, dst: map[string]*binding{}}
	if ae, ok := def.Args[argAlternateExchange].(string); ok {
		x.ae, x.hasAE = ae, true
	}
	return x
}

// newRouter returns the routing index of an exchange type, or false for
// an unknown type.
func newRouter(typ string) (router, bool) {
	switch typ {
	case ExchangeDirect:
		return &directRouter{keys: map[string][]*binding{}}, true
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

// destDurable reports whether a binding's destination is durable.
func (b *binding) destDurable() bool {
	if b.q != nil {
		return b.q.durable
	}
	return b.x.def.Durable
}

// topoChange is one atomic change of a vhost's topology: computed under
// wmu, persisted, then applied under mu.
type topoChange struct {
	addX *exchange
	addB []*binding

	delB       []*binding
	delBSet    map[*binding]bool
	srcRemoved map[*exchange]int // bindings of delB by source
	delX       []*exchange
	delXSet    map[*exchange]bool
}

func (c *topoChange) deleteBinding(b *binding) {
	if c.delBSet == nil {
		c.delBSet = map[*binding]bool{}
		c.srcRemoved = map[*exchange]int{}
	}
	if c.delBSet[b] {
		return
	}
	c.delBSet[b] = true
	c.delB = append(c.delB, b)
	c.srcRemoved[b.src]++
}

// deleteExchange removes x and every binding from or to it.
func (c *topoChange) deleteExchange(x *exchange) {
	if c.delXSet == nil {
		c.delXSet = map[*exchange]bool{}
	}
	if c.delXSet[x] {
		return
	}
	c.delXSet[x] = true
	c.delX = append(c.delX, x)
	for _, b := range x.src {
		c.deleteBinding(b)
	}
	for _, b := range x.dst {
		c.deleteBinding(b)
	}
}

// autoDelete adds the auto-delete exchanges the change leaves without
// bindings as a source, transitively (deleting one removes its bindings
// as a destination, which may empty another), as RabbitMQ does.
func (c *topoChange) autoDelete() {
	for i := 0; i < len(c.delB); i++ {
		s := c.delB[i].src
		if s.def.AutoDelete && !c.delXSet[s] && c.srcRemoved[s] == len(s.src) {
			c.deleteExchange(s)
		}
	}
}

// Catalog records of the topology. Argument tables are kept typed
// (encodeArgs) since equivalence checks and headers matching compare
// types.
type exchangeRecord struct {
	VHost      string `json:"vhost"`
	Name       string `json:"name"`
	Type       string `json:"type"`
	Durable    bool   `json:"durable"`
	AutoDelete bool   `json:"auto_delete,omitempty"`
	Internal   bool   `json:"internal,omitempty"`
	Args       []byte `json:"args,omitempty"`
}

type bindingRecord struct {
	VHost    string   `json:"vhost"`
	Source   string   `json:"source"`
	DestKind DestKind `json:"dest_kind"`
	Dest     string   `json:"dest"`
	Key      string   `json:"key"`
	Args     []byte   `json:"args,omitempty"`
}

// Catalog keys: e/<vhost> 0x00 <exchange> and b/<vhost> 0x00 <identity>.
func exchangeKey(vhost, name string) []byte { return []byte("e/" + vhost + "\x00" + name) }
func bindingKey(vhost, ident string) []byte { return []byte("b/" + vhost + "\x00" + ident) }

// persist writes the durable part of c to the catalog in one synced batch.
func (b *Broker) persistTopo(vt *vhostTopo, c *topoChange) error {
	batch := b.cat.db.NewBatch()
	defer batch.Close()
	for _, bd := range c.delB {
		if bd.durable {
			if err := batch.Delete(bindingKey(vt.name, bd.ident), nil); err != nil {
				return err
			}
		}
	}
	for _, x := range c.delX {
		if x.def.Durable {
			if err := batch.Delete(exchangeKey(vt.name, x.def.Name), nil); err != nil {
				return err
			}
		}
	}
	if x := c.addX; x != nil && x.def.Durable {
		args, err := encodeArgs(x.def.Args)
		if err != nil {
			return err
		}
		v, err := json.Marshal(exchangeRecord{
			VHost: vt.name, Name: x.def.Name, Type: x.def.Type, Durable: true,
			AutoDelete: x.def.AutoDelete, Internal: x.def.Internal, Args: args,
		})
		if err != nil {
			return err
		}
		if err := batch.Set(exchangeKey(vt.name, x.def.Name), v, nil); err != nil {
			return err
		}
	}
	for _, bd := range c.addB {
		if !bd.durable {
			continue
		}
		args, err := encodeArgs(bd.def.Args)
		if err != nil {
			return err
		}
		v, err := json.Marshal(bindingRecord{
			VHost: vt.name, Source: bd.def.Source, DestKind: bd.def.DestKind,
			Dest: bd.def.Dest, Key: bd.def.Key, Args: args,
		})
		if err != nil {
			return err
		}
		if err := batch.Set(bindingKey(vt.name, bd.ident), v, nil); err != nil {
			return err
		}
	}
	if batch.Empty() {
		return nil
	}
	if err := batch.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("queues: catalog topology of vhost %q: %w", vt.name, err)
	}
	return nil
}

// applyLocked applies c in memory.
// REQUIRES: vt.wmu and vt.mu (write) held.
func (vt *vhostTopo) applyLocked(c *topoChange) {
	for _, b := range c.delB {
		vt.removeBindingLocked(b)
	}
	for _, x := range c.delX {
		delete(vt.exchanges, x.def.Name)
		vt.xIDs.put(x.id)
	}
	if c.addX != nil {
		vt.addExchangeLocked(c.addX)
	}
	for _, b := range c.addB {
		vt.addBindingLocked(b)
	}
}

// REQUIRES: vt.mu held for writing (or vt not yet shared).
func (vt *vhostTopo) addExchangeLocked(x *exchange) {
	x.id = vt.xIDs.get()
	vt.exchanges[x.def.Name] = x
}

// REQUIRES: vt.mu held for writing (or vt not yet shared).
func (vt *vhostTopo) addBindingLocked(b *binding) {
	b.src.src[b.ident] = b
	b.src.router.add(b)
	if b.q != nil {
		b.q.dst[b.ident] = b
	} else {
		b.x.dst[b.ident] = b
	}
}

// REQUIRES: vt.mu held for writing.
func (vt *vhostTopo) removeBindingLocked(b *binding) {
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

// commit persists c and applies it.
// REQUIRES: vt.wmu held.
func (b *Broker) commitTopo(vt *vhostTopo, c *topoChange) error {
	if c.addX != nil {
		b.resolveExchangePolicy(vt, c.addX)
	}
	if err := b.persistTopo(vt, c); err != nil {
		return err
	}
	vt.mu.Lock()
	vt.applyLocked(c)
	vt.mu.Unlock()
	return nil
}

// newBinding resolves def against vt; the endpoints must exist.
// REQUIRES: vt.wmu held.
func (vt *vhostTopo) newBinding(def BindingDef, src *exchange, q *queueEntry, x *exchange) *binding {
	def.VHost = vt.name
	def.Args = normalizeArgs(def.Args)
	bd := &binding{def: def, ident: bindingIdent(def), src: src, q: q, x: x}
	bd.durable = src.def.Durable && bd.destDurable()
	if src.def.Type == ExchangeHeaders {
		bd.hm = newHeadersMatcher(def.Args)
	}
	if src.def.Type == ExchangeConsistentHash {
		bd.ring = newBindingPoints(def)
	}
	return bd
}

// openTopology loads durable exchanges and bindings from the catalog and
// predeclares each vhost's standard exchanges. Called by Open before the
// queues are opened. Records left behind by a deleted vhost or exchange
// are removed; exchanges of a type this version does not know are kept in
// the catalog (with their bindings) but not loaded.
func (b *Broker) openTopology() error {
	t := b.topology()
	t.dirMu.Lock()
	defer t.dirMu.Unlock()
	if err := b.cat.scan([]byte("v/"), func(k, _ []byte) error {
		t.addVHostLocked(string(k[2:]))
		return nil
	}); err != nil {
		return err
	}
	dir := t.dir.Load()
	lookup := func(vhost string) *vhostTopo {
		if dir == nil {
			return nil
		}
		return (*dir)[vhost]
	}
	var stale [][]byte
	unknown := map[string]bool{} // vhost 0x00 exchange, of an unknown type
	if err := b.cat.scan([]byte("e/"), func(k, v []byte) error {
		var rec exchangeRecord
		if err := unmarshal(v, &rec); err != nil {
			return err
		}
		vt := lookup(rec.VHost)
		_, known := newRouter(rec.Type)
		switch {
		case vt == nil || vt.exchanges[rec.Name] != nil:
			stale = append(stale, slices.Clone(k))
			return nil
		case !known:
			b.log.Warn("topology: exchange of an unknown type not loaded", "vhost", rec.VHost, "exchange", rec.Name, "type", rec.Type)
			unknown[rec.VHost+"\x00"+rec.Name] = true
			return nil
		}
		args, err := decodeArgs(rec.Args)
		if err != nil {
			return fmt.Errorf("queues: exchange %q in vhost %q: %w", rec.Name, rec.VHost, err)
		}
		vt.addExchangeLocked(newExchange(ExchangeDef{
			VHost: rec.VHost, Name: rec.Name, Type: rec.Type, Durable: rec.Durable,
			AutoDelete: rec.AutoDelete, Internal: rec.Internal, Args: args,
		}))
		return nil
	}); err != nil {
		return err
	}
	if err := b.cat.scan([]byte("b/"), func(k, v []byte) error {
		var rec bindingRecord
		if err := unmarshal(v, &rec); err != nil {
			return err
		}
		vt := lookup(rec.VHost)
		if vt == nil {
			stale = append(stale, slices.Clone(k))
			return nil
		}
		src := vt.exchanges[rec.Source]
		var dst *exchange
		if rec.DestKind == DestExchange {
			dst = vt.exchanges[rec.Dest]
		}
		if src == nil || rec.DestKind == DestExchange && dst == nil {
			if !unknown[rec.VHost+"\x00"+rec.Source] && !(rec.DestKind == DestExchange && unknown[rec.VHost+"\x00"+rec.Dest]) {
				stale = append(stale, slices.Clone(k))
			}
			return nil
		}
		args, err := decodeArgs(rec.Args)
		if err != nil {
			return fmt.Errorf("queues: binding of exchange %q in vhost %q: %w", rec.Source, rec.VHost, err)
		}
		def := BindingDef{VHost: rec.VHost, Source: rec.Source, DestKind: rec.DestKind, Dest: rec.Dest, Key: rec.Key, Args: args}
		ident := string(k[len(bindingKey(rec.VHost, "")):])
		if rec.DestKind == DestQueue {
			vt.pending[rec.Dest] = append(vt.pending[rec.Dest], pendingBinding{def, ident})
			return nil
		}
		bd := vt.newBinding(def, src, nil, dst)
		bd.ident = ident
		vt.addBindingLocked(bd)
		return nil
	}); err != nil {
		return err
	}
	if len(stale) == 0 {
		return nil
	}
	b.log.Warn("topology: removing stale catalog records", "count", len(stale))
	batch := b.cat.db.NewBatch()
	defer batch.Close()
	for _, k := range stale {
		if err := batch.Delete(k, nil); err != nil {
			return err
		}
	}
	if err := batch.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("queues: catalog: remove stale topology: %w", err)
	}
	return nil
}

// topoQueueAdded tells the topology that a queue exists (the default
// exchange routes to it; it may be bound). Called by the queue code after
// a queue is created or recovered.
func (b *Broker) topoQueueAdded(vhost, name string, durable bool) {
	vt, err := b.topoVHost(vhost)
	if err != nil {
		b.log.Error("topology: queue added to unknown vhost", "vhost", vhost, "queue", name)
		return
	}
	vt.wmu.Lock()
	defer vt.wmu.Unlock()
	if q := vt.queues[name]; q != nil {
		q.durable = durable
		return
	}
	q := &queueEntry{name: name, durable: durable, dst: map[string]*binding{}}
	var restored []*binding
	if !vt.recovered {
		for _, p := range vt.pending[name] {
			if src := vt.exchanges[p.def.Source]; src != nil {
				bd := vt.newBinding(p.def, src, q, nil)
				bd.ident = p.ident
				if src.src[bd.ident] == nil {
					restored = append(restored, bd)
				}
			}
		}
	}
	vt.mu.Lock()
	q.id = vt.qIDs.get()
	vt.queues[name] = q
	delete(vt.pending, name)
	for _, bd := range restored {
		vt.addBindingLocked(bd)
	}
	vt.mu.Unlock()
}

// topoQueueRemoved removes a deleted queue's bindings (and auto-delete
// exchanges left without bindings). Called by the queue code.
func (b *Broker) topoQueueRemoved(vhost, name string) {
	vt, err := b.topoVHost(vhost)
	if err != nil {
		return
	}
	vt.wmu.Lock()
	defer vt.wmu.Unlock()
	q := vt.queues[name]
	if q == nil {
		return
	}
	var c topoChange
	for _, bd := range q.dst {
		c.deleteBinding(bd)
	}
	c.autoDelete()
	if err := b.persistTopo(vt, &c); err != nil {
		// The queue is gone whatever the catalog says; its stale
		// bindings are dropped at the next recovery (topoQueuesRecovered).
		b.log.Error("topology: removing the bindings of a deleted queue", "vhost", vhost, "queue", name, "err", err)
	}
	vt.mu.Lock()
	vt.applyLocked(&c)
	delete(vt.queues, name)
	vt.qIDs.put(q.id)
	vt.mu.Unlock()
}

// topoQueuesRecovered ends recovery: durable bindings to queues that were
// not recovered are deleted from the catalog, and queues added later are
// new ones. To be called by Open after openQueues.
func (b *Broker) topoQueuesRecovered() error {
	var errs []error
	for _, vt := range b.topology().vhostTopos() {
		vt.wmu.Lock()
		if !vt.recovered {
			batch := b.cat.db.NewBatch()
			for _, ps := range vt.pending {
				for _, p := range ps {
					_ = batch.Delete(bindingKey(vt.name, p.ident), nil)
				}
			}
			if !batch.Empty() {
				if err := batch.Commit(pebble.Sync); err != nil {
					errs = append(errs, fmt.Errorf("queues: drop stale bindings in vhost %q: %w", vt.name, err))
				}
			}
			batch.Close()
			vt.pending = nil
			vt.recovered = true
		}
		vt.wmu.Unlock()
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// topoVHostDeleted drops a deleted vhost's exchanges and bindings, from
// memory and from the catalog. To be called by DeleteVHost.
func (b *Broker) topoVHostDeleted(vhost string) error {
	b.topology().removeVHost(vhost)
	if err := b.cat.deletePrefix([]byte("b/" + vhost + "\x00")); err != nil {
		return err
	}
	return b.cat.deletePrefix([]byte("e/" + vhost + "\x00"))
}
