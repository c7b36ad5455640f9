package mgmt

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/warren-mq/warren/queues"
)

// The cluster's other nodes are in /api/nodes (after this one, by
// name), in /api/nodes/{node} and in each vhost's cluster_state, running
// or not as the node sees them.
func TestNodesOfACluster(t *testing.T) {
	var mu sync.Mutex
	running := map[string]bool{"n3": true, "n2": true}
	tb := startBrokerWith(t, brokerOpts{peers: func() []Peer {
		mu.Lock()
		defer mu.Unlock()
		return []Peer{{"n3", running["n3"]}, {"n2", running["n2"]}}
	}})
	nodes := tb.guest("GET", "/api/nodes", nil).list(t)
	if len(nodes) != 3 {
		t.Fatalf("%d nodes, want 3: %v", len(nodes), nodes)
	}
	for i, want := range []string{"warren@test", "n2", "n3"} {
		if nodes[i]["name"] != want || nodes[i]["running"] != true {
			t.Errorf("node %d: %v, want %s running", i, nodes[i], want)
		}
	}
	mu.Lock()
	running["n3"] = false
	mu.Unlock()
	n3 := tb.guest("GET", "/api/nodes/n3", nil).obj(t)
	if n3["name"] != "n3" || n3["running"] != false || n3["type"] != "disc" {
		t.Errorf("/api/nodes/n3 = %v, want n3 not running", n3)
	}
	want(t, tb.guest("GET", "/api/nodes/n4", nil), 404)
	v := tb.guest("GET", "/api/vhosts/%2F", nil).obj(t)
	cs, _ := v["cluster_state"].(map[string]any)
	if len(cs) != 3 || cs["warren@test"] != "running" || cs["n2"] != "running" || cs["n3"] != "nodedown" {
		t.Errorf("cluster_state = %v", v["cluster_state"])
	}
}

// DELETE /api/nodes/{node} (Warren's forget_cluster_node) is for
// administrators; it answers 204 once the node is forgotten, and then
// /api/nodes no longer lists it; a node not in the cluster is a 404, a
// running one a 400 with the reason, a change without a quorum a 503.
// A single node has nothing to forget.
func TestForgetNode(t *testing.T) {
	var mu sync.Mutex
	nodes := map[string]bool{"n2": true, "n3": false} // name → running
	tb := startBrokerWith(t, brokerOpts{
		peers: func() []Peer {
			mu.Lock()
			defer mu.Unlock()
			var out []Peer
			for name, running := range nodes {
				out = append(out, Peer{name, running})
			}
			return out
		},
		forget: func(_ context.Context, node string) error {
			mu.Lock()
			defer mu.Unlock()
			running, ok := nodes[node]
			switch {
			case node == "quorumless":
				return fmt.Errorf("no majority: %w", queues.ErrNotApplied)
			case !ok:
				return fmt.Errorf("%s: %w", node, queues.ErrNotFound)
			case running:
				return fmt.Errorf("%s is running", node)
			}
			delete(nodes, node)
			return nil
		},
	})
	want(t, tb.guest("PUT", "/api/users/mon", map[string]any{"password": "pw", "tags": "monitoring"}), 201)
	want(t, tb.call("DELETE", "/api/nodes/n3", "mon", "pw", nil), 401, "not_authorised", "Not administrator user")
	want(t, tb.guest("DELETE", "/api/nodes/n2", nil), 400, "bad_request", "n2 is running")
	want(t, tb.guest("DELETE", "/api/nodes/n9", nil), 404)
	want(t, tb.guest("DELETE", "/api/nodes/quorumless", nil), 503)
	want(t, tb.guest("DELETE", "/api/nodes/n3", nil), 204)
	list := tb.guest("GET", "/api/nodes", nil).list(t)
	if len(list) != 2 || list[1]["name"] != "n2" {
		t.Fatalf("/api/nodes after forgetting n3: %v", list)
	}

	single := startBroker(t)
	want(t, single.guest("DELETE", "/api/nodes/n3", nil), 400)
}
