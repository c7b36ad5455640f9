package main

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
	"github.com/warren-mq/warren/internal/faultproxy"
	"github.com/warren-mq/warren/internal/histcheck"
)

// proxiedCluster is three node processes serving AMQP and the stream
// protocol whose every node-to-node connection runs through a fault
// proxy: via[i][j] is the proxy node i dials node j through (nodenet's
// link, a replica's pull, the coordinator's tail query), so a test can
// cut any node off in either direction.
type proxiedCluster struct {
	nodes []*clusterNode
	via   [3][3]*faultproxy.Proxy
}

// startProxiedCluster starts the three nodes and waits until each sees
// the other two.
func startProxiedCluster(t *testing.T) *proxiedCluster {
	t.Helper()
	listen := freePorts(t, 3)      // the nodes' own node-to-node addresses
	streamPorts := freePorts(t, 3) // fixed: a restarted node keeps its advertised address
	c := &proxiedCluster{}
	for i := range 3 {
		for j := range 3 {
			if i == j {
				continue
			}
			p, err := faultproxy.New("127.0.0.1:0", listen[j])
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			c.via[i][j] = p
		}
	}
	for i := range 3 {
		var peers []string
		for j := range 3 {
			addr := listen[j]
			if i != j {
				addr = c.via[i][j].Addr()
			}
			peers = append(peers, fmt.Sprintf("n%d=%s", j+1, addr))
		}
		n := &clusterNode{name: fmt.Sprintf("n%d", i+1), dir: t.TempDir()}
		n.flags = strings.Join([]string{
			"-data-dir", n.dir, "-node-name", n.name, "-cluster-peers", strings.Join(peers, ","),
			"-cluster-listen", listen[i], "-cluster-command-timeout", "3s",
			"-amqp-listen", "127.0.0.1:0", "-http-listen", "127.0.0.1:0", "-prometheus-listen=",
			"-stream-listen", streamPorts[i], "-stream-advertise", "127.0.0.1:",
		}, " ")
		c.nodes = append(c.nodes, n)
		n.start(t)
	}
	for _, n := range c.nodes {
		waitFor(t, n.name+" to see three nodes", 20*time.Second, func() bool {
			code, _ := n.api(t, "GET", "/api/whoami", "")
			return code == 200 && len(n.runningNodes(t)) == 3
		})
	}
	return c
}

// index returns n's index in c.nodes.
func (c *proxiedCluster) index(n *clusterNode) int {
	for i, x := range c.nodes {
		if x == n {
			return i
		}
	}
	panic("not a node of the cluster: " + n.name)
}

// isolate cuts n off from both other nodes, both ways, without closing
// a connection: a partition.
func (c *proxiedCluster) isolate(n *clusterNode) {
	i := c.index(n)
	for j := range 3 {
		if j != i {
			c.via[i][j].Blackhole(faultproxy.Both)
			c.via[j][i].Blackhole(faultproxy.Both)
		}
	}
}

// cutOneWay loses every byte from to to, on connections either one
// dialed; bytes from to to from still arrive.
func (c *proxiedCluster) cutOneWay(from, to *clusterNode) {
	i, j := c.index(from), c.index(to)
	c.via[i][j].Blackhole(faultproxy.Upstream)
	c.via[j][i].Blackhole(faultproxy.Downstream)
}

// heal lifts every fault.
func (c *proxiedCluster) heal() {
	for i := range 3 {
		for j := range 3 {
			if i != j {
				c.via[i][j].Heal()
			}
		}
	}
}

// streamLeader returns the node that Metadata, asked through env,
// names as stream name's leader (nil if none, or not yet).
func (c *proxiedCluster) streamLeader(env *stream.Environment, name string) *clusterNode {
	meta, err := env.StreamMetaData(name)
	if err != nil || meta.Leader == nil {
		return nil
	}
	for _, n := range c.nodes {
		if _, p, _ := net.SplitHostPort(n.stream); p == meta.Leader.Port {
			return n
		}
	}
	return nil
}

// readAll reads every message n's own copy of stream name holds, over
// AMQP 0-9-1 on n from the first offset: at least min, then until
// nothing more arrives for a second (readStream).
func readAll(t *testing.T, n *clusterNode, name string, min int) []string {
	t.Helper()
	return readStream(t, n, name, min, true)
}

// reads counts checkCopy's reads, naming each read's consumer.
var reads atomic.Int64

// checkCopy fails unless got is exactly want(0) … want(count-1), and
// records got as one consumer's deliveries from node n's copy in h: each
// body is "<publisher>-<seq>".
func checkCopy(t *testing.T, h *histcheck.History, target string, n *clusterNode, got []string, want func(int) string, count int) {
	t.Helper()
	consumer := fmt.Sprintf("%s/read-%d", n.name, reads.Add(1))
	for _, m := range got {
		pub, seqText, _ := strings.Cut(m, "-")
		seq, err := strconv.ParseUint(seqText, 10, 64)
		if err != nil {
			t.Fatalf("%s: message %q", n.name, m)
		}
		h.Deliver(target, consumer, pub, seq, false)
	}
	if len(got) != count {
		t.Errorf("%s holds %d messages, want %d", n.name, len(got), count)
	}
	for i, m := range got[:min(len(got), count)] {
		if m != want(i) {
			t.Fatalf("%s: message %d = %q, want %q", n.name, i, m, want(i))
		}
	}
}

// drainQueue consumes queue name on n (retrying while the queue refuses
// consumers: a new leader opens it once a majority holds its log),
// acking, until it has at least min messages and nothing more comes for
// a second; it records the deliveries in h as consumer id (a body
// "q-<seq>" is publishQQ's publisher "p", "x-<seq>" is publisher "x").
func drainQueue(t *testing.T, h *histcheck.History, n *clusterNode, name, id string, min int) []string {
	t.Helper()
	var ds <-chan amqp091.Delivery
	waitFor(t, "the queue to take a consumer on "+n.name, 15*time.Second, func() bool {
		conn, ch := amqpChannel(t, n)
		if err := ch.Qos(200, 0, false); err != nil {
			t.Fatal(err)
		}
		var err error
		if ds, err = ch.Consume(name, "", false, false, false, false, nil); err != nil {
			conn.Close()
			return false
		}
		return true
	})
	var got []string
	timeout := time.After(30 * time.Second)
	for {
		idle := time.After(time.Second)
		if len(got) < min {
			idle = nil
		}
		select {
		case d, ok := <-ds:
			if !ok {
				t.Fatalf("%s: consumer ended after %d messages\nstderr:\n%s", n.name, len(got), n.stderr.String())
			}
			pub, seqText, _ := strings.Cut(string(d.Body), "-")
			seq, err := strconv.ParseUint(seqText, 10, 64)
			if err != nil {
				t.Fatalf("delivery %q", d.Body)
			}
			if pub == "q" {
				pub = "p"
			}
			h.Deliver(name, id, pub, seq, d.Redelivered)
			got = append(got, string(d.Body))
			d.Ack(false)
		case <-idle:
			return got
		case <-timeout:
			t.Fatalf("%s: %d of at least %d messages in 30 s", n.name, len(got), min)
		}
	}
}

// runs describes msgs as runs of consecutive sequence numbers per
// publisher ("q-0…299 q-337…599 q-300…336"), for a failure's log.
func runs(msgs []string) string {
	var b strings.Builder
	var pub string
	var first, last uint64
	flush := func() {
		if pub != "" {
			fmt.Fprintf(&b, " %s-%d…%d", pub, first, last)
		}
	}
	for _, m := range msgs {
		p, seqText, _ := strings.Cut(m, "-")
		seq, _ := strconv.ParseUint(seqText, 10, 64)
		if p == pub && seq == last+1 {
			last = seq
			continue
		}
		flush()
		pub, first, last = p, seq, seq
	}
	flush()
	if b.Len() == 0 {
		return "nothing"
	}
	return strings.TrimSpace(b.String())
}
