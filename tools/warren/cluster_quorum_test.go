package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
	amqp091 "github.com/rabbitmq/amqp091-go"
)

// placement is what /api/queues says of a replicated queue.
type placement struct {
	Leader  string   `json:"leader"`
	Members []string `json:"members"`
	Online  []string `json:"online"`
	Type    string   `json:"type"`
}

// queuePlacement asks n's management API where vhost "/"'s queue is.
func (n *clusterNode) queuePlacement(t *testing.T, name string) (placement, bool) {
	code, body := n.api(t, "GET", "/api/queues/%2F/"+url.PathEscape(name), "")
	if code != 200 {
		return placement{}, false
	}
	var p placement
	if json.Unmarshal([]byte(body), &p) != nil {
		return placement{}, false
	}
	return p, true
}

// nodeNamed returns the node of nodes called name.
func nodeNamed(t *testing.T, nodes []*clusterNode, name string) *clusterNode {
	t.Helper()
	for _, n := range nodes {
		if n.name == name {
			return n
		}
	}
	t.Fatalf("no node %q", name)
	return nil
}

// amqpChannel dials n and opens a channel, closed at the end of the test.
func amqpChannel(t *testing.T, n *clusterNode) (*amqp091.Connection, *amqp091.Channel) {
	t.Helper()
	conn, err := amqp091.Dial("amqp://guest:guest@" + n.amqp + "/")
	if err != nil {
		t.Fatalf("dial %s: %v", n.name, err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return conn, ch
}

// publishQueueConfirmed publishes q-from … q-(to-1) persistent to queue
// name through the default exchange on n and waits for every confirm,
// failing on a nack.
func publishQueueConfirmed(t *testing.T, n *clusterNode, name string, from, to int) {
	t.Helper()
	_, ch := amqpChannel(t, n)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	var cs []*amqp091.DeferredConfirmation
	for i := from; i < to; i++ {
		dc, err := ch.PublishWithDeferredConfirm("", name, false, false, amqp091.Publishing{
			DeliveryMode: amqp091.Persistent, Body: fmt.Appendf(nil, "q-%04d", i)})
		if err != nil {
			t.Fatalf("publish %d on %s: %v", i, n.name, err)
		}
		cs = append(cs, dc)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, dc := range cs {
		ok, err := dc.WaitContext(ctx)
		if err != nil || !ok {
			t.Fatalf("message %d on %s: confirmed %v, %v", from+i, n.name, ok, err)
		}
	}
	ch.Close()
}

// received is a delivery's body and redelivered flag.
type received struct {
	body        string
	redelivered bool
	count       int64 // x-delivery-count (quorum queues), 0 when absent
}

// consumeQueue takes count messages of queue name on n (prefetch count)
// and acks them when ack is set; it leaves them unacked otherwise, for
// the caller's channel close to return them.
// A new leader opens the queue once a majority holds its log: until
// then the consume is refused (404) and tried again.
func consumeQueue(t *testing.T, n *clusterNode, name string, count int, ack bool) []received {
	t.Helper()
	var conn *amqp091.Connection
	var ds <-chan amqp091.Delivery
	waitFor(t, "the queue to take a consumer on "+n.name, 10*time.Second, func() bool {
		var ch *amqp091.Channel
		conn, ch = amqpChannel(t, n)
		if err := ch.Qos(count, 0, false); err != nil {
			t.Fatal(err)
		}
		var err error
		if ds, err = ch.Consume(name, "", false, false, false, false, nil); err != nil {
			conn.Close()
			return false
		}
		return true
	})
	defer conn.Close()
	var got []received
	timeout := time.After(30 * time.Second)
	for len(got) < count {
		select {
		case d, ok := <-ds:
			if !ok {
				t.Fatalf("%s: consumer ended after %d of %d messages\nstderr:\n%s", n.name, len(got), count, n.stderr.String())
			}
			n, _ := d.Headers["x-delivery-count"].(int64)
			got = append(got, received{string(d.Body), d.Redelivered, n})
			if ack {
				if err := d.Ack(false); err != nil {
					t.Fatal(err)
				}
			}
		case <-timeout:
			t.Fatalf("%s: %d of %d messages in 30 s", n.name, len(got), count)
		}
	}
	return got
}

// checkRun fails unless got is q-from … in order.
func checkRun(t *testing.T, what string, got []received, from int) {
	t.Helper()
	for i, r := range got {
		if want := fmt.Sprintf("q-%04d", from+i); r.body != want {
			t.Fatalf("%s: message %d = %q, want %q", what, i, r.body, want)
		}
	}
}

// waitLeader waits until every node of asked shows queue name led by a
// node other than not, and returns it.
func waitLeader(t *testing.T, asked []*clusterNode, name, not string) string {
	t.Helper()
	var leader string
	waitFor(t, "a leader other than "+not, 30*time.Second, func() bool {
		leader = ""
		for _, n := range asked {
			p, ok := n.queuePlacement(t, name)
			if !ok || p.Leader == not || leader != "" && p.Leader != leader {
				return false
			}
			leader = p.Leader
		}
		return true
	})
	return leader
}

// A quorum queue declared on n1 is led by n1 and held by all three
// nodes. The other nodes know it (declare, the management API) but do
// not run it: publishing there is refused with a nack, consuming with
// the leader named. Its leader killed, another member leads it within
// seconds with every confirmed message and the acks that were made; the
// old leader back follows; the next leader killed, the queue moves again
// and still holds every message, the unacked ones redelivered.
func TestClusterQuorumQueue(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	nodes := startStreamCluster(t)
	n1, n2 := nodes[0], nodes[1]
	const name = "qq"
	_, ch1 := amqpChannel(t, n1)
	if _, err := ch1.QueueDeclare(name, true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		// The declare returns once applied on n1; the others apply it
		// soon after.
		waitFor(t, n.name+" to know the queue", 10*time.Second, func() bool {
			_, ok := n.queuePlacement(t, name)
			return ok
		})
		p, _ := n.queuePlacement(t, name)
		if p.Leader != "n1" || !slices.Equal(p.Members, []string{"n1", "n2", "n3"}) || p.Type != "quorum" {
			t.Fatalf("%s: placement %+v, want n1 leading n1, n2, n3", n.name, p)
		}
	}

	// n2 knows the queue without running it: a redeclare is answered
	// there, publishes and consumers are proxied to the leader.
	_, ch2 := amqpChannel(t, n2)
	if _, err := ch2.QueueDeclare(name, true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatalf("redeclare on n2: %v", err)
	}
	if _, ok, err := ch2.Get(name, false); err != nil || ok {
		t.Fatalf("basic.get of the empty queue on n2: %v %v", ok, err)
	}
	n3 := nodes[2]
	publishQueueConfirmed(t, n2, name, 0, 500) // through n2 to n1
	d, ok, err := ch2.Get(name, false)
	if err != nil || !ok || string(d.Body) != "q-0000" || d.MessageCount != 499 {
		t.Fatalf("basic.get on n2: %v %v %q count %d", ok, err, d.Body, d.MessageCount)
	}
	if err := d.Nack(false, true); err != nil { // back to the head
		t.Fatal(err)
	}
	checkRun(t, "n3", consumeQueue(t, n3, name, 200, true), 0)
	// The acks, relayed by n3, reach the leader's queue, then its log
	// and a majority with the next write of its ack state (every
	// 100 ms): wait for both, as an ack made later may come back after a
	// failover (at least once).
	n1.waitQueueCounts(t, name, 300, 0)
	n1.waitAcksDurable(t, time.Now())

	n1.kill()
	killed := time.Now()
	leader := waitLeader(t, nodes[1:], name, "n1")
	t.Logf("%s leads after n1's kill, %v later", leader, time.Since(killed).Round(100*time.Millisecond))
	ln := nodeNamed(t, nodes, leader)
	other := n2 // the surviving node that does not lead: proxied
	if other == ln {
		other = n3
	}
	got := consumeQueue(t, other, name, 300, false) // closed unacked: returned
	checkRun(t, other.name, got, 200)
	publishQueueConfirmed(t, other, name, 500, 600)

	n1.start(t)
	waitFor(t, "n1 to know the new leader", 30*time.Second, func() bool {
		p, ok := n1.queuePlacement(t, name)
		return ok && p.Leader == leader
	})
	ln.kill()
	killed = time.Now()
	var rest []*clusterNode
	for _, n := range nodes {
		if n != ln {
			rest = append(rest, n)
		}
	}
	leader2 := waitLeader(t, rest, name, leader)
	t.Logf("%s leads after %s's kill, %v later", leader2, leader, time.Since(killed).Round(100*time.Millisecond))
	via := rest[0] // a consumer on each surviving node in turn: the leader's own, then proxied
	if via.name != leader2 {
		via = rest[1]
	}
	got = consumeQueue(t, via, name, 100, true)
	for _, n := range rest {
		if n != via {
			got = append(got, consumeQueue(t, n, name, 300, true)...)
		}
	}
	checkRun(t, "the last two nodes", got, 200)
	// The messages delivered before come back redelivered, with their
	// count. (Those published later may too: a failover, like a crash,
	// marks redelivered every message below the delivered mark the
	// leader had reserved ahead while its queue was in use; persist.go.)
	for _, r := range got[:300] {
		if !r.redelivered || r.count == 0 {
			t.Fatalf("message %s: redelivered %v, x-delivery-count %d; want redelivered with a count", r.body, r.redelivered, r.count)
		}
	}
}

// waitQueueCounts waits until the node running queue name (n) counts
// ready messages ready and unacked unacknowledged ones.
func (n *clusterNode) waitQueueCounts(t testing.TB, name string, ready, unacked int) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(30 * time.Second); ; {
		code, body := n.api(t, "GET", "/api/queues/%2F/"+url.PathEscape(name), "")
		var q struct {
			Ready   *int `json:"messages_ready"`
			Unacked *int `json:"messages_unacknowledged"`
		}
		if code == 200 && json.Unmarshal([]byte(body), &q) == nil && q.Ready != nil && q.Unacked != nil {
			if *q.Ready == ready && *q.Unacked == unacked {
				return
			}
			last = fmt.Sprintf("%d ready, %d unacked (%s)", *q.Ready, *q.Unacked, body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s in %s after 30 s, want %d ready, %d unacked", n.name, last, name, ready, unacked)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// isCode reports whether err is an AMQP error with code.
func isCode(err error, code int) bool {
	var ae *amqp091.Error
	return errors.As(err, &ae) && ae.Code == code
}

// AMQP 0-9-1 publishers of any node publish to a replicated stream: a
// node that does not lead it forwards each message to the leader, and
// the publisher's confirm comes once the stream has committed it; every
// node's copy then holds the messages of both publishers, in order.
func TestClusterStreamPublishAnyNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	nodes := startStreamCluster(t)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	const name = "anys"
	_, ch := amqpChannel(t, n1)
	if _, err := ch.QueueDeclare(name, true, false, false, false, amqp091.Table{"x-queue-type": "stream"}); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		waitFor(t, n.name+" to know the stream", 10*time.Second, func() bool {
			p, ok := n.queuePlacement(t, name)
			return ok && p.Leader == "n1"
		})
	}
	publishQueueConfirmed(t, n2, name, 0, 300)   // through n2
	publishQueueConfirmed(t, n3, name, 300, 600) // through n3
	publishQueueConfirmed(t, n1, name, 600, 700) // at the leader
	for _, n := range nodes {
		got := consumeAll(t, n, name, 700)
		for i, m := range got {
			if want := fmt.Sprintf("q-%04d", i); m != want {
				t.Fatalf("%s: message %d = %q, want %q", n.name, i, m, want)
			}
		}
	}
}

// A classic queue is its declaring node's, and the cluster's name:
// clients of the other nodes publish to it and consume from it through
// the proxy; an exclusive one is locked to its connection everywhere;
// while its home is down it is out of reach (a nack), and back, it has
// what it had.
func TestClusterClassicQueue(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	nodes := startStreamCluster(t)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	const name = "cq"
	conn1, ch1 := amqpChannel(t, n1)
	if _, err := ch1.QueueDeclare(name, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch1.QueueDeclare("mine", false, false, true, false, nil); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		waitFor(t, n.name+" to know the queues", 10*time.Second, func() bool {
			p, ok := n.queuePlacement(t, name)
			_, ok2 := n.queuePlacement(t, "mine")
			return ok && ok2 && p.Leader == "n1" && p.Type == "classic"
		})
	}
	_, ch2 := amqpChannel(t, n2)
	if _, err := ch2.QueueDeclare("mine", false, false, true, false, nil); !isCode(err, 405) {
		t.Fatalf("n2 declares n1's connection's exclusive queue: %v; want 405", err)
	}
	publishQueueConfirmed(t, n2, name, 0, 100)
	checkRun(t, "n3", consumeQueue(t, n3, name, 100, true), 0)
	conn1.Close() // its exclusive queue goes, everywhere
	for _, n := range nodes {
		waitFor(t, n.name+" to forget the exclusive queue", 10*time.Second, func() bool {
			_, ok := n.queuePlacement(t, "mine")
			return !ok
		})
	}

	publishQueueConfirmed(t, n3, name, 100, 150)
	// Acks reach the disk with the next write of the ack state (every
	// 100 ms), as on a single node; an ack made later would come back.
	n1.waitQueueCounts(t, name, 50, 0)
	n1.waitAcksDurable(t, time.Now())
	n1.kill()
	_, ch := amqpChannel(t, n2)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	dc, err := ch.PublishWithDeferredConfirm("", name, false, false, amqp091.Publishing{Body: []byte("home down")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if ok, err := dc.WaitContext(ctx); err != nil || ok {
		t.Fatalf("publish while the home is down: confirmed %v, %v; want a nack", ok, err)
	}
	n1.start(t)
	checkRun(t, "n2 after n1's restart", consumeQueue(t, n2, name, 50, true), 100)
}

// An AMQP 1.0 client (go-amqp) of a node that does not run a quorum
// queue consumes from it through the proxy: credit as it issues it, a
// drain that leaves the rest in the queue, released and accepted
// messages settled at the leader.
func TestClusterAMQP10Proxied(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	nodes := startStreamCluster(t)
	n1, n3 := nodes[0], nodes[2]
	const name = "q10"
	_, ch := amqpChannel(t, n1)
	if _, err := ch.QueueDeclare(name, true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "n3 to know the queue", 10*time.Second, func() bool { _, ok := n3.queuePlacement(t, name); return ok })
	publishQueueConfirmed(t, n1, name, 0, 10)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := goamqp.Dial(ctx, "amqp://"+n3.amqp, &goamqp.ConnOptions{SASLType: goamqp.SASLTypePlain("guest", "guest")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	rcv, err := s.NewReceiver(ctx, "/queues/"+name, &goamqp.ReceiverOptions{Credit: -1})
	if err != nil {
		t.Fatalf("receiver on n3: %v", err)
	}
	if err := rcv.IssueCredit(3); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		m, err := rcv.Receive(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("q-%04d", i); string(m.GetData()) != want {
			t.Fatalf("message %d: %q, want %q", i, m.GetData(), want)
		}
		if i == 0 {
			if err := rcv.ReleaseMessage(ctx, m); err != nil { // back, uncounted
				t.Fatal(err)
			}
			continue
		}
		if err := rcv.AcceptMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := rcv.IssueCredit(2); err != nil {
		t.Fatal(err)
	}
	if err := rcv.DrainCredit(ctx, nil); err != nil {
		t.Fatalf("drain: %v", err)
	}
	// Two more came (q-0000 again first, then q-0003), or fewer if the
	// drain ran first; the rest stay at the leader.
	var more []string
	for {
		rctx, rcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		m, err := rcv.Receive(rctx, nil)
		rcancel()
		if err != nil {
			break
		}
		more = append(more, string(m.GetData()))
		if err := rcv.AcceptMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if len(more) > 2 || len(more) > 0 && more[0] != "q-0000" {
		t.Fatalf("after credit 2 and a drain: %q", more)
	}
	waitFor(t, "the leader's count", 10*time.Second, func() bool {
		code, body := n1.api(t, "GET", "/api/queues/%2F/"+name, "")
		var q struct {
			Ready   int `json:"messages_ready"`
			Unacked int `json:"messages_unacknowledged"`
		}
		return code == 200 && json.Unmarshal([]byte(body), &q) == nil && q.Ready == 10-2-len(more) && q.Unacked == 0
	})
}
