package main

import (
	"fmt"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	streamamqp "github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
)

// startStreamCluster starts three node processes serving the stream
// protocol, advertised on 127.0.0.1.
func startStreamCluster(t testing.TB) []*clusterNode {
	t.Helper()
	ports := freePorts(t, 3)
	streamPorts := freePorts(t, 3) // fixed: a restarted node keeps its advertised address
	var peers []string
	for i, p := range ports {
		peers = append(peers, fmt.Sprintf("n%d=%s", i+1, p))
	}
	nodes := make([]*clusterNode, 3)
	for i := range nodes {
		n := &clusterNode{name: fmt.Sprintf("n%d", i+1), dir: t.TempDir()}
		n.flags = strings.Join([]string{
			"-data-dir", n.dir, "-node-name", n.name, "-cluster-peers", strings.Join(peers, ","),
			"-cluster-command-timeout", "3s",
			"-amqp-listen", "127.0.0.1:0", "-http-listen", "127.0.0.1:0", "-prometheus-listen", "127.0.0.1:0",
			"-stream-listen", streamPorts[i], "-stream-advertise", "127.0.0.1:",
		}, " ")
		nodes[i] = n
		n.start(t)
	}
	for _, n := range nodes {
		waitFor(t, n.name+" to see three nodes", 20*time.Second, func() bool {
			code, _ := n.api(t, "GET", "/api/whoami", "")
			return code == 200 && len(n.runningNodes(t)) == 3
		})
	}
	return nodes
}

// streamEnv connects the Go stream client to n; it finds the other
// nodes through Metadata.
func streamEnv(t *testing.T, n *clusterNode) *stream.Environment {
	t.Helper()
	host, portText, _ := net.SplitHostPort(n.stream)
	port, _ := strconv.Atoi(portText)
	env, err := stream.NewEnvironment(stream.NewEnvironmentOptions().SetHost(host).SetPort(port).
		SetUser("guest").SetPassword("guest"))
	if err != nil {
		t.Fatalf("stream environment on %s: %v", n.name, err)
	}
	t.Cleanup(func() { env.Close() })
	return env
}

// A stream declared on n1 is led by n1 and held by all three nodes: the
// Go client publishes to the leader and consumes from a replica, as
// Metadata tells it; confirms need a majority, so with both replicas
// down nothing is confirmed, and a replica back confirms what waited.
func TestClusterStreamReplication(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	nodes := startStreamCluster(t)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	env := streamEnv(t, n1) // the stream is declared here: n1 leads it
	const name = "cs"
	waitFor(t, "the stream declared", 15*time.Second, func() bool {
		err := env.DeclareStream(name, &stream.StreamOptions{})
		return err == nil || err == stream.StreamAlreadyExists
	})
	// Metadata names the leader, n1 (client-local), and both replicas
	// once every node's stream address is in the catalog.
	_, n1Port, _ := net.SplitHostPort(n1.stream)
	waitFor(t, "metadata with a leader and two replicas", 15*time.Second, func() bool {
		meta, err := env.StreamMetaData(name)
		return err == nil && meta.Leader != nil && meta.Leader.Port == n1Port && len(meta.Replicas) == 2
	})

	p, err := env.NewProducer(name, stream.NewProducerOptions())
	if err != nil {
		t.Fatal(err)
	}
	confirms := p.NotifyPublishConfirmation()
	var mu sync.Mutex
	confirmed := map[string]bool{}
	go func() {
		for cs := range confirms {
			mu.Lock()
			for _, c := range cs {
				if c.IsConfirmed() {
					confirmed[string(c.GetMessage().GetData()[0])] = true
				}
			}
			mu.Unlock()
		}
	}()
	nConfirmed := func() int { mu.Lock(); defer mu.Unlock(); return len(confirmed) }
	send := func(from, to int) {
		for i := from; i < to; i++ {
			if err := p.Send(streamamqp.NewMessage([]byte(fmt.Sprintf("m-%04d", i)))); err != nil {
				t.Fatalf("send %d: %v", i, err)
			}
		}
	}
	t.Log("producer ready")
	send(0, 1000)
	t.Log("sent")
	waitFor(t, "1000 confirms", 20*time.Second, func() bool { return nConfirmed() == 1000 })

	// Every node holds the 1000 messages: a consumer through each node's
	// own address reads them in order.
	t.Log("confirmed")
	for _, n := range nodes {
		got := consumeAll(t, n, name, 1000)
		t.Log("consumed on", n.name)
		for i, m := range got {
			if want := fmt.Sprintf("m-%04d", i); m != want {
				t.Fatalf("%s: message %d = %q, want %q", n.name, i, m, want)
			}
		}
	}

	// Both replicas down: no majority, nothing more is confirmed.
	n3.kill()
	n2.kill()
	send(1000, 1010)
	time.Sleep(2 * time.Second)
	if c := nConfirmed(); c != 1000 {
		t.Fatalf("%d confirms with two of three nodes down, want 1000", c)
	}
	// One replica back: the waiting messages are confirmed.
	n2.start(t)
	waitFor(t, "the waiting messages confirmed", 30*time.Second, func() bool { return nConfirmed() == 1010 })
	got := consumeAll(t, n2, name, 1010)
	if got[1009] != "m-1009" {
		t.Errorf("n2's last message %q, want m-1009", got[1009])
	}
	// Metadata names the running replicas: once n1 sees n3 gone, the
	// client's consumer goes to n2.
	waitFor(t, "n1 to see n3 down", 15*time.Second, func() bool { return !n1.runningNodes(t)["n3"] })
	got = consumeStream(t, env, name, 1010)
	for i, m := range got {
		if want := fmt.Sprintf("m-%04d", i); m != want {
			t.Fatalf("stream client: message %d = %q, want %q", i, m, want)
		}
	}
}

// consumeAll reads count messages of the stream from first over AMQP
// 0-9-1 on node n: what n's own copy of the stream holds (readStream).
func consumeAll(t *testing.T, n *clusterNode, name string, count int) []string {
	t.Helper()
	return readStream(t, n, name, count, false)
}

// readStream reads stream name from first over AMQP 0-9-1 on node n (n's
// own copy): count messages, or, with more, at least count and then
// until nothing arrives for a second. A consume that fails (the node's
// copy was just reopened in another role) is tried again from the start,
// as a client would.
func readStream(t *testing.T, n *clusterNode, name string, count int, more bool) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var lastErr error
	for time.Now().Before(deadline) {
		got, err := readStreamOnce(n, name, count, more, deadline)
		if err == nil {
			return got
		}
		lastErr = err
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: %v\nstderr:\n%s", n.name, lastErr, n.stderr.String())
	return nil
}

func readStreamOnce(n *clusterNode, name string, count int, more bool, deadline time.Time) ([]string, error) {
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
		var idle <-chan time.Time // once count are in: the end, or a second without more
		switch {
		case len(got) >= count && !more:
			return got, nil
		case len(got) >= count:
			idle = time.After(time.Second)
		}
		select {
		case d, ok := <-ds:
			if !ok {
				return nil, fmt.Errorf("consumer ended after %d of %d messages", len(got), count)
			}
			got = append(got, string(d.Body))
			d.Ack(false)
		case <-idle:
			return got, nil
		case <-timeout:
			return nil, fmt.Errorf("%d of %d messages by the deadline", len(got), count)
		}
	}
}

// consumeStream reads count messages from first with the Go stream
// client, which picks the node to read from by Metadata.
func consumeStream(t *testing.T, env *stream.Environment, name string, count int) []string {
	t.Helper()
	var mu sync.Mutex
	var got []string
	c, err := env.NewConsumer(name, func(_ stream.ConsumerContext, m *streamamqp.Message) {
		mu.Lock()
		got = append(got, string(m.GetData()))
		mu.Unlock()
	}, stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	defer c.Close()
	waitFor(t, fmt.Sprintf("%d messages", count), 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= count
	})
	mu.Lock()
	defer mu.Unlock()
	return append([]string(nil), got[:count]...)
}

// The stream's leader's node is killed: within seconds the coordinator
// makes a replica the leader at the next epoch, Metadata names it, a
// producer through it is confirmed, every confirmed message is still
// there in order, and the old leader, restarted, follows the new one and
// holds the same messages.
func TestClusterStreamFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	nodes := startStreamCluster(t)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	const name = "fs"
	env1 := streamEnv(t, n1)
	waitFor(t, "the stream declared", 15*time.Second, func() bool {
		err := env1.DeclareStream(name, &stream.StreamOptions{})
		return err == nil || err == stream.StreamAlreadyExists
	})
	_, n1Port, _ := net.SplitHostPort(n1.stream)
	waitFor(t, "metadata with n1 leading two replicas", 15*time.Second, func() bool {
		meta, err := env1.StreamMetaData(name)
		return err == nil && meta.Leader != nil && meta.Leader.Port == n1Port && len(meta.Replicas) == 2
	})
	publishConfirmed(t, env1, name, 0, 1000)

	n1.kill()
	killed := time.Now()
	env2 := streamEnv(t, n2)
	var leaderPort string
	waitFor(t, "a new leader in Metadata", 30*time.Second, func() bool {
		meta, err := env2.StreamMetaData(name)
		if err != nil || meta.Leader == nil || meta.Leader.Port == n1Port {
			return false
		}
		leaderPort = meta.Leader.Port
		return true
	})
	t.Logf("new leader on port %s %v after the kill", leaderPort, time.Since(killed).Round(100*time.Millisecond))
	publishConfirmed(t, env2, name, 1000, 1500)

	for _, n := range []*clusterNode{n2, n3} {
		got := consumeAll(t, n, name, 1500)
		for i, m := range got {
			if want := fmt.Sprintf("m-%04d", i); m != want {
				t.Fatalf("%s: message %d = %q, want %q", n.name, i, m, want)
			}
		}
	}
	n1.start(t)
	got := consumeAll(t, n1, name, 1500)
	for i, m := range got {
		if want := fmt.Sprintf("m-%04d", i); m != want {
			t.Fatalf("n1 after its restart: message %d = %q, want %q", i, m, want)
		}
	}
}

// publishConfirmed publishes m-from … m-(to-1) (publishIDs) and waits
// for every confirm.
func publishConfirmed(t *testing.T, env *stream.Environment, name string, from, to int) {
	t.Helper()
	publishIDs(t, env, name, "m-%04d", nil, from, to)
}
