package main

import (
	"fmt"
	"math/rand"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	streamamqp "github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
	"github.com/warren-mq/warren/internal/histcheck"
)

// TestClusterStreamKills kills the leader of a replicated stream with
// SIGKILL while a producer publishes with confirms, round after round
// (WARREN_CLUSTER_KILLS rounds, default 3; the check is 20), at
// a random moment of each round; the killed node comes back before the
// next. At the end every node's copy is read and the history checked
// (internal/histcheck): every confirmed message delivered, each
// publisher's messages in order, nothing delivered that was never
// published.
func TestClusterStreamKills(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	rounds := 3
	if v, err := strconv.Atoi(os.Getenv("WARREN_CLUSTER_KILLS")); err == nil && v > 0 {
		rounds = v
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d, %d rounds", seed, rounds)
	rng := rand.New(rand.NewSource(seed))
	nodes := startStreamCluster(t)
	byPort := map[string]*clusterNode{}
	for _, n := range nodes {
		_, p, _ := net.SplitHostPort(n.stream)
		byPort[p] = n
	}
	const name = "ks"
	env := streamEnv(t, nodes[1])
	waitFor(t, "the stream declared", 15*time.Second, func() bool {
		err := env.DeclareStream(name, &stream.StreamOptions{})
		return err == nil || err == stream.StreamAlreadyExists
	})
	leader := func(env *stream.Environment) *clusterNode {
		meta, err := env.StreamMetaData(name)
		if err != nil || meta.Leader == nil || len(meta.Replicas) != 2 {
			return nil
		}
		return byPort[meta.Leader.Port]
	}
	waitFor(t, "a leader and two replicas", 15*time.Second, func() bool { return leader(env) != nil })

	var h histcheck.History
	const perRound = 400
	var failovers, roundTimes []time.Duration
	next := 0
	for r := range rounds {
		lead := leader(env)
		var via *clusterNode // a node that stays up this round
		for _, n := range nodes {
			if n != lead {
				via = n
				break
			}
		}
		renv := streamEnv(t, via)
		// The kill, then how long until Metadata (asked of the node that
		// stays up) names another leader.
		var failover time.Duration
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(rng.Intn(800)) * time.Millisecond)
			lead.kill()
			killedAt := time.Now()
			for time.Since(killedAt) < 60*time.Second {
				if meta, err := renv.StreamMetaData(name); err == nil && meta.Leader != nil && byPort[meta.Leader.Port] != lead {
					failover = time.Since(killedAt)
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
		started := time.Now()
		publishIDs(t, renv, name, "m-%06d", &h, next, next+perRound)
		next += perRound
		wg.Wait()
		roundTimes = append(roundTimes, time.Since(started))
		if os.Getenv("WARREN_CLUSTER_DEBUG") != "" && time.Since(started) > 10*time.Second {
			for _, n := range nodes {
				t.Logf("round %d slow; %s stderr:\n%s", r, n.name, n.stderr.String())
			}
		}
		var newLead *clusterNode
		waitFor(t, fmt.Sprintf("round %d: a new leader", r), 30*time.Second, func() bool {
			l := leader(renv)
			if l == nil || l == lead {
				meta, err := renv.StreamMetaData(name)
				if err == nil && meta.Leader != nil && byPort[meta.Leader.Port] != lead {
					newLead = byPort[meta.Leader.Port]
					return true
				}
				return false
			}
			newLead = l
			return true
		})
		failovers = append(failovers, failover)
		t.Logf("round %d: killed %s, %s leads", r, lead.name, newLead.name)
		lead.start(t)
		waitFor(t, fmt.Sprintf("round %d: both replicas back in Metadata", r), 30*time.Second, func() bool { return leader(renv) != nil })
		env = renv
	}
	t.Logf("failover times (kill to another leader in Metadata): %v", failovers)
	t.Logf("rounds (400 messages confirmed, a kill inside): %v", roundTimes)
	for r, f := range failovers {
		if f == 0 {
			t.Errorf("round %d: no other leader in Metadata within 60 s of the kill", r)
		}
	}

	// Deduplication by publishing id makes each message appear once, in
	// publishing order, on every copy: all of them, since each round's
	// messages are all confirmed.
	for _, n := range nodes {
		got := consumeAll(t, n, name, next)
		prev := int64(-1)
		for _, m := range got {
			var seq uint64
			if _, err := fmt.Sscanf(m, "m-%d", &seq); err != nil {
				t.Fatalf("%s: message %q", n.name, m)
			}
			if int64(seq) <= prev {
				t.Errorf("%s: m-%06d after m-%06d", n.name, seq, prev)
			}
			prev = int64(seq)
			h.Deliver(name, n.name, "p", seq, false)
		}
	}
	for _, v := range h.Check() {
		t.Errorf("history: %+v", v)
	}
}

// publishIDs publishes the messages format(from) … format(to-1) with
// publishing ids from … to-1 under one producer name and waits for every
// confirm, recording publishes and confirms in h (publisher "p") unless
// h is nil. A producer whose messages are not all confirmed in 5 s, or
// that the broker closes (a metadata update: leadership moved), is
// replaced and the unconfirmed messages sent again: the broker's
// deduplication drops what it already stored.
func publishIDs(t *testing.T, env *stream.Environment, name, format string, h *histcheck.History, from, to int) {
	t.Helper()
	var mu sync.Mutex
	confirmed := map[int64]bool{}
	for attempt := 0; ; attempt++ {
		if attempt == 30 {
			t.Fatalf("%d of %d confirms after 30 producers", len(confirmed), to-from)
		}
		p, err := env.NewProducer(name, stream.NewProducerOptions().SetProducerName("test-producer"))
		if err != nil {
			time.Sleep(500 * time.Millisecond)
			continue
		}
		closed := p.NotifyClose() // the broker's metadata update when leadership moves
		confirms := p.NotifyPublishConfirmation()
		go func() {
			for cs := range confirms {
				mu.Lock()
				for _, c := range cs {
					if c.IsConfirmed() && !confirmed[c.GetPublishingId()] {
						confirmed[c.GetPublishingId()] = true
						if h != nil {
							h.Confirm("p", uint64(c.GetPublishingId()))
						}
					}
				}
				mu.Unlock()
			}
		}()
		for i := from; i < to; i++ {
			mu.Lock()
			done := confirmed[int64(i)]
			mu.Unlock()
			if done {
				continue
			}
			if h != nil {
				h.Publish("p", uint64(i), name)
			}
			m := streamamqp.NewMessage([]byte(fmt.Sprintf(format, i)))
			m.SetPublishingId(int64(i))
			if err := p.Send(m); err != nil {
				break
			}
			if i%50 == 0 {
				time.Sleep(10 * time.Millisecond) // spread the round over the kill
			}
		}
		deadline := time.Now().Add(5 * time.Second)
	wait:
		for time.Now().Before(deadline) {
			mu.Lock()
			all := len(confirmed) == to-from
			mu.Unlock()
			if all {
				p.Close()
				return
			}
			select {
			case <-closed:
				break wait // a new producer, after a breath
			case <-time.After(20 * time.Millisecond):
			}
		}
		p.Close()
		time.Sleep(200 * time.Millisecond)
	}
}
