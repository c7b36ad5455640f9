package node

import (
	"context"
	"net"
	"slices"
	"time"

	"github.com/warren-mq/warren/cluster/nodenet"
)

// Joining a running cluster (the counterpart of Forget; RabbitMQ's
// join_cluster, run on the new node): a node started with Config.Join
// and an empty directory does not bootstrap the catalog's group from the
// peer list; it starts it empty and asks its peers, one after another
// over the stream lane (purposeJoin), to add it as a voter
// (raft.Host.AddMember), until its own copy of the group's configuration
// names it. The member that takes the request proposes the change; the
// leader then brings the new node up to date from its log or a
// snapshot. Every node must list the new one in its peers (nodenet's
// peers are fixed at start), so the others are restarted with the longer
// peer list first; a forgotten name stays refused.

// requestJoin asks the peers to add this node until it is a member.
func (n *Node) requestJoin(ctx context.Context) {
	defer n.wg.Done()
	self := n.ids[n.cfg.Name]
	for ctx.Err() == nil {
		if m, err := n.host.Members(CatalogGroup); err == nil && slices.Contains(m, self) {
			n.log.Info("cluster: joined the cluster")
			return
		}
		for _, peer := range n.net.Peers() {
			if n.askJoin(ctx, peer) {
				break
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// askJoin asks peer to add this node; true when it says it did.
func (n *Node) askJoin(ctx context.Context, peer string) bool {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	conn, err := n.net.Dial(ctx, peer, nodenet.LaneStream)
	if err != nil {
		return false
	}
	defer conn.Close()
	dl, _ := ctx.Deadline()
	conn.SetDeadline(dl)
	if _, err := conn.Write(appendStreamHello(nil, purposeJoin, "", "")); err != nil {
		return false
	}
	var ok [1]byte
	if _, err := conn.Read(ok[:]); err != nil || ok[0] != 1 {
		n.log.Debug("cluster: join not taken", "peer", peer, "err", err)
		return false
	}
	n.log.Info("cluster: added to the cluster", "by", peer)
	return true
}

// serveJoin adds from, which asked to join, to the catalog's group and
// answers 1 once the change is applied here, 0 otherwise. nodenet has
// checked that from is a peer, not forgotten, and knows the secret.
func (n *Node) serveJoin(ctx context.Context, from string, conn net.Conn) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res := byte(0)
	if err := n.host.AddMember(ctx, CatalogGroup, n.ids[from]); err != nil {
		n.log.Warn("cluster: node not added", "peer", from, "err", err)
	} else {
		n.log.Warn("cluster: node added to the cluster", "peer", from)
		res = 1
	}
	conn.Write([]byte{res})
}
