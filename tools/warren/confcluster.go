package main

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"time"
)

// ClusterConfig makes the node one of a cluster (docs/design-cluster.md):
// -node-name, -cluster-listen, -cluster-peers, -cluster-secret,
// -cluster-name, -cluster-command-timeout, -cluster-join, or
// warren.node_name, warren.cluster.listen, warren.cluster.peers,
// warren.cluster.secret, warren.cluster.name,
// warren.cluster.command_timeout and warren.cluster.join in the file. Without peers the node runs alone,
// as before.
type ClusterConfig struct {
	// NodeName is this node's name, one of Peers'.
	NodeName string
	// Listen is the node-to-node listen address; empty: this node's
	// address in Peers.
	Listen string
	// Peers is every node of the cluster, this one included, as
	// "name=host:port,..." (the same list on every node).
	Peers string
	// Secret, when set, must be the same on every node: a node proves
	// it knows it before it is let in (like Erlang's cookie).
	Secret string
	// Name is the cluster's name (default "warren"): a node of another
	// cluster is refused.
	Name string
	// CommandTimeout bounds how long a catalog change waits to be
	// applied by the cluster (default 30 s).
	CommandTimeout time.Duration
	// Join makes a node with an empty data directory join a running
	// cluster (every node lists it in Peers) instead of forming a new
	// one; ignored once the node has joined.
	Join bool
}

// clusterPeer is one entry of ClusterConfig.Peers.
type clusterPeer struct{ name, addr string }

// enabled reports whether the node runs in a cluster.
func (c ClusterConfig) enabled() bool { return c.Peers != "" }

// peers parses and checks Peers against NodeName: names are unique and
// non-empty, addresses host:port, and this node is one of them.
func (c ClusterConfig) peers() ([]clusterPeer, error) {
	var out []clusterPeer
	for _, item := range strings.Split(c.Peers, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, addr, ok := strings.Cut(item, "=")
		name, addr = strings.TrimSpace(name), strings.TrimSpace(addr)
		if !ok || name == "" || addr == "" {
			return nil, fmt.Errorf("cluster peers: %q is not name=host:port", item)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("cluster peers: %s: %q is not host:port", name, addr)
		}
		if slices.ContainsFunc(out, func(p clusterPeer) bool { return p.name == name }) {
			return nil, fmt.Errorf("cluster peers: %s is listed twice", name)
		}
		out = append(out, clusterPeer{name, addr})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("cluster peers: none in %q", c.Peers)
	}
	if c.NodeName == "" {
		return nil, fmt.Errorf("cluster peers given without a node name (-node-name, warren.node_name)")
	}
	if !slices.ContainsFunc(out, func(p clusterPeer) bool { return p.name == c.NodeName }) {
		return nil, fmt.Errorf("node name %q is not one of the cluster peers %q", c.NodeName, c.Peers)
	}
	return out, nil
}

// listenAddr is the node-to-node listen address: Listen, or this node's
// peer address.
func (c ClusterConfig) listenAddr(peers []clusterPeer) string {
	if c.Listen != "" {
		return c.Listen
	}
	for _, p := range peers {
		if p.name == c.NodeName {
			return p.addr
		}
	}
	return ""
}
