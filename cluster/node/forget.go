package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/warren-mq/warren/cluster/nodenet"
	"github.com/warren-mq/warren/cluster/raft"
	"github.com/warren-mq/warren/queues"
)

// Forgetting a node (rabbitmqctl forget_cluster_node): a node whose
// data directory was lost cannot rejoin under its name (its peers
// remember what it acknowledged, and etcd raft panics on a commit index
// beyond its empty log), so it is removed for good:
//
//  1. the catalog command node.forget (queues.Broker.ForgetNode): every
//     node records it, drops it from the streams' and quorum queues'
//     members, and its nodenet stops dialing it and refuses its
//     handshakes (SetOnForget);
//  2. the catalog raft group's configuration change removing it
//     (raft.Host.RemoveMember), so majorities are counted among the
//     nodes left: with three nodes, the two left must both be up.
//
// Both steps are idempotent, so Forget retried after a failure finishes
// what the first call began. The static peer list only bootstraps a new
// cluster: once the group has a stored configuration, that is its
// membership, and the catalog's forgotten nodes are left out of nodenet
// at Start, whatever the peer list says.

// Errors of Forget.
var (
	// ErrUnknownNode is a name that is not a node of the cluster (never
	// was, or was forgotten already); it is a queues.ErrNotFound.
	ErrUnknownNode = fmt.Errorf("cluster: not a node of the cluster: %w", queues.ErrNotFound)
	// ErrNodeRunning is Forget of a node this node reaches: RabbitMQ
	// refuses to forget a running node too; stop it first.
	ErrNodeRunning = errors.New("cluster: node is running")
	// ErrForgetSelf is Forget of the node it is called on.
	ErrForgetSelf = errors.New("cluster: a node cannot forget itself")
)

// Forget removes the node named name from the cluster for good: it must
// be another node than this one, and down. It returns once both steps
// are applied on this node; a context error or queues.ErrNotApplied
// (no majority) leave it half done, to be retried.
func (n *Node) Forget(ctx context.Context, name string) error {
	id, known := n.ids[name]
	switch {
	case name == n.cfg.Name:
		return fmt.Errorf("%w: %s", ErrForgetSelf, name)
	case !known:
		return fmt.Errorf("%w: %s", ErrUnknownNode, name)
	}
	members, err := n.host.Members(CatalogGroup)
	if err != nil {
		return err
	}
	forgotten := n.cfg.Broker.NodeForgotten(name)
	if forgotten && !slices.Contains(members, id) {
		return fmt.Errorf("%w: %s was forgotten already", ErrUnknownNode, name)
	}
	if !forgotten {
		n.mu.Lock()
		up := n.reachable[name]
		n.mu.Unlock()
		if up {
			return fmt.Errorf("%w: Warren on node %s must be stopped before it can be removed (%s reaches it)", ErrNodeRunning, name, n.cfg.Name)
		}
		n.log.Warn("cluster: forgetting node", "peer", name)
		if err := n.cfg.Broker.ForgetNode(name); err != nil {
			return fmt.Errorf("cluster: forget %s: record it in the catalog: %w", name, err)
		}
	}
	for {
		// A change raft drops (another pending, a leader change) is
		// retried; one applied meanwhile makes the next a no-op.
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := n.host.RemoveMember(actx, CatalogGroup, id)
		cancel()
		if err == nil {
			n.log.Warn("cluster: node forgotten", "peer", name)
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("cluster: forget %s: remove it from the catalog's raft group: %w: %w", name, queues.ErrNotApplied, err)
		}
		if !errors.Is(err, raft.ErrProposalDropped) && !errors.Is(err, raft.ErrProposalUnknown) && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("cluster: forget %s: remove it from the catalog's raft group: %w", name, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// nodeForgotten is the broker's hook for an applied node.forget. It runs
// on the raft driver: nodenet's Forget only closes a link.
func (n *Node) nodeForgotten(name string) {
	if name == n.cfg.Name {
		n.log.Error("cluster: this node was forgotten by the cluster (forget_cluster_node); it cannot take part in it any more")
		return
	}
	if err := n.net.Forget(name); err != nil {
		n.log.Warn("cluster: forget peer", "peer", name, "err", err)
	}
}

// checkNotForgotten dials the peers, one at a time, until one takes the
// handshake or one refuses it because the cluster forgot this node: then
// it says so in the log, which is all a node forgotten can learn (its
// peers no longer dial it nor send it anything). The connection asks for
// a stream's tail with no name, which a peer answers with nothing.
func (n *Node) checkNotForgotten(ctx context.Context) {
	defer n.wg.Done()
	for ctx.Err() == nil {
		for _, peer := range n.net.Peers() {
			dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			conn, err := n.net.Dial(dctx, peer, nodenet.LaneStream)
			cancel()
			if err == nil {
				conn.Write(appendStreamHello(nil, purposeTail, "", ""))
				conn.Close()
				return
			}
			if errors.Is(err, nodenet.ErrForgotten) {
				n.log.Error("cluster: this node's peers refuse it: it was removed from the cluster (forget_cluster_node) "+
					"and cannot rejoin under the name "+n.cfg.Name+"; start it with a new name and an empty data directory",
					"peer", peer, "err", err)
				return
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}
