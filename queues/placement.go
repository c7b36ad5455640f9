package queues

import (
	"cmp"
	"errors"
	"slices"
	"strconv"
)

// Where a new replicated stream or quorum queue goes (docs/design-cluster.md):
// its members are x-initial-cluster-size (streams) or
// x-quorum-initial-group-size (quorum queues) of the cluster's nodes,
// every node by default or when the size exceeds the node count, as
// RabbitMQ's select_stream_nodes and quorum queue placement do. The
// proposer decides and puts the members in the command, so the choice is
// made once: the leader first (the declaring node, RabbitMQ's
// client-local leader locator, unless the locator asks for balance), then
// the nodes that are members of the fewest streams (or quorum queues) so
// far, ties by name.

// errNoClusterNodes is a cluster broker that was not told its nodes.
var errNoClusterNodes = errors.New("queues: cluster nodes unknown (SetClusterNodes)")

// placementLoad counts, per node, the replicated streams (or quorum
// queues: queue) it is a member of and the ones it leads.
func (b *Broker) placementLoad(queue bool) (members, leaders map[string]int) {
	members, leaders = map[string]int{}, map[string]int{}
	for _, p := range b.Placements() {
		if p.Queue != queue {
			continue
		}
		for _, m := range p.Members {
			members[m]++
		}
		leaders[p.Leader]++
	}
	return members, leaders
}

// place chooses the members and the leader of a new replicated stream (or
// quorum queue: queue) of size members (0: every node). balanced puts
// the leader on the node leading the fewest of its kind (ties: this node,
// then by name) rather than on this node. The members come back sorted.
func (b *Broker) place(queue bool, size int, balanced bool) (members []string, leader string, err error) {
	b.cstreams.mu.Lock()
	nodes := slices.Clone(b.cstreams.nodes)
	b.cstreams.mu.Unlock()
	if len(nodes) == 0 {
		return nil, "", errNoClusterNodes
	}
	load, leads := b.placementLoad(queue)
	self := b.repl.node
	leader = self
	if balanced || !slices.Contains(nodes, self) {
		leader = slices.MinFunc(nodes, func(x, y string) int {
			return cmp.Or(cmp.Compare(leads[x], leads[y]), boolFirst(x == self, y == self), cmp.Compare(x, y))
		})
	}
	if size <= 0 || size >= len(nodes) {
		return nodes, leader, nil
	}
	rest := slices.DeleteFunc(slices.Clone(nodes), func(n string) bool { return n == leader })
	slices.SortStableFunc(rest, func(x, y string) int { return cmp.Compare(load[x], load[y]) }) // nodes are sorted by name
	members = append(rest[:size-1:size-1], leader)
	slices.Sort(members)
	return members, leader, nil
}

// boolFirst orders true before false.
func boolFirst(x, y bool) int {
	switch {
	case x == y:
		return 0
	case x:
		return -1
	}
	return 1
}

// balancedLocator reports whether a queue-leader-locator value asks for
// the leader on the least loaded node rather than the declaring one
// (RabbitMQ's balanced, and its older least-leaders and min-masters;
// random is taken as balanced, which spreads leaders as well).
func balancedLocator(v string) bool {
	switch v {
	case "balanced", "least-leaders", "min-masters", "random":
		return true
	}
	return false
}

// streamPlacementArgs reads a stream's initial-cluster-size (0: every
// node; CreateStream validated it) and whether its leader locator is
// balanced.
func streamPlacementArgs(args map[string]string) (size int, balanced bool) {
	size, _ = strconv.Atoi(args["initial-cluster-size"])
	return size, balancedLocator(args["queue-leader-locator"])
}

// quorumPlacementArgs reads a quorum queue's x-quorum-initial-group-size
// (0: every node; the declare validated it) and x-queue-leader-locator.
func quorumPlacementArgs(args map[string]any) (size int, balanced bool) {
	if n, ok := argInt(args["x-quorum-initial-group-size"]); ok && n > 0 {
		size = int(min(n, 1<<20))
	}
	loc, _ := args["x-queue-leader-locator"].(string)
	return size, balancedLocator(loc)
}
