package amqp

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Ensure Node's amqplib (pinned in nodejs/package.json) declares,
// publishes with confirms, consumes, routes through a topic exchange,
// gets and sees a channel error's code, against Warren. The test skips
// when node or nodejs/node_modules is missing, except in CI (CI=true),
// where .ci/run installs them with `npm ci` and a skip would hide a gap.
func TestNodeAmqplibSmoke(t *testing.T) { runNode(t, "smoke.js") }

// Ensure amqplib closes cleanly with publishes still in flight, matches
// a channel.close to the call that failed, and survives crossing
// channel closes (nodejs/close.js).
func TestNodeAmqplibClose(t *testing.T) { runNode(t, "close.js") }

// runNode runs a script of nodejs/ against a broker of its own.
func runNode(t *testing.T, script string) {
	node, err := exec.LookPath("node")
	if err != nil {
		skipUnlessCI(t, "node is not on PATH")
	}
	dir, err := filepath.Abs("nodejs")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "amqplib")); err != nil {
		skipUnlessCI(t, "amqp/nodejs/node_modules is missing; run `npm ci` in amqp/nodejs")
	}
	tb := startBroker(t, brokerOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "WARREN_AMQP_URL="+tb.url())
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("node %s did not finish in time:\n%s", script, out)
	}
	if err != nil {
		t.Fatalf("node %s: %v\n%s", script, err, out)
	}
	t.Logf("node %s:\n%s", script, out)
}

// skipUnlessCI skips the test, or fails it in CI.
func skipUnlessCI(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
}
