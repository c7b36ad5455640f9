// Package node runs a Warren node of a cluster (docs/design-cluster.md):
// the node-to-node network (cluster/nodenet), the raft host
// (cluster/raft) on it, and the catalog's raft group, whose log carries
// the broker's catalog commands (queues.Replicator) to every node.
//
// Node ids: raft names nodes by number. A node's id is the xxhash of its
// name (never 0), the same on every node without any exchange, and fixed
// for the life of the name.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/warren-mq/warren/cluster/nodenet"
	"github.com/warren-mq/warren/cluster/raft"
	"github.com/warren-mq/warren/queues"
)

// CatalogGroup is the raft group of the catalog.
const CatalogGroup = 1

// Config configures a node.
type Config struct {
	Name    string            // this node's name, one of Peers
	Cluster string            // the cluster's name (default "warren"): nodes of others are refused
	Peers   map[string]string // every node's name → node-to-node address
	Secret  string            // shared secret; empty on every node or the same
	// Listen is the node-to-node listen address (default Peers[Name]);
	// Listener, when set, is used instead (tests).
	Listen   string
	Listener net.Listener
	Dir      string         // the raft host's pebble directory
	Broker   *queues.Broker // opened with Options.Clustered
	Logger   *slog.Logger
	// Tick is raft's tick (default 100 ms; an election takes 10 ticks);
	// Timeout the silence after which a peer is unreachable (default 2 s).
	Tick, Timeout time.Duration
	// CommandTimeout bounds how long a catalog change waits to be
	// applied (default 30 s).
	CommandTimeout time.Duration
	// SnapshotEntries and CatchUpEntries are raft.Config's (defaults
	// 10,000 and 1,000), QueueFrames nodenet.Config's (frames queued for
	// a peer, default 4,096): tests lower them to exercise snapshots.
	SnapshotEntries, CatchUpEntries uint64
	QueueFrames                     int
	// Join makes a node with an empty directory join a running cluster
	// (join.go) instead of bootstrapping a new one from Peers; every
	// node must list it in its Peers. Ignored once the node has state.
	Join bool
}

// Node is a running cluster node.
type Node struct {
	cfg     Config
	log     *slog.Logger
	net     *nodenet.Net
	host    *raft.Host
	ids     map[string]uint64
	names   map[uint64]string
	catalog *catalogSM

	mu        sync.Mutex
	reachable map[string]bool

	ctx       context.Context
	cancel    context.CancelFunc
	done      chan struct{}
	wg        sync.WaitGroup // stream replica pulls (streams.go)
	stopWatch func()
	proxy     *proxy // clients' use of other nodes' queues (proxy.go)
}

// NodeID is the raft id of the node named name.
func NodeID(name string) uint64 {
	if id := xxhash.Sum64String(name); id != 0 {
		return id
	}
	return 1
}

// Start joins the cluster: it listens for and dials the peers (but the
// ones the catalog says were forgotten), starts the catalog's group and
// makes cfg.Broker propose its catalog changes there. The peers
// bootstrap the group's membership in a new cluster only; after that it
// is the group's stored configuration (Forget changes it). Once the group has a leader, the default identity is proposed
// (it is created once, in an empty catalog).
func Start(cfg Config) (*Node, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Cluster == "" {
		cfg.Cluster = "warren"
	}
	if _, ok := cfg.Peers[cfg.Name]; !ok {
		return nil, fmt.Errorf("cluster: node %q is not one of the peers", cfg.Name)
	}
	n := &Node{cfg: cfg, log: cfg.Logger.With("node", cfg.Name), ids: map[string]uint64{}, names: map[uint64]string{},
		reachable: map[string]bool{}, done: make(chan struct{})}
	for name := range cfg.Peers {
		id := NodeID(name)
		if other, dup := n.names[id]; dup {
			return nil, fmt.Errorf("cluster: nodes %q and %q have one id; rename one", name, other)
		}
		n.ids[name], n.names[id] = id, name
	}
	var err error
	n.net, err = nodenet.New(nodenet.Config{
		Cluster: cfg.Cluster, Name: cfg.Name, Peers: cfg.Peers, Secret: cfg.Secret,
		Listen: cfg.Listen, Listener: cfg.Listener, Timeout: cfg.Timeout, Logger: cfg.Logger, QueueFrames: cfg.QueueFrames,
		OnReachable:   func(p string) { n.setReachable(p, true) },
		OnUnreachable: func(p string) { n.setReachable(p, false) },
	})
	if err != nil {
		return nil, err
	}
	n.host, err = raft.Open(raft.Config{NodeID: n.ids[cfg.Name], Dir: cfg.Dir, Transport: n, Logger: n.log, TickInterval: cfg.Tick,
		SnapshotEntries: cfg.SnapshotEntries, CatchUpEntries: cfg.CatchUpEntries})
	if err != nil {
		n.net.Close()
		return nil, err
	}
	n.net.Handle(nodenet.LaneRaft, n.receive)
	// The catalog's forgotten nodes are out whatever the peer list says.
	for _, name := range cfg.Broker.ForgottenNodes() {
		if name != cfg.Name {
			n.net.Forget(name)
		}
	}
	cfg.Broker.SetOnForget(n.nodeForgotten)
	if err := n.net.Start(); err != nil {
		n.host.Close()
		return nil, err
	}
	cfg.Broker.SetReplicator(n, cfg.Name, cfg.CommandTimeout)
	names := make([]string, 0, len(cfg.Peers))
	for name := range cfg.Peers {
		names = append(names, name)
	}
	cfg.Broker.SetClusterNodes(names)
	cfg.Broker.SetNodeUp(func(node string) bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.reachable[node]
	})
	var voters []uint64 // none: a joining node waits to be added
	if !cfg.Join {
		for _, id := range n.ids {
			voters = append(voters, id)
		}
		slices.Sort(voters)
	}
	n.catalog = &catalogSM{b: cfg.Broker, log: n.log}
	if err := n.host.StartGroup(CatalogGroup, voters, n.catalog); err != nil {
		n.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.ctx, n.cancel = ctx, cancel
	n.startStreams(ctx)
	n.proxy = newProxy(n)
	n.net.HandleConn(nodenet.LaneProxy, n.serveProxy)
	cfg.Broker.SetProxy(n.proxy)
	n.wg.Add(2)
	go n.coordinate(ctx)
	go n.checkNotForgotten(ctx)
	if cfg.Join {
		n.wg.Add(1)
		go n.requestJoin(ctx)
	}
	go n.bootstrap(ctx)
	return n, nil
}

// bootstrap proposes the default identity until one proposal is applied.
func (n *Node) bootstrap(ctx context.Context) {
	defer close(n.done)
	wait := n.cfg.Tick
	if wait == 0 {
		wait = 100 * time.Millisecond
	}
	for {
		err := n.cfg.Broker.BootstrapCluster()
		if err == nil {
			return
		}
		n.log.Debug("cluster: bootstrap of the catalog not applied yet", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// Replicate proposes a catalog command (queues.Replicator).
func (n *Node) Replicate(ctx context.Context, data []byte) error {
	_, err := n.host.Propose(ctx, CatalogGroup, data)
	return err
}

// Send carries raft messages to node to (raft.Transport).
func (n *Node) Send(to uint64, msgs []raft.Envelope) {
	name, ok := n.names[to]
	if !ok {
		return
	}
	payload, err := raft.AppendEnvelopes(nil, msgs)
	if err != nil {
		n.log.Error("cluster: encode raft messages", "to", name, "err", err)
		return
	}
	if err := n.net.Send(name, nodenet.LaneRaft, payload); err != nil {
		n.log.Debug("cluster: raft messages not sent", "to", name, "err", err)
	}
}

func (n *Node) receive(from string, payload []byte) {
	id, ok := n.ids[from]
	if !ok {
		return
	}
	envs, err := raft.DecodeEnvelopes(payload)
	if err != nil {
		n.log.Warn("cluster: bad raft messages", "from", from, "err", err)
		return
	}
	n.host.Receive(id, envs)
}

func (n *Node) setReachable(peer string, up bool) {
	n.mu.Lock()
	n.reachable[peer] = up
	n.mu.Unlock()
	if up {
		n.log.Info("cluster: peer reachable", "peer", peer)
		return
	}
	n.log.Warn("cluster: peer unreachable", "peer", peer)
	if id, ok := n.ids[peer]; ok {
		n.host.ReportUnreachable(id)
	}
}

// Peer is another node as this one sees it.
type Peer struct {
	Name    string
	Running bool // reachable
}

// Peers returns the other nodes, by name, without those forgotten.
func (n *Node) Peers() []Peer {
	names := n.net.Peers()
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []Peer
	for _, name := range names {
		out = append(out, Peer{name, n.reachable[name]})
	}
	slices.SortFunc(out, func(a, b Peer) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return out
}

// Addr is the node-to-node listen address.
func (n *Node) Addr() net.Addr { return n.net.Addr() }

// CatalogLeader returns the name of the catalog group's leader as this
// node knows it ("" when none).
func (n *Node) CatalogLeader() string { return n.names[n.host.Leader(CatalogGroup)] }

// Close leaves the cluster: the broker's catalog changes fail from then.
func (n *Node) Close() error {
	if n.cancel != nil {
		n.cancel()
		<-n.done
	}
	if n.stopWatch != nil {
		n.stopWatch()
	}
	if n.proxy != nil {
		n.cfg.Broker.SetProxy(nil)
		n.proxy.close()
	}
	err := errors.Join(n.host.Close(), n.net.Close())
	n.wg.Wait()
	return err
}

// catalogSM applies the catalog group's log to the broker.
type catalogSM struct {
	b        *queues.Broker
	log      *slog.Logger
	restored atomic.Int64 // snapshots restored (tests)
}

func (s *catalogSM) Apply(entries []raft.Entry) error {
	if len(entries) == 0 {
		return nil
	}
	for _, e := range entries {
		if err := s.b.ApplyCommand(e.Data); err != nil {
			// Every node reads the same bytes and skips them alike.
			s.log.Error("cluster: catalog entry skipped", "index", e.Index, "err", err)
		}
	}
	return s.b.SetCatalogApplied(entries[len(entries)-1].Index)
}

func (s *catalogSM) Snapshot() ([]byte, error) { return s.b.CatalogSnapshot() }

func (s *catalogSM) Restore(data []byte) error {
	s.restored.Add(1)
	s.log.Info("cluster: catalog restored from a snapshot", "bytes", len(data))
	return s.b.RestoreCatalog(data)
}

func (s *catalogSM) Applied() uint64 {
	i, err := s.b.CatalogApplied()
	if err != nil {
		s.log.Error("cluster: catalog applied index", "err", err)
	}
	return i
}
