package queues

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Ensure x-max-length with the default drop-head keeps the newest
// messages, counting ready messages only (unacked ones do not count).
func TestMaxLengthDropHead(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	q := declareWith(t, b, "q", false, map[string]any{"x-max-length": int32(3)})
	mustPublish(t, q, false, "m1", "m2", "m3", "m4", "m5")
	wantCounts(t, q, 3, 0)
	g, _ := getOne(t, q, false) // m3, unacked: no longer counted
	if g.body != "m3" {
		t.Fatalf("head %q, want m3", g.body)
	}
	mustPublish(t, q, false, "m6")
	wantCounts(t, q, 3, 0)
	// A requeue goes to the head, and the head is what drop-head drops.
	q.Requeue(g.id)
	if got := drain(t, q); !reflect.DeepEqual(got, []string{"m4", "m5", "m6"}) {
		t.Fatalf("got %v", got)
	}
}

// Ensure x-max-length-bytes counts the body bytes of ready messages.
func TestMaxLengthBytes(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	q := declareWith(t, b, "q", false, map[string]any{"x-max-length-bytes": int64(25)})
	ten := func(c string) string { return strings.Repeat(c, 10) }
	mustPublish(t, q, false, ten("a"), ten("b"), ten("c"))
	wantCounts(t, q, 2, 0)
	mustPublish(t, q, false, "12345")
	wantCounts(t, q, 3, 0) // 25 bytes
	mustPublish(t, q, false, "x")
	if got := drain(t, q); !reflect.DeepEqual(got, []string{ten("c"), "12345", "x"}) {
		t.Fatalf("got %v", got)
	}
	rb := q.StateForTest().ReadyBytes
	if rb != 0 {
		t.Fatalf("ready bytes %d after draining", rb)
	}
	// A message bigger than the limit is dropped itself.
	mustPublish(t, q, false, strings.Repeat("z", 26))
	wantCounts(t, q, 0, 0)
}

// Ensure x-overflow reject-publish refuses publishes beyond the limit with
// ErrRejectPublish, counting publishes in flight and not unacked ones.
func TestRejectPublish(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	q := declareWith(t, b, "q", false, map[string]any{"x-max-length": int32(2), "x-overflow": "reject-publish"})
	mustPublish(t, q, false, "m1", "m2")
	if err := publishP(t, q, "m3", false, noProps()); !errors.Is(err, ErrRejectPublish) {
		t.Fatalf("publish beyond the limit: %v", err)
	}
	wantCounts(t, q, 2, 0)
	g, _ := getOne(t, q, false)
	mustPublish(t, q, false, "m4")
	if err := publishP(t, q, "m5", false, noProps()); !errors.Is(err, ErrRejectPublish) {
		t.Fatalf("publish beyond the limit: %v", err)
	}
	// Concurrent publishes cannot overshoot: 10 at once to a queue with
	// room for 1 more after an ack... none fit now.
	q.Ack(g.id)
	errs := make(chan error, 10)
	for i := range 10 {
		q.Publish(testRecord(string(rune('a'+i)), false), false, func(err error) { errs <- err })
	}
	refused := 0
	for range 10 {
		if err := <-errs; errors.Is(err, ErrRejectPublish) {
			refused++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if refused != 10 {
		t.Fatalf("%d of 10 refused, want all", refused)
	}
	if got := drain(t, q); !reflect.DeepEqual(got, []string{"m2", "m4"}) {
		t.Fatalf("got %v", got)
	}
	pend := q.StateForTest().PendingPublishes
	if pend != 0 {
		t.Fatalf("%d publishes still pending", pend)
	}
}

// Ensure reject-publish-dlx refuses the publish and dead-letters it with
// reason maxlen.
func TestRejectPublishDLX(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	dead := declareWith(t, b, "dead", false, nil)
	q := declareWith(t, b, "q", false, map[string]any{"x-max-length": int32(1), "x-overflow": "reject-publish-dlx",
		"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dead"})
	mustPublish(t, q, false, "kept")
	if err := publishP(t, q, "refused", false, noProps()); !errors.Is(err, ErrRejectPublish) {
		t.Fatalf("publish beyond the limit: %v", err)
	}
	waitReady(t, dead, 1)
	d, _ := getOne(t, dead, true)
	if d.body != "refused" {
		t.Fatalf("dead-lettered %q", d.body)
	}
	checkXDeath(t, d.props, wantDeathEntry{count: 1, reason: "maxlen", queue: "q", exchange: "ex", keys: []string{"rk"}})
	if got := drain(t, q); !reflect.DeepEqual(got, []string{"kept"}) {
		t.Fatalf("got %v", got)
	}
}

// Ensure a policy applies limits and TTL to an existing queue without a
// redeclare, with RabbitMQ's precedence (the smaller of argument and
// policy), and that clearing it lifts them.
func TestQueuePolicyLimits(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	q := declareWith(t, b, "pq", false, map[string]any{"x-max-length": int32(5)})
	mustPublish(t, q, false, "m1", "m2", "m3", "m4")
	wantCounts(t, q, 4, 0)
	setPolicy(t, b, "lim", "^pq$", "queues", 0, map[string]any{"max-length": 2})
	wantCounts(t, q, 2, 0) // dropped at once
	setPolicy(t, b, "lim", "^pq$", "queues", 0, map[string]any{"max-length": 10, "message-ttl": 30})
	mustPublish(t, q, false, "m5", "m6", "m7", "m8")
	// The argument (5) is smaller than the policy (10): m3 was dropped.
	wantCounts(t, q, 5, 0)
	waitReady(t, q, 1) // m5..m8, published under the TTL, expire; m4 stays
	if err := b.ClearPolicy("/", "lim"); err != nil {
		t.Fatal(err)
	}
	mustPublish(t, q, false, "n1")
	time.Sleep(50 * time.Millisecond) // no TTL any more
	if got := drain(t, q); !reflect.DeepEqual(got, []string{"m4", "n1"}) {
		t.Fatalf("got %v", got)
	}
}
