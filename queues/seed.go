package queues

import (
	"errors"
	"fmt"
	"slices"

	"github.com/warren-mq/warren/osiris"
)

// A single node's data directory as the first node of a cluster
// (docs/design-cluster.md, "A single node's data as the first node"). A broker opened Clustered on a
// catalog that has vhosts but was never a cluster's (no applied index)
// holds a single node's catalog. Its BootstrapCluster proposes that
// catalog (a seed: the CatalogSnapshot of it) instead of the default
// identity: applied on every node, it replaces what a fresh node's
// bootstrap made, so the cluster starts with the single node's users,
// vhosts, permissions, policies, exchanges and bindings between them.
// Only the first seed applied counts (a replicated marker): a second
// node brought with its own data joins with the first one's catalog.
// Then the seeding node adopts its streams: each becomes a replicated
// stream that it leads, copied to every node (the replicas start empty
// and take the leader's log from its first offset). Its classic and
// quorum queues stay its own, as classic queues are in a cluster.

// seedKey marks a catalog that took a seed (replicated: every node
// applies the same seed).
var seedKey = []byte("sd/seeded")

// seedPending reports whether this broker holds a single node's catalog
// not yet given to its cluster. Whether the catalog was a single node's
// is decided once, when the broker joined (SetReplicator), before any
// entry of the cluster's log is applied: later, a catalog with vhosts
// and no applied index may be a fresh node's in the middle of applying
// another node's bootstrap (the vhost written, the applied index not
// yet), and seeding that half catalog would replace the cluster's. From
// then on the seed is pending until one is applied, this node's or
// another's (the marker): a fresh node's bootstrap applied first must
// not end it, or the cluster would keep the default identity while this
// node kept its own catalog (the seed replaces what a bootstrap made).
func (b *Broker) seedPending() (bool, error) {
	if b.repl == nil || !b.repl.single {
		return false, nil
	}
	var seeder string
	switch err := b.cat.get(seedKey, &seeder); {
	case err == nil:
		return false, nil
	case !errors.Is(err, ErrNotFound):
		return false, err
	}
	return true, nil
}

// singleNodeCatalog reports whether the catalog has vhosts but no index
// of a cluster's log applied.
func (b *Broker) singleNodeCatalog() (bool, error) {
	if applied, err := b.CatalogApplied(); err != nil || applied > 0 {
		return false, err
	}
	vhosts := false
	if err := b.cat.scan([]byte("v/"), func(_, _ []byte) error { vhosts = true; return nil }); err != nil {
		return false, err
	}
	return vhosts, nil
}

// cmdSeed is a single node's catalog brought into its new cluster.
type cmdSeed struct {
	Node    string `json:"node"`
	Catalog []byte `json:"catalog"` // CatalogSnapshot
}

func (*cmdSeed) op() string { return "catalog.seed" }

func init() { registerCommand(func() command { return &cmdSeed{} }) }

// seedResult tells the proposer whether its seed was the one applied.
type seedResult struct{ took bool }

func (c *cmdSeed) apply(b *Broker) (any, error) {
	var marker string
	if err := b.cat.get(seedKey, &marker); err == nil {
		return seedResult{}, nil // a seed was applied before: this one is late
	} else if !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	if err := b.RestoreCatalog(c.Catalog); err != nil {
		return nil, err
	}
	if err := b.cat.put(seedKey, c.Node); err != nil {
		return nil, err
	}
	return seedResult{took: true}, nil
}

// seedCluster proposes this node's catalog as its cluster's, then
// adopts its streams if the seed was the one applied.
func (b *Broker) seedCluster() error {
	snap, err := b.CatalogSnapshot()
	if err != nil {
		return err
	}
	res, err := b.exec(&cmdSeed{Node: b.repl.node, Catalog: snap})
	if err != nil {
		return err
	}
	if r, _ := res.(seedResult); !r.took {
		b.log.Warn("cluster: this node's catalog was not taken: another node's was first", "node", b.repl.node)
		return nil
	}
	b.log.Info("cluster: this node's catalog is the cluster's", "node", b.repl.node)
	return b.adoptStreams()
}

// adoptStreams makes every stream of this node's own a replicated stream
// it leads, and the bindings to it the cluster's.
func (b *Broker) adoptStreams() error {
	b.mu.Lock()
	var own []streamName
	for k := range b.mu.streams {
		if _, placed := b.mu.placed[k]; !placed {
			own = append(own, k)
		}
	}
	b.mu.Unlock()
	var errs []error
	for _, k := range own {
		var def StreamDef
		if err := b.cat.get(streamKey(k.vhost, k.name), &def); err != nil {
			errs = append(errs, err)
			continue
		}
		cs := &b.cstreams
		cs.mu.Lock()
		def.Members = slices.Clone(cs.nodes)
		cs.mu.Unlock()
		def.Leader, def.Epoch = b.repl.node, 1
		if _, err := b.exec(&cmdAdoptStream{def}); err != nil {
			errs = append(errs, fmt.Errorf("adopt stream %q in vhost %q: %w", k.name, k.vhost, err))
			continue
		}
		for _, bd := range b.Bindings(k.vhost) {
			if bd.DestKind == DestQueue && bd.Dest == k.name {
				errs = append(errs, b.execErr(&cmdBind{bindingCmdDef(bd)}))
			}
		}
	}
	return errors.Join(errs...)
}

// cmdAdoptStream makes a stream of its leader's own a replicated one:
// the leader reopens its log in the leader's role at the placement's
// epoch, the other members create empty copies that follow it.
type cmdAdoptStream struct {
	StreamDef
}

func (*cmdAdoptStream) op() string { return "stream.adopt" }

func init() { registerCommand(func() command { return &cmdAdoptStream{} }) }

func (c *cmdAdoptStream) apply(b *Broker) (any, error) {
	def := c.StreamDef
	if def.Leader != b.opts.NodeName {
		return (&cmdCreateStream{def}).apply(b) // an empty copy that follows
	}
	reg := b.queueReg()
	reg.opMu.Lock()
	key := streamName{def.VHost, def.Name}
	b.mu.Lock()
	old := b.mu.streams[key]
	_, placed := b.mu.placed[key]
	b.mu.Unlock()
	if placed || old == nil {
		reg.opMu.Unlock()
		return nil, nil // adopted already (applied again at a restart)
	}
	var cur StreamDef
	if err := b.cat.get(streamKey(def.VHost, def.Name), &cur); err != nil {
		reg.opMu.Unlock()
		return nil, err
	}
	def.ID = cur.ID // this node's directory
	if err := old.Close(); err != nil {
		b.log.Warn("cluster: closing a stream to adopt it", "vhost", def.VHost, "stream", def.Name, "err", err)
	}
	opts, _ := b.streamOptions(def)
	s, err := osiris.Open(b.streamDir(def.ID), opts)
	if err == nil {
		err = b.cat.put(streamKey(def.VHost, def.Name), def)
	}
	b.mu.Lock()
	if s != nil {
		b.mu.streams[key] = s
	} else {
		delete(b.mu.streams, key)
	}
	if err == nil {
		b.mu.placed[key] = def
	}
	watchers := make([]func(string, string), 0, len(b.mu.watchers))
	for _, w := range b.mu.watchers {
		watchers = append(watchers, w)
	}
	b.mu.Unlock()
	reg.opMu.Unlock()
	for _, w := range watchers {
		w(def.VHost, def.Name) // the old instance's clients reconnect
	}
	if err != nil {
		return nil, fmt.Errorf("queues: adopt stream %q in vhost %q: %w", def.Name, def.VHost, err)
	}
	b.streamOpened(def.VHost, def.Name)
	return nil, nil
}
