package main

import (
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	streamamqp "github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
	"github.com/warren-mq/warren/internal/histcheck"
)

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

// The leader of a replicated stream is cut off from both peers, round
// after round (WARREN_CLUSTER_FLAPS rounds, default 3), for a random 1-6 s
// at a random moment while a producer publishes through another node's
// Metadata; healed before the next round. Partitions shorter than a
// failover leave the leader in place, longer ones move it. At the end
// every copy holds every confirmed message, once, in order (histcheck).
func TestClusterStreamPartitionFlaps(t *testing.T) {
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
	const name = "fl"
	envs := map[*clusterNode]*stream.Environment{}
	for _, n := range c.nodes {
		envs[n] = streamEnv(t, n)
	}
	waitFor(t, "the stream declared", 15*time.Second, func() bool {
		err := envs[c.nodes[0]].DeclareStream(name, &stream.StreamOptions{})
		return err == nil || err == stream.StreamAlreadyExists
	})
	stable := func(what string) *clusterNode {
		var lead *clusterNode
		waitFor(t, what+": one leader and two replicas everywhere", 30*time.Second, func() bool {
			lead = nil
			for _, n := range c.nodes {
				meta, err := envs[n].StreamMetaData(name)
				l := c.streamLeader(envs[n], name)
				if err != nil || l == nil || len(meta.Replicas) != 2 || lead != nil && l != lead {
					return false
				}
				lead = l
			}
			return true
		})
		return lead
	}
	var h histcheck.History
	const perBatch = 50
	next := 0
	for r := range rounds {
		lead := stable(fmt.Sprintf("round %d", r))
		var via *clusterNode
		for _, n := range c.nodes {
			if n != lead {
				via = n
				break
			}
		}
		after := time.Duration(rng.Intn(500)) * time.Millisecond
		cutFor := time.Second + time.Duration(rng.Intn(5000))*time.Millisecond
		healed := make(chan struct{})
		go func() {
			defer close(healed)
			time.Sleep(after)
			c.isolate(lead)
			time.Sleep(cutFor)
			c.heal()
		}()
		// Batches of 50, each confirmed before the next, until the heal.
		start, from := time.Now(), next
		var slowest time.Duration
		for done := false; !done; {
			select {
			case <-healed:
				done = true
			default:
			}
			b := time.Now()
			publishIDs(t, envs[via], name, "p-%06d", &h, next, next+perBatch)
			next += perBatch
			slowest = max(slowest, time.Since(b))
		}
		newLead := stable(fmt.Sprintf("round %d healed", r))
		t.Logf("round %d: %s cut off for %v after %v; %d confirmed in %v, the slowest batch in %v; %s leads",
			r, lead.name, cutFor.Round(100*time.Millisecond), after, next-from, time.Since(start).Round(100*time.Millisecond),
			slowest.Round(100*time.Millisecond), newLead.name)
	}
	want := func(i int) string { return fmt.Sprintf("p-%06d", i) }
	for _, n := range c.nodes {
		checkCopy(t, &h, name, n, readAll(t, n, name, next), want, next)
	}
	for _, v := range h.Check() {
		t.Errorf("history: %+v", v)
	}
}
