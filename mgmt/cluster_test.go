package mgmt

import (
	"sync"
	"testing"
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
