package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// A single node's data directory becomes the first node of a cluster:
// the other two nodes, fresh, take its users, vhosts, permissions and
// exchanges; its stream becomes a replicated stream it leads, whose
// messages every node's copy then holds; its classic queue stays its
// own, messages included.
func TestClusterFromSingleNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts broker processes")
	}
	ports := freePorts(t, 3)
	streamPorts := freePorts(t, 3)
	single := &clusterNode{name: "single", dir: t.TempDir()}
	single.flags = strings.Join([]string{"-data-dir", single.dir, "-amqp-listen", "127.0.0.1:0",
		"-http-listen", "127.0.0.1:0", "-prometheus-listen=", "-stream-listen", streamPorts[0], "-stream-advertise", "127.0.0.1:"}, " ")
	single.start(t)
	for _, c := range []struct{ method, path, body string }{
		{"PUT", "/api/users/alice", `{"password":"secret","tags":"administrator"}`},
		{"PUT", "/api/vhosts/shop", ""},
		{"PUT", "/api/permissions/shop/alice", `{"configure":".*","write":".*","read":".*"}`},
		{"PUT", "/api/exchanges/shop/orders", `{"type":"topic","durable":true}`},
	} {
		if code, body := single.api(t, c.method, c.path, c.body); code/100 != 2 {
			t.Fatalf("%s %s: %d %s", c.method, c.path, code, body)
		}
	}
	_, ch := amqpChannel(t, single)
	for _, q := range []struct{ name, typ string }{{"hist", "stream"}, {"work", "classic"}} {
		if _, err := ch.QueueDeclare(q.name, true, false, false, false, amqp091.Table{"x-queue-type": q.typ}); err != nil {
			t.Fatal(err)
		}
	}
	publishQueueConfirmed(t, single, "hist", 0, 100)
	publishQueueConfirmed(t, single, "work", 0, 10)
	single.kill()

	var peers []string
	for i, p := range ports {
		peers = append(peers, fmt.Sprintf("n%d=%s", i+1, p))
	}
	nodes := make([]*clusterNode, 3)
	for i := range nodes {
		n := &clusterNode{name: fmt.Sprintf("n%d", i+1), dir: t.TempDir()}
		if i == 0 {
			n.dir = single.dir // the single node's data
		}
		n.flags = strings.Join([]string{
			"-data-dir", n.dir, "-node-name", n.name, "-cluster-peers", strings.Join(peers, ","),
			"-cluster-command-timeout", "3s",
			"-amqp-listen", "127.0.0.1:0", "-http-listen", "127.0.0.1:0", "-prometheus-listen=",
			"-stream-listen", streamPorts[i], "-stream-advertise", "127.0.0.1:",
		}, " ")
		nodes[i] = n
		n.start(t)
	}
	for _, n := range nodes {
		waitFor(t, n.name+" to have the single node's catalog", 30*time.Second, func() bool {
			code, body := n.api(t, "GET", "/api/exchanges/shop/orders", "")
			if code != 200 {
				return false
			}
			var x struct{ Type string }
			json.Unmarshal([]byte(body), &x)
			code, _ = n.api(t, "GET", "/api/permissions/shop/alice", "")
			return x.Type == "topic" && code == 200
		})
		waitFor(t, n.name+" to know the stream led by n1", 30*time.Second, func() bool {
			p, ok := n.queuePlacement(t, "hist")
			return ok && p.Leader == "n1" && len(p.Members) == 3
		})
	}
	for _, n := range nodes {
		got := consumeAll(t, n, "hist", 100)
		for i, m := range got {
			if want := fmt.Sprintf("q-%04d", i); m != want {
				t.Fatalf("%s: message %d = %q, want %q", n.name, i, m, want)
			}
		}
	}
	// Alice logs in anywhere; the classic queue is still n1's, with its
	// messages.
	conn, err := amqp091.Dial("amqp://alice:secret@" + nodes[2].amqp + "/shop")
	if err != nil {
		t.Fatalf("alice on n3: %v", err)
	}
	conn.Close()
	checkRun(t, "n1's classic queue", consumeQueue(t, nodes[0], "work", 10, true), 0)
	// And the cluster takes changes.
	if code, body := nodes[1].api(t, "PUT", "/api/vhosts/after", ""); code/100 != 2 {
		t.Fatalf("a vhost after the seed: %d %s", code, body)
	}
}
