package queues

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/warren-mq/warren/queues/route"
)

// The in-memory topology (package route's index, one per vhost), its
// locks and its persistence.
//
// Lock order (leaves: no topology lock is held while calling out of the
// topology code, so the queue code may call the hooks with its own locks
// held and may call Route from anywhere):
//
//	topoState.dirMu → vhostTopo.wmu → vhostTopo.mu
//
// wmu serialises the changes of one vhost and is held across catalog I/O;
// mu guards the index and is write-locked only to apply a change already
// on disk, so publishers (Route, read-locking mu) never wait for an
// fsync. A wmu holder may read the index without mu (only wmu holders
// change it), which is what route.Index allows of its single writer.

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

	mu  sync.RWMutex // guards idx; write-held only with wmu
	idx *route.Index
	// pending holds durable bindings to queues not recovered yet, by
	// queue name: openTopology runs before the queues are opened.
	pending map[string][]pendingBinding
	// recovered is set once the queues are open: pending bindings left
	// then are stale, and later queues are new.
	recovered bool
}

// pendingBinding is a catalogued binding waiting for its queue.
type pendingBinding struct {
	def   BindingDef
	ident string // as in the catalog key
}

func newVHostTopo(vhost string) *vhostTopo {
	return &vhostTopo{
		name:    vhost,
		idx:     route.NewIndex(vhost),
		pending: map[string][]pendingBinding{},
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

// persistTopo writes the durable part of c to the catalog in one synced
// batch.
func (b *Broker) persistTopo(vt *vhostTopo, c *route.Change) error {
	batch := b.cat.db.NewBatch()
	defer batch.Close()
	for _, bd := range c.DelB {
		if bd.Durable() {
			if err := batch.Delete(bindingKey(vt.name, bd.Ident()), nil); err != nil {
				return err
			}
		}
	}
	for _, x := range c.DelX {
		if x.Def().Durable {
			if err := batch.Delete(exchangeKey(vt.name, x.Def().Name), nil); err != nil {
				return err
			}
		}
	}
	if c.AddX != nil && c.AddX.Def().Durable {
		x := c.AddX.Def()
		args, err := encodeArgs(x.Args)
		if err != nil {
			return err
		}
		v, err := json.Marshal(exchangeRecord{
			VHost: vt.name, Name: x.Name, Type: x.Type, Durable: true,
			AutoDelete: x.AutoDelete, Internal: x.Internal, Args: args,
		})
		if err != nil {
			return err
		}
		if err := batch.Set(exchangeKey(vt.name, x.Name), v, nil); err != nil {
			return err
		}
	}
	for _, bd := range c.AddB {
		if !bd.Durable() {
			continue
		}
		def := bd.Def()
		args, err := encodeArgs(def.Args)
		if err != nil {
			return err
		}
		v, err := json.Marshal(bindingRecord{
			VHost: vt.name, Source: def.Source, DestKind: def.DestKind,
			Dest: def.Dest, Key: def.Key, Args: args,
		})
		if err != nil {
			return err
		}
		if err := batch.Set(bindingKey(vt.name, bd.Ident()), v, nil); err != nil {
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

// commitTopo persists c and applies it.
// REQUIRES: vt.wmu held.
func (b *Broker) commitTopo(vt *vhostTopo, c *route.Change) error {
	if c.AddX != nil {
		b.resolveExchangePolicy(vt, c.AddX)
	}
	if err := b.persistTopo(vt, c); err != nil {
		return err
	}
	vt.mu.Lock()
	vt.idx.Apply(c)
	vt.mu.Unlock()
	return nil
}

// newBinding resolves def against vt, from src to the queue q or, when q
// is nil, the exchange x, with its arguments normalized as the catalog
// keeps them.
// REQUIRES: vt.wmu held.
func (vt *vhostTopo) newBinding(def BindingDef, src *route.Exchange, q *route.Queue, x *route.Exchange) *route.Binding {
	def.Args = normalizeArgs(def.Args)
	return vt.idx.NewBinding(def, src, q, x)
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
		known := route.KnownType(rec.Type)
		switch {
		case vt == nil || vt.idx.Exchange(rec.Name) != nil:
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
		vt.idx.AddExchange(route.NewExchange(ExchangeDef{
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
		src := vt.idx.Exchange(rec.Source)
		var dst *route.Exchange
		if rec.DestKind == DestExchange {
			dst = vt.idx.Exchange(rec.Dest)
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
		bd.SetIdent(ident)
		vt.idx.AddBinding(bd)
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
	if q := vt.idx.Queue(name); q != nil {
		q.SetDurable(durable) // read by wmu holders only
		return
	}
	q := route.NewQueue(name, durable)
	var restored []*route.Binding
	if !vt.recovered {
		for _, p := range vt.pending[name] {
			if src := vt.idx.Exchange(p.def.Source); src != nil {
				bd := vt.newBinding(p.def, src, q, nil)
				bd.SetIdent(p.ident)
				if src.Binding(bd.Ident()) == nil {
					restored = append(restored, bd)
				}
			}
		}
	}
	vt.mu.Lock()
	vt.idx.AddQueue(q)
	delete(vt.pending, name)
	for _, bd := range restored {
		vt.idx.AddBinding(bd)
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
	q := vt.idx.Queue(name)
	if q == nil {
		return
	}
	var c route.Change
	for bd := range q.Bindings() {
		c.DeleteBinding(bd)
	}
	c.AutoDelete()
	if err := b.persistTopo(vt, &c); err != nil {
		// The queue is gone whatever the catalog says; its stale
		// bindings are dropped at the next recovery (topoQueuesRecovered).
		b.log.Error("topology: removing the bindings of a deleted queue", "vhost", vhost, "queue", name, "err", err)
	}
	vt.mu.Lock()
	vt.idx.Apply(&c)
	vt.idx.RemoveQueue(q)
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
