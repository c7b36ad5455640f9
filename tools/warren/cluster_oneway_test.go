package main

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
	"github.com/warren-mq/warren/internal/histcheck"
)

// A stream's leader behind one-way partitions, while a producer
// publishes with confirms through whichever node Metadata names: the
// leader's bytes to both replicas lost (it hears them; they do not hear
// it, so the majority moves the leadership), the replicas' bytes to the
// leader lost (it gets no acks, so nothing commits there; it drops its
// silent links after nodenet's 2 s and cannot redial them, so the
// replicas lose it too and move the leadership), and the leader's bytes
// to one replica lost (the other makes the majority). After each phase,
// healed, every copy holds the same messages; at the end every
// confirmed message is in every copy, once, in order (histcheck).
func TestClusterStreamOneWayPartitions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	c := startProxiedCluster(t)
	n1 := c.nodes[0]
	const name = "os"
	env1 := streamEnv(t, n1) // declared here: n1 leads it
	waitFor(t, "the stream declared", 15*time.Second, func() bool {
		err := env1.DeclareStream(name, &stream.StreamOptions{})
		return err == nil || err == stream.StreamAlreadyExists
	})
	envs := map[*clusterNode]*stream.Environment{n1: env1}
	for _, n := range c.nodes[1:] {
		envs[n] = streamEnv(t, n)
	}
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
	next := 0
	publish := func(via *clusterNode, count int) time.Duration {
		start := time.Now()
		publishIDs(t, envs[via], name, "p-%05d", &h, next, next+count)
		next += count
		return time.Since(start)
	}
	lead := stable("start")
	publish(lead, 300)

	phases := []struct {
		what  string
		fault func(lead *clusterNode, others []*clusterNode)
	}{
		{"the leader's bytes to both replicas lost", func(lead *clusterNode, others []*clusterNode) {
			c.cutOneWay(lead, others[0])
			c.cutOneWay(lead, others[1])
		}},
		{"both replicas' bytes to the leader lost", func(lead *clusterNode, others []*clusterNode) {
			c.cutOneWay(others[0], lead)
			c.cutOneWay(others[1], lead)
		}},
		{"the leader's bytes to one replica lost", func(lead *clusterNode, others []*clusterNode) {
			c.cutOneWay(lead, others[0])
		}},
	}
	const faultFor = 8 * time.Second
	for _, ph := range phases {
		var others []*clusterNode
		for _, n := range c.nodes {
			if n != lead {
				others = append(others, n)
			}
		}
		ph.fault(lead, others)
		faulted := time.Now()
		healTimer := time.AfterFunc(faultFor, c.heal)
		// Published through a node that is not the leader: its Metadata
		// follows a move. Messages not confirmed in 5 s go again through
		// a new producer (publishIDs), deduplicated by the broker.
		took := publish(others[1], 400)
		healTimer.Stop()
		if time.Since(faulted) < faultFor {
			t.Logf("%s: 400 confirmed %v after the fault", ph.what, took.Round(100*time.Millisecond))
			c.heal()
		} else {
			t.Logf("%s: 400 confirmed %v after the fault, after healing at %v", ph.what, took.Round(100*time.Millisecond), faultFor)
		}
		newLead := stable(ph.what)
		t.Logf("%s: %s led, %s leads", ph.what, lead.name, newLead.name)
		lead = newLead
		for _, n := range c.nodes {
			checkCopy(t, &h, name, n, readAll(t, n, name, next), func(i int) string { return fmt.Sprintf("p-%05d", i) }, next)
		}
	}
	for _, v := range h.Check() {
		t.Errorf("history: %+v", v)
	}
}

// A quorum queue's leader behind the same one-way partitions as
// TestClusterStreamOneWayPartitions, with a publisher following the
// leader the management API names (asked of a node that is not the
// leader first) and re-sending what was not confirmed; at the end the
// queue, drained through its leader, holds every confirmed message
// (histcheck: none lost, none out of order among those sent once).
func TestClusterQuorumOneWayPartitions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	c := startProxiedCluster(t)
	const name = "oq"
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
	stable("start")
	var h histcheck.History
	var noKill atomic.Int64
	next := 0
	publishQQ(t, c.nodes, nil, name, &h, next, next+200, &noKill)
	next += 200

	phases := []struct {
		what  string
		fault func(lead *clusterNode, others []*clusterNode)
	}{
		{"the leader's bytes to both replicas lost", func(lead *clusterNode, others []*clusterNode) {
			c.cutOneWay(lead, others[0])
			c.cutOneWay(lead, others[1])
		}},
		{"both replicas' bytes to the leader lost", func(lead *clusterNode, others []*clusterNode) {
			c.cutOneWay(others[0], lead)
			c.cutOneWay(others[1], lead)
		}},
		{"the leader's bytes to one replica lost", func(lead *clusterNode, others []*clusterNode) {
			c.cutOneWay(lead, others[0])
		}},
	}
	const faultFor = 8 * time.Second
	for _, ph := range phases {
		var others []*clusterNode
		for _, n := range c.nodes {
			if n != lead {
				others = append(others, n)
			}
		}
		ph.fault(lead, others)
		faulted := time.Now()
		healTimer := time.AfterFunc(faultFor, c.heal)
		// The placement is asked of the others first: the leader's own
		// catalog may be stale.
		publishQQ(t, append(others, lead), nil, name, &h, next, next+200, &noKill)
		next += 200
		took := time.Since(faulted)
		if healTimer.Stop() {
			c.heal()
		}
		old := lead
		stable(ph.what)
		t.Logf("%s: 200 confirmed %v after the fault; %s led, %s leads", ph.what, took.Round(100*time.Millisecond), old.name, lead.name)
	}
	got := drainQueue(t, &h, lead, name, "drain", next)
	t.Logf("the queue holds %s", runs(got))
	for _, v := range h.Check() {
		t.Errorf("history: %+v", v)
	}
}
