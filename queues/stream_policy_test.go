package queues

import (
	"testing"
	"time"

	"github.com/warren-mq/warren/queues/policy"
)

// Ensure a policy's max-length-bytes and max-age apply to existing and new
// streams without a redeclare (the policy wins over the argument for
// streams, as in RabbitMQ), go away when cleared, and survive a restart.
func TestStreamPolicyRetention(t *testing.T) {
	dir := t.TempDir()
	b := openBroker(t, dir)
	if err := b.CreateStream("/", "s1", map[string]string{"max-length-bytes": "5000000"}); err != nil {
		t.Fatal(err)
	}
	retention := func(name string) (int64, time.Duration) {
		t.Helper()
		s, err := b.Stream("/", name)
		if err != nil {
			t.Fatal(err)
		}
		cfg := s.Config()
		return cfg.MaxLengthBytes, cfg.MaxAge
	}
	if n, a := retention("s1"); n != 5000000 || a != 0 {
		t.Fatalf("before the policy: %d %v", n, a)
	}
	if err := b.SetPolicy(policy.Policy{VHost: "/", Name: "ret", Pattern: "^s", ApplyTo: policy.ApplyStreams,
		Definition: map[string]any{"max-length-bytes": 1000000, "max-age": "1h"}}); err != nil {
		t.Fatal(err)
	}
	if n, a := retention("s1"); n != 1000000 || a != time.Hour {
		t.Fatalf("existing stream under the policy: %d %v", n, a)
	}
	if err := b.CreateStream("/", "s2", nil); err != nil {
		t.Fatal(err)
	}
	if n, a := retention("s2"); n != 1000000 || a != time.Hour {
		t.Fatalf("new stream under the policy: %d %v", n, a)
	}
	if err := b.CreateStream("/", "other", map[string]string{"max-age": "2h"}); err != nil {
		t.Fatal(err)
	}
	if n, a := retention("other"); n != 0 || a != 2*time.Hour {
		t.Fatalf("stream the pattern does not match: %d %v", n, a)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openBroker(t, dir)
	defer b.Close()
	if n, a := retention("s2"); n != 1000000 || a != time.Hour {
		t.Fatalf("after restart: %d %v", n, a)
	}
	if err := b.ClearPolicy("/", "ret"); err != nil {
		t.Fatal(err)
	}
	if n, a := retention("s1"); n != 5000000 || a != 0 {
		t.Fatalf("after clearing the policy: %d %v", n, a)
	}
	if n, a := retention("s2"); n != 0 || a != 0 {
		t.Fatalf("after clearing the policy: %d %v", n, a)
	}
}
