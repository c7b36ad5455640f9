package main

import (
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warren-mq/warren/internal/histcheck"
)

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
	publishQQ(t, c.nodes, nil, name, &h, 0, 300, &noKill) // bodies q-%06d

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
	publishQQ(t, majority, nil, name, &h, 300, 600, &noKill)
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
	publishQQ(t, []*clusterNode{lead}, nil, name, &h, 600, 650, &noKill)
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
	publishQQ(t, c.nodes, nil, name, &h, 0, 300, &noKill)

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
	publishQQ(t, c.nodes[1:], nil, name, &h, 300, 600, &noKill)
	n1.kill()
	mconn.Close()
	c.heal()
	n1.start(t)
	restarted := time.Now()
	publishQQ(t, c.nodes, nil, name, &h, 600, 700, &noKill) // asks n1 first
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

// TestClusterStreamPartitionFlaps for a quorum queue: its leader cut
// off from both peers for a random 1-6 s, round after round, while
// batches of 50 are published with confirms to the leader the other
// nodes name; drained through the leader at the end, every confirmed
// message is there (histcheck).
func TestClusterQuorumPartitionFlaps(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	rounds := 3
	if v, err := strconv.Atoi(os.Getenv("WARREN_CLUSTER_FLAPS")); err == nil && v > 0 {
		rounds = v
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d, %d rounds", seed, rounds)
	rng := rand.New(rand.NewSource(seed))
	c := startProxiedCluster(t)
	const name = "fq"
	_, ch := amqpChannel(t, c.nodes[0])
	if _, err := ch.QueueDeclare(name, true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	var lead *clusterNode
	stable := func(what string) {
		waitFor(t, what+": every member online, one leader", 30*time.Second, func() bool {
			var leader string
			for _, n := range c.nodes {
				p, ok := n.queuePlacement(t, name)
				if !ok || len(p.Online) != 3 || leader != "" && p.Leader != leader {
					return false
				}
				leader = p.Leader
			}
			lead = nodeNamed(t, c.nodes, leader)
			return true
		})
	}
	var h histcheck.History
	var noKill atomic.Int64
	const perBatch = 50
	next := 0
	for r := range rounds {
		stable(fmt.Sprintf("round %d", r))
		old := lead
		var ask []*clusterNode // the others first: the cut-off leader's catalog is stale
		for _, n := range c.nodes {
			if n != old {
				ask = append(ask, n)
			}
		}
		ask = append(ask, old)
		after := time.Duration(rng.Intn(500)) * time.Millisecond
		cutFor := time.Second + time.Duration(rng.Intn(5000))*time.Millisecond
		healed := make(chan struct{})
		go func() {
			defer close(healed)
			time.Sleep(after)
			c.isolate(old)
			time.Sleep(cutFor)
			c.heal()
		}()
		start, from := time.Now(), next
		for done := false; !done; {
			select {
			case <-healed:
				done = true
			default:
			}
			publishQQ(t, ask, nil, name, &h, next, next+perBatch, &noKill)
			next += perBatch
		}
		stable(fmt.Sprintf("round %d healed", r))
		t.Logf("round %d: %s cut off for %v after %v; %d confirmed in %v; %s leads",
			r, old.name, cutFor.Round(100*time.Millisecond), after, next-from, time.Since(start).Round(100*time.Millisecond), lead.name)
	}
	got := drainQueue(t, &h, lead, name, "drain", next)
	t.Logf("the queue holds %s", runs(got))
	for _, v := range h.Check() {
		t.Errorf("history: %+v", v)
	}
}
