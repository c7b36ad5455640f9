package streamproto

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Ensure the RabbitMQ stream JavaScript client (rabbitmq-stream-js-client,
// pinned in nodejs/package.json) can create a stream, publish 100 messages
// with confirms and consume them back in order from first. The test skips
// when node or nodejs/node_modules is missing, except in CI (CI=true),
// where .ci/run installs them with `npm ci` and a skip would hide a gap.
func TestNodeStreamClientSmoke(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		skipUnlessCI(t, "node is not on PATH")
	}
	dir, err := filepath.Abs("nodejs")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "rabbitmq-stream-js-client")); err != nil {
		skipUnlessCI(t, "streamproto/nodejs/node_modules is missing; run `npm ci` in streamproto/nodejs")
	}
	tb := startBroker(t, brokerOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "smoke.js")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"WARREN_STREAM_HOST="+tb.host,
		"WARREN_STREAM_PORT="+strconv.Itoa(tb.port),
		"WARREN_STREAM_NAME=js-smoke",
	)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("node smoke.js did not finish in time:\n%s", out)
	}
	if err != nil {
		t.Fatalf("node smoke.js: %v\n%s", err, out)
	}
	t.Logf("node smoke.js:\n%s", out)
}

// skipUnlessCI skips the test, or fails it in CI.
func skipUnlessCI(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
}
