package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// nodeNames returns the names /api/nodes on n lists, running or not.
func (n *clusterNode) nodeNames(t *testing.T) []string {
	t.Helper()
	code, body := n.api(t, "GET", "/api/nodes", "")
	if code != 200 {
		t.Fatalf("%s: GET /api/nodes: %d %s", n.name, code, body)
	}
	var nodes []struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal([]byte(body), &nodes); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, x := range nodes {
		out = append(out, x.Name)
	}
	slices.Sort(out)
	return out
}

// A node whose disk is lost is forgotten (DELETE /api/nodes/n3, what
// warrenctl forget_cluster_node sends): refused while it runs, then,
// once it is down, the two nodes left list only each other, change the
// catalog, and confirm publishes to the quorum queue and the stream
// they share (both needed now: two of two members, so with one of them
// down nothing is confirmed nor changed), and n3 started again under
// its name with an empty directory is refused by both, saying why, and
// disturbs nothing. Then a replacement under a new name joins.
func TestClusterForget(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	nodes := startStreamCluster(t)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	_, ch := amqpChannel(t, n1)
	for name, typ := range map[string]string{"fq": "quorum", "fs": "stream"} {
		if _, err := ch.QueueDeclare(name, true, false, false, false, amqp091.Table{"x-queue-type": typ}); err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			waitFor(t, n.name+" to know "+name, 10*time.Second, func() bool {
				_, ok := n.queuePlacement(t, name)
				return ok
			})
		}
	}
	publishQueueConfirmed(t, n1, "fq", 0, 100)
	publishQueueConfirmed(t, n1, "fs", 0, 100)

	// A running node, or the node asked, is not forgotten.
	if code, body := n1.api(t, "DELETE", "/api/nodes/n3", ""); code != 400 || !strings.Contains(body, "must be stopped") {
		t.Fatalf("forgetting a running node: %d %s", code, body)
	}
	if code, body := n1.api(t, "DELETE", "/api/nodes/n1", ""); code != 400 {
		t.Fatalf("forgetting the node asked: %d %s", code, body)
	}

	n3.kill()
	if err := os.RemoveAll(n3.dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(n3.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "n1 to see n3 down", 15*time.Second, func() bool { return !n1.runningNodes(t)["n3"] })
	waitFor(t, "n3 forgotten", 30*time.Second, func() bool {
		code, body := n1.api(t, "DELETE", "/api/nodes/n3", "")
		if code != 204 && code != 503 {
			t.Fatalf("DELETE /api/nodes/n3: %d %s", code, body)
		}
		return code == 204
	})
	if code, _ := n1.api(t, "DELETE", "/api/nodes/n3", ""); code != 404 {
		t.Fatalf("forgetting n3 again: %d, want 404", code)
	}
	for _, n := range []*clusterNode{n1, n2} {
		waitFor(t, n.name+" to list two nodes", 10*time.Second, func() bool {
			return slices.Equal(n.nodeNames(t), []string{"n1", "n2"})
		})
		for _, name := range []string{"fq", "fs"} {
			waitFor(t, n.name+" to drop n3 from "+name, 10*time.Second, func() bool {
				p, ok := n.queuePlacement(t, name)
				return ok && slices.Equal(p.Members, []string{"n1", "n2"})
			})
		}
	}

	// The two left change the catalog and confirm publishes.
	if code, body := n2.api(t, "PUT", "/api/vhosts/after-forget", ""); code != 201 && code != 204 {
		t.Fatalf("a vhost made on n2 after the forget: %d %s", code, body)
	}
	publishQueueConfirmed(t, n1, "fq", 100, 200)
	publishQueueConfirmed(t, n1, "fs", 100, 200)
	checkRun(t, "the quorum queue", consumeQueue(t, n1, "fq", 200, true), 0)
	for i, m := range consumeAll(t, n2, "fs", 200) {
		if want := fmt.Sprintf("q-%04d", i); m != want {
			t.Fatalf("n2's stream: message %d = %q, want %q", i, m, want)
		}
	}

	// n3 again under its name, its data gone: refused by its peers,
	// with the reason on both sides, and nobody panics.
	n3.start(t)
	waitFor(t, "n3 to log that it was forgotten", 20*time.Second, func() bool {
		return strings.Contains(n3.stderr.String(), "forget_cluster_node")
	})
	waitFor(t, "n1 to log the refusal", 20*time.Second, func() bool {
		s := n1.stderr.String()
		return strings.Contains(s, "refused connection") && strings.Contains(s, "from=n3")
	})
	if code, body := n1.api(t, "PUT", "/api/vhosts/with-n3-back", ""); code != 201 && code != 204 {
		t.Fatalf("a vhost made on n1 with n3 back: %d %s", code, body)
	}
	if got := n1.nodeNames(t); !slices.Equal(got, []string{"n1", "n2"}) {
		t.Fatalf("n1 lists %v with n3 back, want n1, n2", got)
	}
	if code, _ := n3.api(t, "GET", "/api/vhosts/with-n3-back", ""); code == 200 {
		t.Fatal("the forgotten n3 got a catalog change")
	}
	for _, n := range nodes {
		if strings.Contains(n.stderr.String(), "panic") {
			t.Fatalf("%s panicked:\n%s", n.name, n.stderr.String())
		}
	}

	// Two members: both are needed. n2 down, n1 changes nothing.
	n2.kill()
	if code, body := n1.api(t, "PUT", "/api/vhosts/alone", ""); code != 503 {
		t.Fatalf("a change on n1 alone: %d %s, want 503", code, body)
	}
	n3.kill()

	// A replacement, n4, with an empty directory: n1 and n2 restart
	// with it in their peers (n3 stays listed, and forgotten), n4 starts
	// with -cluster-join, is added and catches up; a quorum queue
	// declared then has three members, and with n2 down again n1 and n4
	// change the catalog and confirm publishes.
	ports := freePorts(t, 2)
	f := strings.Fields(n1.flags)
	i := slices.Index(f, "-cluster-peers")
	oldPeers := f[i+1]
	newPeers := oldPeers + ",n4=" + ports[0]
	for _, n := range []*clusterNode{n2, n1} {
		n.flags = strings.Replace(n.flags, oldPeers, newPeers, 1)
		if n == n1 {
			n1.kill()
		}
		n.start(t)
	}
	n4 := &clusterNode{name: "n4", dir: t.TempDir()}
	n4.flags = strings.Join([]string{
		"-data-dir", n4.dir, "-node-name", "n4", "-cluster-peers", newPeers, "-cluster-join",
		"-cluster-command-timeout", "3s",
		"-amqp-listen", "127.0.0.1:0", "-http-listen", "127.0.0.1:0", "-prometheus-listen=",
		"-stream-listen", ports[1], "-stream-advertise", "127.0.0.1:",
	}, " ")
	n4.start(t)
	for _, n := range []*clusterNode{n1, n2, n4} {
		waitFor(t, n.name+" to list n1, n2, n4 running", 30*time.Second, func() bool {
			r := n.runningNodes(t)
			return len(r) == 3 && r["n1"] && r["n2"] && r["n4"]
		})
	}
	waitFor(t, "n4 to catch up with the catalog", 20*time.Second, func() bool {
		code, _ := n4.api(t, "GET", "/api/vhosts/with-n3-back", "")
		return code == 200
	})
	_, ch = amqpChannel(t, n1)
	if _, err := ch.QueueDeclare("jq", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "n4 to hold jq", 10*time.Second, func() bool {
		p, ok := n4.queuePlacement(t, "jq")
		return ok && slices.Equal(p.Members, []string{"n1", "n2", "n4"})
	})
	n2.kill()
	waitFor(t, "n1 to see n2 down", 15*time.Second, func() bool { return !n1.runningNodes(t)["n2"] })
	if code, body := n4.api(t, "PUT", "/api/vhosts/n2-down", ""); code != 201 && code != 204 {
		t.Fatalf("a change on n4 with n2 down: %d %s", code, body)
	}
	publishQueueConfirmed(t, n1, "jq", 0, 50)
	checkRun(t, "jq", consumeQueue(t, n1, "jq", 50, true), 0)
}
