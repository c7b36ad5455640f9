package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warren-mq/warren/internal/testutil"
)

// clusterFlagsEnv passes a cluster child its flags (space-separated).
const clusterFlagsEnv = "WARREN_CLUSTER_FLAGS"

// TestClusterChild is a node process of TestClusterCatalog: it runs the
// daemon with the flags in clusterFlagsEnv, prints "ready <amqp> <http>"
// and runs until killed.
func TestClusterChild(t *testing.T) {
	flags := os.Getenv(clusterFlagsEnv)
	if flags == "" {
		t.Skip("helper process of TestClusterCatalog")
	}
	time.AfterFunc(3*time.Minute, func() { os.Exit(4) }) // never outlive the parent by much
	cfg, err := parseFlags(strings.Fields(flags))
	if err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(3)
	}
	level := slog.LevelWarn
	if os.Getenv("WARREN_CLUSTER_DEBUG") != "" {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ready := make(chan readyAddrs, 1)
	go func() {
		a := <-ready
		streamAddr, promAddr := "-", "-"
		if a.Stream != nil {
			streamAddr = a.Stream.String()
		}
		if a.Prometheus != nil {
			promAddr = a.Prometheus.String()
		}
		fmt.Printf("ready %s %s %s %s\n", a.AMQP, a.HTTP, streamAddr, promAddr)
	}()
	if err := run(context.Background(), cfg, logger, ready); err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(3)
	}
}

// clusterNode is a node process of a test cluster.
type clusterNode struct {
	name, dir, flags string
	cmd              *exec.Cmd
	amqp, http       string
	stream           string // "-" when off
	prom             string // "-" when off
	stderr           *testutil.LockedBuffer
}

func (n *clusterNode) start(t testing.TB) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestClusterChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), clusterFlagsEnv+"="+n.flags)
	n.stderr = &testutil.LockedBuffer{}
	cmd.Stderr = n.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", n.name, err)
	}
	n.cmd = cmd
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 1)
	go func() {
		defer close(lines)
		br := bufio.NewReader(out)
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				return
			}
			if strings.HasPrefix(l, "ready ") || strings.HasPrefix(l, "error ") {
				lines <- strings.TrimSpace(l)
				io.Copy(io.Discard, br)
				return
			}
		}
	}()
	select {
	case l, ok := <-lines:
		if !ok || !strings.HasPrefix(l, "ready ") {
			t.Fatalf("%s did not start: %q\nstderr:\n%s", n.name, l, n.stderr.String())
		}
		f := strings.Fields(strings.TrimPrefix(l, "ready "))
		if len(f) != 4 {
			t.Fatalf("%s: ready line %q", n.name, l)
		}
		n.amqp, n.http, n.stream, n.prom = f[0], f[1], f[2], f[3]
	case <-time.After(30 * time.Second):
		t.Fatalf("%s not ready after 30 s\nstderr:\n%s", n.name, n.stderr.String())
	}
}

func (n *clusterNode) kill() {
	n.cmd.Process.Kill()
	n.cmd.Wait()
}

// api makes a request to the node's management API as guest and
// returns the status and body.
func (n *clusterNode) api(t testing.TB, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+n.http+path, strings.NewReader(body))
	req.SetBasicAuth("guest", "guest")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// freePorts returns n loopback addresses nobody listens on (closed
// again: the nodes need their peers' addresses before they start).
func freePorts(t testing.TB, n int) []string {
	t.Helper()
	var out []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ln.Addr().String())
		ln.Close()
	}
	return out
}

func waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runningNodes returns the names /api/nodes on n says are running.
func (n *clusterNode) runningNodes(t testing.TB) map[string]bool {
	code, body := n.api(t, "GET", "/api/nodes", "")
	if code != 200 {
		return nil
	}
	var nodes []struct {
		Name    string `json:"name"`
		Running bool   `json:"running"`
	}
	if json.Unmarshal([]byte(body), &nodes) != nil {
		return nil
	}
	out := map[string]bool{}
	for _, x := range nodes {
		if x.Running {
			out[x.Name] = true
		}
	}
	return out
}

// Three node processes form a cluster from one peer list; users,
// permissions, vhosts and exchanges made on any node are on every node;
// with one node down the other two still change the catalog, the node
// back catches up; one node alone refuses changes (503).
func TestClusterCatalog(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	ports := freePorts(t, 3)
	var peers []string
	for i, p := range ports {
		peers = append(peers, fmt.Sprintf("n%d=%s", i+1, p))
	}
	nodes := make([]*clusterNode, 3)
	for i := range nodes {
		n := &clusterNode{name: fmt.Sprintf("n%d", i+1), dir: t.TempDir()}
		n.flags = strings.Join([]string{
			"-data-dir", n.dir, "-node-name", n.name, "-cluster-peers", strings.Join(peers, ","),
			"-cluster-secret", "s3cret", "-cluster-command-timeout", "3s",
			"-amqp-listen", "127.0.0.1:0", "-http-listen", "127.0.0.1:0", "-stream-listen=", "-prometheus-listen=",
		}, " ")
		nodes[i] = n
	}
	for _, n := range nodes {
		n.start(t)
	}
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	waitFor(t, "n1 to see three running nodes", 20*time.Second, func() bool { return len(n1.runningNodes(t)) == 3 })
	for _, n := range nodes {
		waitFor(t, n.name+"'s default user", 20*time.Second, func() bool {
			code, _ := n.api(t, "GET", "/api/whoami", "")
			return code == 200
		})
	}

	// A user made on n1 with permissions set on n2 logs in on n3.
	if code, body := n1.api(t, "PUT", "/api/users/alice", `{"password":"pw","tags":""}`); code != 201 {
		t.Fatalf("PUT user on n1: %d %s", code, body)
	}
	if code, body := n2.api(t, "PUT", "/api/permissions/%2F/alice", `{"configure":".*","write":".*","read":".*"}`); code != 201 && code != 204 {
		t.Fatalf("PUT permissions on n2: %d %s", code, body)
	}
	var conn *amqp091.Connection
	waitFor(t, "alice to log in on n3", 10*time.Second, func() bool {
		c, err := amqp091.Dial("amqp://alice:pw@" + n3.amqp + "/")
		if err != nil {
			return false
		}
		conn = c
		return true
	})
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDeclare("cx", "topic", true, false, false, false, amqp091.Table{"alternate-exchange": "ae"}); err != nil {
		t.Fatalf("exchange.declare on n3: %v", err)
	}
	conn.Close()
	for _, n := range []*clusterNode{n1, n2} {
		waitFor(t, "exchange cx on "+n.name, 10*time.Second, func() bool {
			code, body := n.api(t, "GET", "/api/exchanges/%2F/cx", "")
			return code == 200 && strings.Contains(body, `"type":"topic"`) && strings.Contains(body, `"alternate-exchange":"ae"`)
		})
	}

	// n3 down: n1 and n2 are a majority.
	n3.kill()
	waitFor(t, "n1 to see n3 down", 15*time.Second, func() bool {
		r := n1.runningNodes(t)
		return len(r) == 2 && !r["n3"]
	})
	if code, body := n1.api(t, "PUT", "/api/vhosts/v2", ""); code != 201 {
		t.Fatalf("PUT vhost v2 with two of three nodes: %d %s", code, body)
	}
	// n2 down too: n1 alone has no majority.
	n2.kill()
	waitFor(t, "n1 to see n2 down", 15*time.Second, func() bool { return !n1.runningNodes(t)["n2"] })
	if code, body := n1.api(t, "PUT", "/api/vhosts/v3", ""); code != 503 {
		t.Fatalf("PUT vhost on a node alone: %d %s, want 503", code, body)
	}

	// Both back: n3 learns what it missed.
	n2.start(t)
	n3.start(t)
	waitFor(t, "vhost v2 on n3", 20*time.Second, func() bool {
		code, _ := n3.api(t, "GET", "/api/vhosts/v2", "")
		return code == 200
	})
	waitFor(t, "exchange cx on n3 after its restart", 10*time.Second, func() bool {
		code, _ := n3.api(t, "GET", "/api/exchanges/%2F/cx", "")
		return code == 200
	})
	c, err := amqp091.Dial("amqp://alice:pw@" + n2.amqp + "/")
	if err != nil {
		t.Fatalf("alice on n2 after its restart: %v", err)
	}
	c.Close()
}

// ackStateCovered scrapes n's Prometheus endpoint for when the last
// write of its queues' ack states that reached the disk (for a
// replicated queue: that a majority holds) began; zero if unknown.
func (n *clusterNode) ackStateCovered(t testing.TB) time.Time {
	if n.prom == "-" {
		t.Fatalf("%s runs without a Prometheus listener", n.name)
	}
	resp, err := http.Get("http://" + n.prom + "/metrics")
	if err != nil {
		return time.Time{}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, "#") || !strings.Contains(l, "ack_state_persisted_timestamp_seconds ") {
			continue
		}
		f := strings.Fields(l)
		var v float64
		if _, err := fmt.Sscan(f[len(f)-1], &v); err == nil {
			return time.Unix(0, int64(v*1e9))
		}
	}
	return time.Time{}
}

// waitAcksDurable waits until node n's ack states written after since
// reached the disk (and a majority, for a replicated queue).
func (n *clusterNode) waitAcksDurable(t testing.TB, since time.Time) {
	t.Helper()
	waitFor(t, n.name+"'s ack state written", 30*time.Second, func() bool { return n.ackStateCovered(t).After(since) })
}
