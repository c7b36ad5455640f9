package main

import (
	"strings"
	"testing"
)

func TestClusterPeers(t *testing.T) {
	c := ClusterConfig{NodeName: "n2", Peers: " n1=127.0.0.1:25672, n2=127.0.0.1:25673,n3=[::1]:25674 "}
	ps, err := c.peers()
	if err != nil {
		t.Fatal(err)
	}
	want := []clusterPeer{{"n1", "127.0.0.1:25672"}, {"n2", "127.0.0.1:25673"}, {"n3", "[::1]:25674"}}
	if len(ps) != len(want) {
		t.Fatalf("peers %v", ps)
	}
	for i := range want {
		if ps[i] != want[i] {
			t.Errorf("peer %d = %v, want %v", i, ps[i], want[i])
		}
	}
	if got := c.listenAddr(ps); got != "127.0.0.1:25673" {
		t.Errorf("listen %q, want n2's peer address", got)
	}
	c.Listen = "0.0.0.0:25673"
	if got := c.listenAddr(ps); got != "0.0.0.0:25673" {
		t.Errorf("listen %q, want -cluster-listen's", got)
	}
	for _, tc := range []struct{ node, peers, want string }{
		{"n1", "n1=127.0.0.1:1,n1=127.0.0.1:2", "n1 is listed twice"},
		{"n1", "n1=127.0.0.1", `"127.0.0.1" is not host:port`},
		{"n1", "n1", `"n1" is not name=host:port`},
		{"n4", "n1=127.0.0.1:1,n2=127.0.0.1:2", `node name "n4" is not one of the cluster peers`},
		{"", "n1=127.0.0.1:1", "without a node name"},
		{"n1", ",", "none in"},
	} {
		_, err := ClusterConfig{NodeName: tc.node, Peers: tc.peers}.peers()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s in %q: %v, want %q", tc.node, tc.peers, err, tc.want)
		}
	}
}
