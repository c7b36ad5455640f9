package queues

import (
	"encoding/json"
	"testing"
)

// Ensure a fresh node never takes the cluster's catalog, met in the
// middle of applying (vhosts there, no applied index stored yet), for a
// single node's to seed the cluster with: that seed would replace the
// cluster's catalog by half of it (found as a startup flake of
// cluster/node's tests: vhost "/" without its default user).
func TestFreshNodeDoesNotSeed(t *testing.T) {
	bs, l := openCluster(t, 3) // the ordered log stores no applied index
	for i, b := range bs {
		if b.seedWanted {
			t.Fatalf("node %d: a fresh node wants to seed", i+1)
		}
		must(t, b.BootstrapCluster()) // again, as cluster/node retries
		if _, err := b.GetUser("guest"); err != nil {
			t.Fatalf("node %d: %v", i+1, err)
		}
	}
	for _, data := range l.log {
		var env envelope
		must(t, json.Unmarshal(data, &env))
		if env.Op == "catalog.seed" {
			t.Fatalf("a fresh node proposed a seed: %s", data)
		}
	}
}
