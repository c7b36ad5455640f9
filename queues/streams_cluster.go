package queues

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/warren-mq/warren/osiris"
)

// Streams in a cluster (docs/design-cluster.md, "Streams"): a stream's
// record in the catalog names its members (x-initial-cluster-size of
// the nodes, placement.go), its leader (the node where it was declared,
// as RabbitMQ's client-local leader locator) and the leader's epoch. Each member opens the stream
// as osiris's leader or replica; the cluster node (cluster/node) runs the
// pull of each replica from the leader and tells the broker nothing: the
// stream's own commit offset gates readers and publishers' confirms.

// clusterStreams is what a clustered broker knows of the cluster for
// its streams.
type clusterStreams struct {
	mu    sync.Mutex
	nodes []string // every node, sorted
	watch map[int]func(vhost, name string)
	nextW int
	up    func(node string) bool // SetNodeUp
	proxy Proxy                  // SetProxy
	// onForget is told of each node forgotten (SetOnForget).
	onForget func(node string)
	// forward stores a consumer's offset on a stream's leader
	// (SetOffsetForwarder).
	forward func(leader, vhost, name, ref string, offset uint64) error
}

// SetClusterNodes tells the broker every node of its cluster (sorted
// here): the members of the streams and quorum queues it creates, but
// for the nodes the catalog says were forgotten.
func (b *Broker) SetClusterNodes(nodes []string) {
	nodes = slices.DeleteFunc(slices.Clone(nodes), b.NodeForgotten)
	cs := &b.cstreams
	cs.mu.Lock()
	cs.nodes = slices.Sorted(slices.Values(nodes))
	cs.mu.Unlock()
}

// SetOffsetForwarder gives the broker the way to store a consumer's
// offset in a stream's leader from a node that holds a replica of it
// (cluster/node: over nodenet's stream lane); see StoreStreamOffset.
func (b *Broker) SetOffsetForwarder(fn func(leader, vhost, name, ref string, offset uint64) error) {
	cs := &b.cstreams
	cs.mu.Lock()
	cs.forward = fn
	cs.mu.Unlock()
}

// StoreStreamOffset stores ref's offset in stream name: in this node's
// copy when it leads the stream, else in the leader's, through the
// offset forwarder. A stream client's consumer usually reads from a
// replica (Metadata sends it there), and stores its offset on that
// connection, as RabbitMQ lets it.
func (b *Broker) StoreStreamOffset(vhost, name, ref string, offset uint64) error {
	s, err := b.Stream(vhost, name)
	if err != nil {
		return err
	}
	err = s.StoreOffset(ref, offset)
	if !errors.Is(err, osiris.ErrNotLeader) {
		return err
	}
	cs := &b.cstreams
	cs.mu.Lock()
	forward := cs.forward
	cs.mu.Unlock()
	p, ok := b.PlacementOf(vhost, name)
	if forward == nil || !ok {
		return err
	}
	return forward(p.Leader, vhost, name, ref, offset)
}

// WatchStreams calls fn after each stream this node is a member of is
// opened by a catalog command (created, or recovered: call StreamsHere
// for those open before), until cancel. fn must not block.
func (b *Broker) WatchStreams(fn func(vhost, name string)) (cancel func()) {
	cs := &b.cstreams
	cs.mu.Lock()
	if cs.watch == nil {
		cs.watch = map[int]func(string, string){}
	}
	id := cs.nextW
	cs.nextW++
	cs.watch[id] = fn
	cs.mu.Unlock()
	return func() {
		cs.mu.Lock()
		delete(cs.watch, id)
		cs.mu.Unlock()
	}
}

// StreamsHere returns the placements of the replicated streams open on
// this node.
func (b *Broker) StreamsHere() []StreamDef {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []StreamDef
	for k, def := range b.mu.placed {
		if _, open := b.mu.streams[k]; open {
			out = append(out, def)
		}
	}
	return out
}

// StreamPlacement returns the placement of a replicated stream.
func (b *Broker) StreamPlacement(vhost, name string) (StreamDef, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	def, ok := b.mu.placed[streamName{vhost, name}]
	return def, ok
}

// streamOptions returns the options a stream opens with on this node
// and whether this node holds it at all.
func (b *Broker) streamOptions(def StreamDef) (osiris.Options, bool) {
	opts := b.opts.StreamOptions
	if len(def.Members) == 0 {
		return opts, true // a single node's stream
	}
	var member bool
	opts.Replication, member = b.replicationFor(def.Members, def.Lost, def.Leader, def.Epoch)
	return opts, member
}

// cmdCreateStream creates a stream on every member.
type cmdCreateStream struct {
	StreamDef
}

func (*cmdCreateStream) op() string { return "stream.create" }

// cmdDeleteStream deletes a stream on every node.
type cmdDeleteStream struct {
	VHost string `json:"vhost"`
	Name  string `json:"name"`
}

func (*cmdDeleteStream) op() string { return "stream.delete" }

func init() {
	registerCommand(func() command { return &cmdCreateStream{} })
	registerCommand(func() command { return &cmdDeleteStream{} })
}

// createStreamCluster is CreateStream in a cluster: the stream's
// arguments are checked here, its placement decided and the creation
// proposed. REQUIRES: reg.opMu not held (apply takes it).
// balanced puts the leader on the node leading the fewest streams
// (placement.go), whatever the stream's leader locator says.
func (b *Broker) createStreamCluster(vhost, name string, args map[string]string, balanced bool) error {
	if _, err := streamCreateConfig(name, args); err != nil {
		return err
	}
	size, bal := streamPlacementArgs(args)
	members, leader, err := b.place(false, size, balanced || bal)
	if err != nil {
		return err
	}
	_, err = b.exec(&cmdCreateStream{StreamDef{VHost: vhost, Name: name, Args: args,
		Members: members, Leader: leader, Epoch: 1}})
	return err
}

func (c *cmdCreateStream) apply(b *Broker) (any, error) {
	reg := b.queueReg()
	reg.opMu.Lock()
	def := c.StreamDef
	err := b.createPlacedStreamLocked(def)
	if errors.Is(err, ErrExists) {
		err = b.existingStreamLocked(def.VHost, def.Name, def.Args, err)
	}
	reg.opMu.Unlock()
	if err != nil {
		return nil, err
	}
	b.applyStreamPolicy(def.VHost, def.Name, def.Args)
	if _, member := b.streamOptions(def); member {
		b.streamOpened(def.VHost, def.Name)
	}
	return nil, nil
}

// streamOpened tells the WatchStreams watchers that this node opened a
// replicated stream (created, or reopened in a new role).
func (b *Broker) streamOpened(vhost, name string) {
	cs := &b.cstreams
	cs.mu.Lock()
	fns := make([]func(string, string), 0, len(cs.watch))
	for _, fn := range cs.watch {
		fns = append(fns, fn)
	}
	cs.mu.Unlock()
	for _, fn := range fns {
		fn(vhost, name)
	}
}

// createPlacedStreamLocked records a replicated stream and opens it if
// this node is a member.
// REQUIRES: reg.opMu held.
func (b *Broker) createPlacedStreamLocked(def StreamDef) error {
	cfg, err := streamCreateConfig(def.Name, def.Args)
	if err != nil {
		return err
	}
	if b.queueReg().get(def.VHost, def.Name) != nil {
		return fmt.Errorf("stream %q: a queue has the name: %w", def.Name, ErrExists)
	}
	if !b.VHostExists(def.VHost) {
		return fmt.Errorf("vhost %q: %w", def.VHost, ErrNotFound)
	}
	key := streamName{def.VHost, def.Name}
	b.mu.Lock()
	_, placed := b.mu.placed[key]
	_, open := b.mu.streams[key]
	b.mu.Unlock()
	if placed || open {
		return fmt.Errorf("stream %q: %w", def.Name, ErrExists)
	}
	opts, member := b.streamOptions(def)
	var s *osiris.Stream
	if member {
		if def.ID, err = b.cat.nextStreamID(); err != nil {
			return err
		}
		cfg.Epoch = def.Epoch
		if s, err = osiris.Create(b.streamDir(def.ID), cfg, opts); err != nil {
			return err
		}
	}
	if err := b.cat.put(streamKey(def.VHost, def.Name), def); err != nil {
		if s != nil {
			s.Delete()
		}
		return err
	}
	b.mu.Lock()
	b.mu.placed[key] = def
	if s != nil {
		b.mu.streams[key] = s
	}
	b.mu.Unlock()
	// Every node routes to the stream and holds the bindings to it (they
	// are the cluster's), members or not.
	b.topoQueueAdded(def.VHost, def.Name, true)
	if s != nil {
		b.churn.QueuesCreated.Add(1)
	}
	return nil
}

func (c *cmdDeleteStream) apply(b *Broker) (any, error) {
	reg := b.queueReg()
	reg.opMu.Lock()
	key := streamName{c.VHost, c.Name}
	b.mu.Lock()
	_, placed := b.mu.placed[key]
	delete(b.mu.placed, key)
	_, open := b.mu.streams[key]
	b.mu.Unlock()
	if !open {
		var err error
		if placed { // a stream this node is not a member of
			err = b.cat.delete(streamKey(c.VHost, c.Name))
			b.topoQueueRemoved(c.VHost, c.Name)
		} else {
			err = fmt.Errorf("stream %q in vhost %q: %w", c.Name, c.VHost, ErrNotFound)
		}
		reg.opMu.Unlock()
		return nil, err
	}
	s, watchers, err := b.deleteStreamLocked(c.VHost, c.Name)
	reg.opMu.Unlock()
	if err != nil {
		return nil, err
	}
	err = s.Delete()
	for _, w := range watchers {
		w(c.VHost, c.Name)
	}
	return nil, err
}

// NodeAddr is where a node's stream protocol listener is advertised.
type NodeAddr struct {
	Node string `json:"node"`
	Host string `json:"host"`
	Port int    `json:"port"`
}

func nodeAddrKey(node string) []byte { return []byte("nd/" + node) }

// cmdAdvertise records a node's stream address.
type cmdAdvertise struct{ NodeAddr }

func (*cmdAdvertise) op() string { return "node.advertise" }

func (c *cmdAdvertise) apply(b *Broker) (any, error) {
	return nil, b.cat.put(nodeAddrKey(c.Node), c.NodeAddr)
}

func init() { registerCommand(func() command { return &cmdAdvertise{} }) }

// Advertise records, for every node, where this node's stream protocol
// listener is (what Metadata tells stream clients), unless the catalog
// already says so.
func (b *Broker) Advertise(a NodeAddr) error {
	if cur, ok := b.NodeStreamAddr(a.Node); ok && cur == a {
		return nil
	}
	return b.execErr(&cmdAdvertise{a})
}

// NodeStreamAddr returns where node's stream listener is advertised.
func (b *Broker) NodeStreamAddr(node string) (NodeAddr, bool) {
	var a NodeAddr
	if err := b.cat.get(nodeAddrKey(node), &a); err != nil {
		return NodeAddr{}, false
	}
	return a, true
}

// NodeName is this node's name in its cluster ("" on a single node).
func (b *Broker) NodeName() string {
	if b.repl == nil {
		return ""
	}
	return b.repl.node
}

// SetNodeUp gives the broker the cluster's view of which nodes are
// reachable (Metadata names only those); nil: every node is.
func (b *Broker) SetNodeUp(fn func(node string) bool) {
	b.cstreams.mu.Lock()
	b.cstreams.up = fn
	b.cstreams.mu.Unlock()
}

// NodeUp reports whether node is reachable from this one (this node
// always is).
func (b *Broker) NodeUp(node string) bool {
	b.cstreams.mu.Lock()
	fn := b.cstreams.up
	b.cstreams.mu.Unlock()
	return fn == nil || node == b.opts.NodeName || fn(node)
}

// cmdStreamLeader moves a replicated stream's leadership to another
// member with a greater epoch (cluster/node's coordinator decides it when
// the leader's node is lost). Every member reopens the stream in its new
// role; the stream's clients on each node are told it went away (the
// stream protocol's metadata update), as RabbitMQ's are when a leader
// changes, and reconnect to the leader Metadata now names.
type cmdStreamLeader struct {
	VHost  string `json:"vhost"`
	Name   string `json:"name"`
	Leader string `json:"leader"`
	Epoch  uint64 `json:"epoch"`
}

func (*cmdStreamLeader) op() string { return "stream.leader" }

func init() { registerCommand(func() command { return &cmdStreamLeader{} }) }

// MoveStreamLeader proposes leader as the stream's leader with epoch.
// The change is refused (a no-op) unless epoch is above the current one.
func (b *Broker) MoveStreamLeader(vhost, name, leader string, epoch uint64) error {
	return b.execErr(&cmdStreamLeader{VHost: vhost, Name: name, Leader: leader, Epoch: epoch})
}

// StreamPlacements returns every replicated stream's placement.
func (b *Broker) StreamPlacements() []StreamDef {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]StreamDef, 0, len(b.mu.placed))
	for _, def := range b.mu.placed {
		out = append(out, def)
	}
	return out
}

func (c *cmdStreamLeader) apply(b *Broker) (any, error) {
	reg := b.queueReg()
	reg.opMu.Lock()
	key := streamName{c.VHost, c.Name}
	b.mu.Lock()
	def, ok := b.mu.placed[key]
	old := b.mu.streams[key]
	b.mu.Unlock()
	switch {
	case !ok:
		reg.opMu.Unlock()
		return nil, fmt.Errorf("stream %q in vhost %q: %w", c.Name, c.VHost, ErrNotFound)
	case c.Epoch <= def.Epoch || !slices.Contains(def.Members, c.Leader):
		reg.opMu.Unlock()
		return nil, nil // stale, or applied before a restart
	}
	def.Leader, def.Epoch = c.Leader, c.Epoch
	if err := b.cat.put(streamKey(def.VHost, def.Name), def); err != nil {
		reg.opMu.Unlock()
		return nil, err
	}
	var s *osiris.Stream
	var err error
	if old != nil {
		old.Close()
		opts, _ := b.streamOptions(def)
		if opts.Replication.Role == osiris.RoleReplica {
			opts.Replication.Epoch = 0 // a replica takes its leader's epochs from the chunks
		}
		s, err = osiris.Open(b.streamDir(def.ID), opts)
		if err != nil {
			b.log.Error("cluster: reopen stream in its new role", "vhost", def.VHost, "stream", def.Name, "err", err)
		}
	}
	b.mu.Lock()
	b.mu.placed[key] = def
	if s != nil {
		b.mu.streams[key] = s
	} else {
		delete(b.mu.streams, key)
	}
	watchers := make([]func(string, string), 0, len(b.mu.watchers))
	for _, w := range b.mu.watchers {
		watchers = append(watchers, w)
	}
	b.mu.Unlock()
	reg.opMu.Unlock()
	if old == nil {
		return nil, nil
	}
	// The old instance's clients go (they reconnect to the new leader);
	// then the cluster node follows the new leader.
	for _, w := range watchers {
		w(def.VHost, def.Name)
	}
	if s != nil {
		b.streamOpened(def.VHost, def.Name)
	}
	return nil, err
}

// Placement is where a replicated stream or quorum queue lives: what
// cluster/node needs to pull replicas and move leaders, for both kinds.
type Placement struct {
	VHost   string
	Name    string
	Members []string
	Leader  string
	Epoch   uint64
	Queue   bool // a quorum queue; a stream otherwise
	// Lost is how many members were forgotten: a majority is of
	// len(Members)+Lost (forget_cluster.go).
	Lost int
}

func placementOfStream(def StreamDef) Placement {
	return Placement{VHost: def.VHost, Name: def.Name, Members: def.Members, Leader: def.Leader, Epoch: def.Epoch, Lost: def.Lost}
}

// Placements returns the placement of every replicated stream and queue.
func (b *Broker) Placements() []Placement {
	var out []Placement
	for _, def := range b.StreamPlacements() {
		out = append(out, placementOfStream(def))
	}
	return append(out, b.QueuePlacements()...)
}

// PlacementOf returns the placement of a replicated stream or queue.
func (b *Broker) PlacementOf(vhost, name string) (Placement, bool) {
	if def, ok := b.StreamPlacement(vhost, name); ok {
		return placementOfStream(def), true
	}
	if rec, ok := b.queueReg().placement(vhost, name); ok {
		return placementOfQueue(rec), true
	}
	return Placement{}, false
}

// PlacedHere returns the placements of the replicated streams and
// queues whose copies are open on this node.
func (b *Broker) PlacedHere() []Placement {
	var out []Placement
	for _, def := range b.StreamsHere() {
		out = append(out, placementOfStream(def))
	}
	for _, p := range b.QueuePlacements() {
		if _, ok := b.queueLog(p.VHost, p.Name); ok {
			out = append(out, p)
		}
	}
	return out
}

// ReplicatedLog returns this node's copy of a replicated stream's or
// queue's log, or ErrNotFound.
func (b *Broker) ReplicatedLog(vhost, name string) (*osiris.Stream, error) {
	if s, ok := b.queueLog(vhost, name); ok {
		return s, nil
	}
	return b.Stream(vhost, name)
}

// MoveLeader proposes leader as the leader of p's stream or queue with
// epoch (MoveStreamLeader, MoveQueueLeader).
func (b *Broker) MoveLeader(p Placement, leader string, epoch uint64) error {
	if p.Queue {
		return b.MoveQueueLeader(p.VHost, p.Name, leader, epoch)
	}
	return b.MoveStreamLeader(p.VHost, p.Name, leader, epoch)
}
