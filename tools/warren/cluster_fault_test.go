package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warren-mq/warren/internal/faultproxy"
)

// vhostNames returns the vhosts n's API lists, sorted (nil on error).
func (n *clusterNode) vhostNames(t *testing.T) []string {
	code, body := n.api(t, "GET", "/api/vhosts", "")
	if code != 200 {
		return nil
	}
	var vs []struct {
		Name string `json:"name"`
	}
	if json.Unmarshal([]byte(body), &vs) != nil {
		return nil
	}
	var out []string
	for _, v := range vs {
		out = append(out, v.Name)
	}
	slices.Sort(out)
	return out
}

// Three node processes whose links go through fault proxies: a node cut
// off from the others never applies a change (503) and the change never
// appears anywhere, while the majority goes on; a one-way partition does
// not split the catalog; after healing every node has the same vhosts.
func TestClusterCatalogPartitions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	listen := freePorts(t, 3) // the nodes' own node-to-node addresses
	proxy := func(target string) *faultproxy.Proxy {
		p, err := faultproxy.New("127.0.0.1:0", target)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	// The lower name dials: n1 reaches n2 and n3 through p12 and p13,
	// n2 reaches n3 through p23.
	p12, p13, p23 := proxy(listen[1]), proxy(listen[2]), proxy(listen[2])
	peers := []string{
		fmt.Sprintf("n1=%s,n2=%s,n3=%s", listen[0], p12.Addr(), p13.Addr()),
		fmt.Sprintf("n1=%s,n2=%s,n3=%s", listen[0], listen[1], p23.Addr()),
		fmt.Sprintf("n1=%s,n2=%s,n3=%s", listen[0], listen[1], listen[2]),
	}
	nodes := make([]*clusterNode, 3)
	for i := range nodes {
		n := &clusterNode{name: fmt.Sprintf("n%d", i+1), dir: t.TempDir()}
		n.flags = strings.Join([]string{
			"-data-dir", n.dir, "-node-name", n.name, "-cluster-peers", peers[i], "-cluster-listen", listen[i],
			"-cluster-command-timeout", "3s",
			"-amqp-listen", "127.0.0.1:0", "-http-listen", "127.0.0.1:0", "-stream-listen=", "-prometheus-listen=",
		}, " ")
		nodes[i] = n
		n.start(t)
	}
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	for _, n := range nodes {
		waitFor(t, n.name+" to see three nodes and the default user", 20*time.Second, func() bool {
			code, _ := n.api(t, "GET", "/api/whoami", "")
			return code == 200 && len(n.runningNodes(t)) == 3
		})
	}

	// n3 cut off from both.
	p13.Blackhole(faultproxy.Both)
	p23.Blackhole(faultproxy.Both)
	waitFor(t, "n3 to see itself alone", 15*time.Second, func() bool { return len(n3.runningNodes(t)) == 1 })
	waitFor(t, "n1 to see n3 down", 15*time.Second, func() bool { return !n1.runningNodes(t)["n3"] })
	if code, body := n3.api(t, "PUT", "/api/vhosts/minority", ""); code != 503 {
		t.Fatalf("PUT vhost on the cut-off node: %d %s, want 503", code, body)
	}
	waitFor(t, "the majority to take a change", 15*time.Second, func() bool {
		code, _ := n1.api(t, "PUT", "/api/vhosts/majority", "")
		return code == 201 || code == 204
	})

	p13.Heal()
	p23.Heal()
	waitFor(t, "n3 to catch up", 20*time.Second, func() bool { return slices.Contains(n3.vhostNames(t), "majority") })
	want := []string{"/", "majority"}
	for _, n := range nodes {
		waitFor(t, n.name+"'s vhosts", 10*time.Second, func() bool { return slices.Equal(n.vhostNames(t), want) })
	}

	// One way: n1's bytes to n2 are lost, n2's to n1 arrive. n3 reaches
	// both, whichever leads, so a change made there is applied. A change
	// made on n1 or n2 may not be: when the other one leads, its
	// forwarded proposal or the leader's answer is lost, and heartbeats
	// in the working direction keep the leader in place (raft does not
	// route around a one-way cut). Such a change may also be applied
	// later, since its proposal may have reached the leader. Whatever
	// happens, every node ends with the same catalog.
	p12.Blackhole(faultproxy.Upstream)
	waitFor(t, "n2 to lose n1", 15*time.Second, func() bool { return !n2.runningNodes(t)["n1"] })
	waitFor(t, "a change on n3 during the one-way partition", 20*time.Second, func() bool {
		code, _ := n3.api(t, "PUT", "/api/vhosts/oneway-3", "")
		return code == 201 || code == 204
	})
	want = append(want, "oneway-3")
	code1, body1 := n1.api(t, "PUT", "/api/vhosts/oneway-1", "")
	code2, body2 := n2.api(t, "PUT", "/api/vhosts/oneway-2", "")
	for _, c := range []struct {
		code int
		body string
	}{{code1, body1}, {code2, body2}} {
		if c.code != 201 && c.code != 503 {
			t.Fatalf("PUT during the one-way partition: %d %s, want 201 or 503", c.code, c.body)
		}
	}
	p12.Heal()
	waitFor(t, "every node to agree after the one-way partition", 20*time.Second, func() bool {
		a, b, c := n1.vhostNames(t), n2.vhostNames(t), n3.vhostNames(t)
		if !slices.Equal(a, b) || !slices.Equal(a, c) {
			return false
		}
		rest := slices.DeleteFunc(slices.Clone(a), func(v string) bool { return v == "oneway-1" || v == "oneway-2" })
		slices.Sort(want)
		return slices.Equal(rest, want) &&
			(code1 != 201 || slices.Contains(a, "oneway-1")) && (code2 != 201 || slices.Contains(a, "oneway-2"))
	})
	if got := n1.vhostNames(t); slices.Contains(got, "minority") {
		t.Errorf("the cut-off node's change appeared: %v", got)
	}
}
