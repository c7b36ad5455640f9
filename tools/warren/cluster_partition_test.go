package main

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	streamamqp "github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
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
// nothing more arrives for a second. A consume that fails (the copy was
// just reopened in another role) is tried again from the start.
func readAll(t *testing.T, n *clusterNode, name string, min int) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var lastErr error
	for time.Now().Before(deadline) {
		got, err := readAllOnce(n, name, min, deadline)
		if err == nil {
			return got
		}
		lastErr = err
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: %v\nstderr:\n%s", n.name, lastErr, n.stderr.String())
	return nil
}

func readAllOnce(n *clusterNode, name string, min int, deadline time.Time) ([]string, error) {
	conn, err := amqp091.Dial("amqp://guest:guest@" + n.amqp + "/")
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return nil, err
	}
	if err := ch.Qos(500, 0, false); err != nil {
		return nil, err
	}
	ds, err := ch.Consume(name, "", false, false, false, false, amqp091.Table{"x-stream-offset": "first"})
	if err != nil {
		return nil, fmt.Errorf("consume: %w", err)
	}
	var got []string
	timeout := time.After(time.Until(deadline))
	for {
		idle := time.After(time.Second)
		if len(got) < min {
			idle = nil
		}
		select {
		case d, ok := <-ds:
			if !ok {
				return nil, fmt.Errorf("consumer ended after %d messages", len(got))
			}
			got = append(got, string(d.Body))
			d.Ack(false)
		case <-idle:
			return got, nil
		case <-timeout:
			return nil, fmt.Errorf("%d of at least %d messages by the deadline", len(got), min)
		}
	}
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

// A stream's leader cut off from both other nodes (both directions, no
// connection closed) confirms nothing a producer on it sends, and its
// own readers see nothing past what was committed; the majority moves
// the leadership within seconds and confirms on the new leader. Healed,
// the old leader follows the new one and drops what it never confirmed:
// every node's copy holds exactly the confirmed messages, in order.
// Then a replica is cut off while the other two go on and declare
// another stream; healed, it catches up on both and serves the same
// messages from its own copies.
func TestClusterStreamPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	c := startProxiedCluster(t)
	n1, n2 := c.nodes[0], c.nodes[1]
	const name = "ps"
	env1 := streamEnv(t, n1) // declared here: n1 leads it
	waitFor(t, "the stream declared", 15*time.Second, func() bool {
		err := env1.DeclareStream(name, &stream.StreamOptions{})
		return err == nil || err == stream.StreamAlreadyExists
	})
	waitFor(t, "metadata with n1 leading two replicas", 15*time.Second, func() bool {
		meta, err := env1.StreamMetaData(name)
		return err == nil && c.streamLeader(env1, name) == n1 && len(meta.Replicas) == 2
	})
	var h histcheck.History
	publishIDs(t, env1, name, "p-%04d", &h, 0, 500)

	// A producer on n1, ready before the cut.
	mp, err := env1.NewProducer(name, stream.NewProducerOptions().SetProducerName("minority"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	minorityConfirms, minorityErrors := 0, 0
	go func() {
		for cs := range mp.NotifyPublishConfirmation() {
			mu.Lock()
			for _, s := range cs {
				if s.IsConfirmed() {
					minorityConfirms++
					h.Confirm("x", uint64(s.GetPublishingId()))
				} else {
					minorityErrors++
				}
			}
			mu.Unlock()
		}
	}()

	c.isolate(n1)
	cut := time.Now()
	// Each twice: second copies that reach the broker are duplicates,
	// which the leader may confirm only once the commit covers the
	// first (it never does here).
	for i := range 200 {
		h.Publish("x", uint64(i%100), name)
		m := streamamqp.NewMessage(fmt.Appendf(nil, "x-%04d", i%100))
		m.SetPublishingId(int64(i % 100))
		if err := mp.Send(m); err != nil {
			t.Fatalf("send on the cut-off leader: %v", err)
		}
	}
	env2 := streamEnv(t, n2)
	var lead *clusterNode
	waitFor(t, "the majority to move the leadership", 30*time.Second, func() bool {
		lead = c.streamLeader(env2, name)
		return lead != nil && lead != n1
	})
	t.Logf("%s leads %v after the cut", lead.name, time.Since(cut).Round(100*time.Millisecond))
	publishIDs(t, env2, name, "p-%04d", &h, 500, 1000)
	t.Logf("the majority confirmed 500 more %v after the cut", time.Since(cut).Round(100*time.Millisecond))
	// n1's own readers see the committed log only: the 500 from before.
	checkCopy(t, &h, name, n1, readAll(t, n1, name, 500), func(i int) string { return fmt.Sprintf("p-%04d", i) }, 500)
	mu.Lock()
	if minorityConfirms != 0 {
		t.Errorf("the cut-off leader confirmed %d messages", minorityConfirms)
	}
	t.Logf("cut-off producer: %d confirms, %d errors during the partition", minorityConfirms, minorityErrors)
	mu.Unlock()

	c.heal()
	healed := time.Now()
	waitFor(t, "n1 to follow the new leader", 30*time.Second, func() bool { return c.streamLeader(env1, name) == lead })
	want := func(i int) string { return fmt.Sprintf("p-%04d", i) }
	for _, n := range c.nodes {
		checkCopy(t, &h, name, n, readAll(t, n, name, 1000), want, 1000)
	}
	t.Logf("every copy equal %v after healing", time.Since(healed).Round(100*time.Millisecond))

	// A replica cut off: the leader and the other member go on.
	var r *clusterNode
	for _, n := range c.nodes {
		if n != lead && n != n1 {
			r = n
		}
	}
	envLead := streamEnv(t, lead)
	c.isolate(r)
	cut = time.Now()
	// Long enough for both sides to see the partition (nodenet's 2 s):
	// r's pull has stopped, the others carry on without it.
	waitFor(t, r.name+" to see itself alone", 15*time.Second, func() bool { return len(r.runningNodes(t)) == 1 })
	waitFor(t, lead.name+" to see "+r.name+" down", 15*time.Second, func() bool { return !lead.runningNodes(t)[r.name] })
	publishIDs(t, envLead, name, "p-%04d", &h, 1000, 1500)
	t.Logf("with %s cut off, 500 more confirmed %v after the cut", r.name, time.Since(cut).Round(100*time.Millisecond))
	// A stream declared meanwhile: r learns of it only once healed.
	const name2 = "ps2"
	var h2 histcheck.History
	if err := envLead.DeclareStream(name2, &stream.StreamOptions{}); err != nil {
		t.Fatalf("declare a stream on the majority: %v", err)
	}
	publishIDs(t, envLead, name2, "p-%04d", &h2, 0, 300)
	// r's own readers still see what it held.
	checkCopy(t, &h, name, r, readAll(t, r, name, 1000), want, 1000)
	c.heal()
	healed = time.Now()
	checkCopy(t, &h, name, r, readAll(t, r, name, 1500), want, 1500)
	t.Logf("%s caught up and served its copy %v after healing", r.name, time.Since(healed).Round(100*time.Millisecond))
	for _, n := range c.nodes {
		checkCopy(t, &h2, name2, n, readAll(t, n, name2, 300), want, 300)
	}
	t.Logf("%s holds the stream declared while it was cut off %v after healing", r.name, time.Since(healed).Round(100*time.Millisecond))
	for _, v := range h2.Check() {
		t.Errorf("history of %s: %+v", name2, v)
	}
	if l := c.streamLeader(envLead, name); l != lead {
		t.Errorf("a replica's partition moved the leadership to %v", l)
	}
	for _, n := range c.nodes {
		if n != r {
			checkCopy(t, &h, name, n, readAll(t, n, name, 1500), want, 1500)
		}
	}
	mu.Lock()
	t.Logf("cut-off producer in the end: %d confirms, %d errors", minorityConfirms, minorityErrors)
	mu.Unlock()
	for _, v := range h.Check() {
		t.Errorf("history: %+v", v)
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

// A quorum queue's leader cut off from both other nodes (both
// directions) acks nothing a publisher on it sends; the majority moves
// the leadership within seconds and confirms on the new leader. Healed,
// the old leader follows the new one, and the queue holds exactly the
// confirmed messages, in order: none of those the cut-off leader took.
func TestClusterQuorumPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	c := startProxiedCluster(t)
	n1 := c.nodes[0]
	const name = "pq"
	_, ch1 := amqpChannel(t, n1)
	if _, err := ch1.QueueDeclare(name, true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.nodes {
		waitFor(t, n.name+" to know the queue led by n1", 10*time.Second, func() bool {
			p, ok := n.queuePlacement(t, name)
			return ok && p.Leader == "n1"
		})
	}
	var h histcheck.History
	var noKill atomic.Int64
	publishQQ(t, c.nodes, name, &h, 0, 300, &noKill) // bodies q-%06d

	// A publisher on n1, in confirm mode before the cut.
	_, mch := amqpChannel(t, n1)
	if err := mch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	c.isolate(n1)
	cut := time.Now()
	var minority []*amqp091.DeferredConfirmation
	for i := range 50 {
		h.Publish("x", uint64(i), name)
		dc, err := mch.PublishWithDeferredConfirm("", name, false, false, amqp091.Publishing{
			DeliveryMode: amqp091.Persistent, Body: fmt.Appendf(nil, "x-%06d", i)})
		if err != nil {
			t.Fatalf("publish on the cut-off leader: %v", err)
		}
		minority = append(minority, dc)
	}
	// A consumer on the cut-off leader may get what was committed before
	// the cut, never what the leader took after it (uncommitted: the new
	// leader will not have it). It does not ack. (It gets nothing: a
	// first delivery waits for a delivered-mark reservation that the
	// cut-off log cannot commit.)
	mconn, mcons := amqpChannel(t, n1)
	if err := mcons.Qos(1000, 0, false); err != nil {
		t.Fatal(err)
	}
	mds, err := mcons.Consume(name, "", false, false, false, false, nil)
	if err != nil {
		t.Fatalf("consume on the cut-off leader: %v", err)
	}
	var mmu sync.Mutex
	var minorityGot []string
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		for d := range mds {
			pub, seqText, _ := strings.Cut(string(d.Body), "-")
			seq, _ := strconv.ParseUint(seqText, 10, 64)
			if pub == "q" {
				pub = "p"
			}
			h.Deliver(name, "cut-off", pub, seq, d.Redelivered)
			mmu.Lock()
			minorityGot = append(minorityGot, string(d.Body))
			mmu.Unlock()
		}
	}()
	majority := c.nodes[1:]
	leader := waitLeader(t, majority, name, "n1")
	t.Logf("%s leads %v after the cut", leader, time.Since(cut).Round(100*time.Millisecond))
	publishQQ(t, majority, name, &h, 300, 600, &noKill)
	t.Logf("the majority confirmed 300 more %v after the cut", time.Since(cut).Round(100*time.Millisecond))
	// What the cut-off publisher has heard: no ack. (A nack, or the
	// channel closed, says nothing was stored, which is right too.)
	countMinority := func() (acks, nacks int) {
		for i, dc := range minority {
			select {
			case <-dc.Done():
				if dc.Acked() {
					acks++
					h.Confirm("x", uint64(i))
				} else {
					nacks++
				}
			default:
			}
		}
		return acks, nacks
	}
	acks, nacks := countMinority()
	if acks != 0 {
		t.Errorf("the cut-off leader acked %d of its publisher's messages", acks)
	}
	t.Logf("cut-off publisher during the partition: %d acks, %d nacks, %d waiting", acks, nacks, len(minority)-acks-nacks)
	mconn.Close()
	<-consumed
	t.Logf("the consumer on the cut-off leader got %s", runs(minorityGot))
	for _, m := range minorityGot {
		if !strings.HasPrefix(m, "q-") {
			t.Errorf("the cut-off leader delivered %q, which it never committed", m)
			break
		}
	}

	c.heal()
	healed := time.Now()
	waitFor(t, "n1 to follow "+leader, 30*time.Second, func() bool {
		p, ok := n1.queuePlacement(t, name)
		return ok && p.Leader == leader && len(p.Online) == 3
	})
	t.Logf("n1 follows %s %v after healing", leader, time.Since(healed).Round(100*time.Millisecond))
	// The old leader's publisher is told, now that the leader changed,
	// that its messages were not stored: nacks (the log's close fails
	// the publishes that wait for a commit).
	waitFor(t, "the cut-off publisher to hear about every message", 20*time.Second, func() bool {
		acks, nacks := countMinority()
		return acks+nacks == len(minority)
	})
	acks, nacks = countMinority()
	t.Logf("cut-off publisher after healing: %d acks, %d nacks (%v after healing)", acks, nacks, time.Since(healed).Round(100*time.Millisecond))
	if acks != 0 {
		t.Errorf("the old leader acked %d of its cut-off publisher's messages after healing", acks)
	}
	lead := nodeNamed(t, c.nodes, leader)
	// n1 applies the catalog again: a vhost made on the leader appears.
	if code, body := lead.api(t, "PUT", "/api/vhosts/after-heal", ""); code != 201 && code != 204 {
		t.Fatalf("PUT vhost after healing: %d %s", code, body)
	}
	waitFor(t, "n1 to apply a catalog change after healing", 10*time.Second, func() bool {
		code, _ := n1.api(t, "GET", "/api/vhosts/after-heal", "")
		return code == 200
	})
	// n1 follows as a replica: with the third node cut off, the leader
	// confirms only with n1's copy.
	var r *clusterNode
	for _, n := range c.nodes {
		if n != lead && n != n1 {
			r = n
		}
	}
	c.isolate(r)
	publishQQ(t, []*clusterNode{lead}, name, &h, 600, 650, &noKill)
	c.heal()

	// Exactly the 650 confirmed messages, each once. Order is histcheck's:
	// a message the new leader nacked before it had opened the queue was
	// published again after later ones, so only the messages published
	// once must come in publishing order.
	got := drainQueue(t, &h, lead, name, "drain", 650)
	t.Logf("the queue holds %s", runs(got))
	seen := map[string]bool{}
	for _, m := range got {
		if seen[m] || !strings.HasPrefix(m, "q-") {
			t.Errorf("the queue holds %q twice, or from the cut-off publisher", m)
		}
		seen[m] = true
	}
	if len(seen) != 650 {
		t.Errorf("the queue holds %d distinct messages, want 650", len(seen))
	}
	for _, v := range h.Check() {
		t.Errorf("history: %+v", v)
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

// A replica cut off while the other two confirm without it lags behind
// them; the leader killed then leaves one node up on each side, so
// nothing moves until the partition heals. Healed, the two live nodes
// are a majority again and the leadership must go to the one holding
// every confirmed message, not to the lagging one: each copy then holds
// every confirmed message in order, the killed node's too once back.
func TestClusterStreamLaggingReplicaFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	c := startProxiedCluster(t)
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	const name = "ls"
	env1 := streamEnv(t, n1) // declared here: n1 leads it
	waitFor(t, "the stream declared", 15*time.Second, func() bool {
		err := env1.DeclareStream(name, &stream.StreamOptions{})
		return err == nil || err == stream.StreamAlreadyExists
	})
	waitFor(t, "metadata with n1 leading two replicas", 15*time.Second, func() bool {
		meta, err := env1.StreamMetaData(name)
		return err == nil && c.streamLeader(env1, name) == n1 && len(meta.Replicas) == 2
	})
	var h histcheck.History
	want := func(i int) string { return fmt.Sprintf("p-%04d", i) }
	publishIDs(t, env1, name, "p-%04d", &h, 0, 300)

	c.isolate(n3)
	waitFor(t, "n1 to see n3 down", 15*time.Second, func() bool { return !n1.runningNodes(t)["n3"] })
	publishIDs(t, env1, name, "p-%04d", &h, 300, 800) // n1 and n2 only
	checkCopy(t, &h, name, n3, readAll(t, n3, name, 300), want, 300)

	n1.kill()
	env2 := streamEnv(t, n2)
	time.Sleep(5 * time.Second) // longer than a move takes with a majority
	// Metadata names no leader while the leader's node is down.
	if l := c.streamLeader(env2, name); l != nil && l != n1 {
		t.Fatalf("the leadership moved to %s without a majority", l.name)
	}
	c.heal()
	healed := time.Now()
	var lead *clusterNode
	waitFor(t, "a new leader once healed", 30*time.Second, func() bool {
		lead = c.streamLeader(env2, name)
		return lead != nil && lead != n1
	})
	t.Logf("%s leads %v after healing", lead.name, time.Since(healed).Round(100*time.Millisecond))
	if lead != n2 {
		t.Errorf("%s leads; n2 holds the longest log", lead.name)
	}
	publishIDs(t, streamEnv(t, lead), name, "p-%04d", &h, 800, 900)
	for _, n := range []*clusterNode{n2, n3} {
		checkCopy(t, &h, name, n, readAll(t, n, name, 900), want, 900)
	}
	n1.start(t)
	checkCopy(t, &h, name, n1, readAll(t, n1, name, 900), want, 900)
	for _, v := range h.Check() {
		t.Errorf("history: %+v", v)
	}
}

// A stream leader cut off and then killed while the majority leads and
// confirms without it comes back after healing with its stale catalog,
// in which it still leads (docs/design-cluster.md: it may open as
// leader at its old epoch until the move reaches it). A producer that
// asks it for Metadata right away publishes there first; whatever it
// gets confirmed must be in every copy, in order, with what the
// majority confirmed, and the cut-off leader's unconfirmed tail gone.
func TestClusterStreamStaleLeaderRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	c := startProxiedCluster(t)
	n1, n2 := c.nodes[0], c.nodes[1]
	const name = "rs"
	env1 := streamEnv(t, n1) // declared here: n1 leads it
	waitFor(t, "the stream declared", 15*time.Second, func() bool {
		err := env1.DeclareStream(name, &stream.StreamOptions{})
		return err == nil || err == stream.StreamAlreadyExists
	})
	waitFor(t, "metadata with n1 leading two replicas", 15*time.Second, func() bool {
		meta, err := env1.StreamMetaData(name)
		return err == nil && c.streamLeader(env1, name) == n1 && len(meta.Replicas) == 2
	})
	var h histcheck.History
	publishIDs(t, env1, name, "p-%04d", &h, 0, 300)

	// The cut-off leader takes messages it cannot commit.
	mp, err := env1.NewProducer(name, stream.NewProducerOptions().SetProducerName("minority"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	minorityConfirms := 0
	go func() {
		for cs := range mp.NotifyPublishConfirmation() {
			mu.Lock()
			for _, s := range cs {
				if s.IsConfirmed() {
					minorityConfirms++
					h.Confirm("x", uint64(s.GetPublishingId()))
				}
			}
			mu.Unlock()
		}
	}()
	c.isolate(n1)
	for i := range 100 {
		h.Publish("x", uint64(i), name)
		m := streamamqp.NewMessage(fmt.Appendf(nil, "x-%04d", i))
		m.SetPublishingId(int64(i))
		if err := mp.Send(m); err != nil {
			t.Fatalf("send on the cut-off leader: %v", err)
		}
	}
	env2 := streamEnv(t, n2)
	waitFor(t, "the majority to move the leadership", 30*time.Second, func() bool {
		l := c.streamLeader(env2, name)
		return l != nil && l != n1
	})
	publishIDs(t, env2, name, "p-%04d", &h, 300, 600)
	time.Sleep(500 * time.Millisecond) // the cut-off producer's last chance to be (wrongly) confirmed
	n1.kill()
	mu.Lock()
	if minorityConfirms != 0 {
		t.Errorf("the cut-off leader confirmed %d messages", minorityConfirms)
	}
	mu.Unlock()
	c.heal()
	n1.start(t)
	restarted := time.Now()
	// At once through n1's Metadata: n1 may still name itself.
	publishIDs(t, streamEnv(t, n1), name, "p-%04d", &h, 600, 700)
	t.Logf("100 more confirmed %v after n1's restart", time.Since(restarted).Round(100*time.Millisecond))
	want := func(i int) string { return fmt.Sprintf("p-%04d", i) }
	for _, n := range c.nodes {
		checkCopy(t, &h, name, n, readAll(t, n, name, 700), want, 700)
	}
	for _, v := range h.Check() {
		t.Errorf("history: %+v", v)
	}
}

// TestClusterStreamStaleLeaderRestart for a quorum queue: the old
// leader, cut off, killed and restarted after healing, may open its
// copy from its stale catalog as leader; a publisher asks it first where
// the queue is. Once it follows, the current leader is
// killed, so that n1 (longest log, first name on a tie) leads: the queue
// holds every confirmed message and none of those the cut-off leader
// took, which its copy must have dropped.
func TestClusterQuorumStaleLeaderRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	c := startProxiedCluster(t)
	n1 := c.nodes[0]
	const name = "rq"
	_, ch1 := amqpChannel(t, n1)
	if _, err := ch1.QueueDeclare(name, true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.nodes {
		waitFor(t, n.name+" to know the queue led by n1", 10*time.Second, func() bool {
			p, ok := n.queuePlacement(t, name)
			return ok && p.Leader == "n1"
		})
	}
	var h histcheck.History
	var noKill atomic.Int64
	publishQQ(t, c.nodes, name, &h, 0, 300, &noKill)

	mconn, mch := amqpChannel(t, n1)
	if err := mch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	c.isolate(n1)
	for i := range 50 {
		h.Publish("x", uint64(i), name)
		if _, err := mch.PublishWithDeferredConfirm("", name, false, false, amqp091.Publishing{
			DeliveryMode: amqp091.Persistent, Body: fmt.Appendf(nil, "x-%06d", i)}); err != nil {
			t.Fatalf("publish on the cut-off leader: %v", err)
		}
	}
	leader := waitLeader(t, c.nodes[1:], name, "n1")
	publishQQ(t, c.nodes[1:], name, &h, 300, 600, &noKill)
	n1.kill()
	mconn.Close()
	c.heal()
	n1.start(t)
	restarted := time.Now()
	publishQQ(t, c.nodes, name, &h, 600, 700, &noKill) // asks n1 first
	t.Logf("100 more confirmed %v after n1's restart", time.Since(restarted).Round(100*time.Millisecond))
	waitFor(t, "n1 to follow "+leader, 30*time.Second, func() bool {
		p, ok := n1.queuePlacement(t, name)
		return ok && p.Leader == leader
	})
	// n1's copy must have lost the cut-off tail: make it lead. With the
	// leader killed, the coordinator picks the longest log, n1 on a tie.
	time.Sleep(time.Second) // n1's copy catches up
	ln := nodeNamed(t, c.nodes, leader)
	ln.kill()
	var rest []*clusterNode
	for _, n := range c.nodes {
		if n != ln {
			rest = append(rest, n)
		}
	}
	leader = waitLeader(t, rest, name, leader)
	t.Logf("%s leads after %s's kill", leader, ln.name)
	got := drainQueue(t, &h, nodeNamed(t, c.nodes, leader), name, "drain", 700)
	t.Logf("the queue holds %s", runs(got))
	seen := map[string]bool{}
	for _, m := range got {
		if !strings.HasPrefix(m, "q-") {
			t.Errorf("the queue holds %q, from the cut-off publisher", m)
		}
		seen[m] = true
	}
	if len(seen) != 700 {
		t.Errorf("the queue holds %d distinct messages, want 700", len(seen))
	}
	for _, v := range h.Check() {
		t.Errorf("history: %+v", v)
	}
}
