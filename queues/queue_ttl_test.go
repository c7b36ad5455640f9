package queues

import (
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/warren-mq/warren/queues/classic"
)

// Ensure messages of a queue with x-message-ttl expire on a timer with no
// consumer and no get: the count drops to 0 by itself and nothing is
// delivered afterwards.
func TestQueueTTLExpiresWithoutConsumer(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	q := declareWith(t, b, "q", false, map[string]any{"x-message-ttl": int32(80)})
	start := time.Now()
	mustPublish(t, q, false, "a", "b", "c")
	if n := readyCount(q); n != 3 && time.Since(start) < 60*time.Millisecond {
		t.Fatalf("ready %d right after publishing, want 3", n)
	}
	armed := q.StateForTest().TTLArmed
	if !armed {
		t.Fatal("no TTL timer armed")
	}
	// The timer expires them: wait without calling Counts.
	eventually(t, "expiry", func() bool {
		return q.StateForTest().Ready == 0
	})
	if el := time.Since(start); el < 80*time.Millisecond {
		t.Fatalf("expired after %v, before the TTL", el)
	}
	if _, ok := getOne(t, q, true); ok {
		t.Fatal("got an expired message")
	}
	// Expired messages are settled: the head moves past them.
	st := q.StateForTest()
	head, tail := st.Head, st.Tail
	if head != tail {
		t.Fatalf("head %d, tail %d: expired messages not settled", head, tail)
	}
}

// Ensure a per-message expiration shorter than the queue's TTL expires
// that message where it is, not only at the head: counts drop at once and
// the consumer never sees it, while the messages around it stay.
func TestMessageTTLExpiresOutOfOrder(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	q := declareWith(t, b, "q", false, map[string]any{"x-message-ttl": int32(60_000)})
	mustPublish(t, q, false, "first")
	if err := publishP(t, q, "short", false, msgProps{expiration: "40", priority: -1}); err != nil {
		t.Fatal(err)
	}
	if err := publishP(t, q, "zero-later", false, msgProps{expiration: "100000", priority: -1}); err != nil {
		t.Fatal(err)
	}
	mustPublish(t, q, false, "last")
	if n := readyCount(q); n != 4 {
		t.Fatalf("ready %d, want 4", n)
	}
	eventually(t, "the short one expiring", func() bool {
		return q.StateForTest().Ready == 3
	})
	if got := drain(t, q); !reflect.DeepEqual(got, []string{"first", "zero-later", "last"}) {
		t.Fatalf("got %v", got)
	}
}

// Ensure the effective TTL is the smaller of the queue's and the
// message's: a message with a longer expiration expires with the queue's.
func TestTTLMinimumWins(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	q := declareWith(t, b, "q", false, map[string]any{"x-message-ttl": int32(50)})
	if err := publishP(t, q, "long", false, msgProps{expiration: "100000", priority: -1}); err != nil {
		t.Fatal(err)
	}
	waitReady(t, q, 0)
}

// Ensure a requeued message keeps its expiry instant: requeued after it
// passed, it expires at once; requeued before, it expires at its original
// instant without a consumer.
func TestTTLRequeueKeepsExpiry(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	q := declareWith(t, b, "q", false, map[string]any{"x-message-ttl": int32(120)})
	mustPublish(t, q, false, "late", "early")
	g1, ok := getOne(t, q, false)
	g2, ok2 := getOne(t, q, false)
	if !ok || !ok2 {
		t.Fatal("get failed")
	}
	start := time.Now()
	q.Requeue(g2.id) // before its expiry
	if n := readyCount(q); n != 1 {
		t.Fatalf("ready %d after the early requeue, want 1", n)
	}
	eventually(t, "the requeued message expiring", func() bool {
		return q.StateForTest().Ready == 0
	})
	if time.Since(start) > 2*time.Second {
		t.Fatal("too slow")
	}
	time.Sleep(20 * time.Millisecond)
	q.Requeue(g1.id) // after its expiry
	if n := readyCount(q); n != 0 {
		t.Fatalf("ready %d after requeueing an expired message", n)
	}
	if _, ok := getOne(t, q, true); ok {
		t.Fatal("got an expired message")
	}
}

// Ensure TTL 0 messages reach a consumer that has room at once, and
// expire otherwise: without consumers at once, and beyond the consumer's
// prefetch.
func TestTTLZero(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	q := declareWith(t, b, "q", false, map[string]any{"x-message-ttl": int32(0)})
	mustPublish(t, q, false, "nobody")
	if n := readyCount(q); n != 0 {
		t.Fatalf("ready %d, want 0: TTL 0 without consumers", n)
	}
	s := newSink(1)
	consumeQ(t, q, "c", 1, s)
	mustPublish(t, q, false, "taken")
	gs := s.wait(t, 1)
	if gs[0].body != "taken" {
		t.Fatalf("delivery %+v", gs[0])
	}
	// The consumer is full: the next ones expire.
	mustPublish(t, q, false, "x", "y")
	waitReady(t, q, 0)
	s.ack(q, gs[0])
	time.Sleep(30 * time.Millisecond)
	if n := s.n(); n != 1 {
		t.Fatalf("%d deliveries, want 1", n)
	}
	// A per-message expiration of 0 behaves the same in a queue without TTL.
	q2 := declareWith(t, b, "q2", false, nil)
	if err := publishP(t, q2, "zero", false, msgProps{expiration: "0", priority: -1}); err != nil {
		t.Fatal(err)
	}
	mustPublish(t, q2, false, "kept")
	if got := drain(t, q2); !reflect.DeepEqual(got, []string{"kept"}) {
		t.Fatalf("got %v", got)
	}
}

// Ensure x-expires deletes a queue unused for that long, and that a
// consumer, a basic.get or a redeclare keeps it.
func TestQueueExpires(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	args := map[string]any{"x-expires": int32(400)}
	q := declareWith(t, b, "q", false, args)
	mustPublish(t, q, false, "m")
	// Used within the period: still there. (Generous margins: a loaded
	// CI machine stretches sleeps.)
	for range 3 {
		time.Sleep(100 * time.Millisecond)
		if _, err := b.Queue("/", "q"); err != nil {
			t.Fatalf("deleted while in use: %v", err)
		}
		if _, _, _, err := b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "q", Args: args}}); err != nil {
			t.Fatal(err)
		}
	}
	s := newSink(0)
	c := consumeQ(t, q, "c", 0, s)
	time.Sleep(200 * time.Millisecond)
	if _, err := b.Queue("/", "q"); err != nil {
		t.Fatal("deleted with a consumer")
	}
	q.Cancel(c)
	start := time.Now()
	eventually(t, "the queue expiring", func() bool {
		_, err := b.Queue("/", "q")
		return err != nil
	})
	if el := time.Since(start); el < 350*time.Millisecond {
		t.Fatalf("deleted %v after the last consumer went", el)
	}
	if _, err := q.Get(nil, true, func(*Delivery) {}); err == nil {
		t.Fatal("get on the expired queue")
	}
}

// Ensure a durable queue's TTL survives a restart with the original
// enqueue instant (the chunk timestamp), and that messages past it are
// gone once the queue opens.
func TestTTLRestart(t *testing.T) {
	dir := t.TempDir()
	b := openBroker(t, dir)
	q := declareWith(t, b, "q", true, map[string]any{"x-message-ttl": int32(400)})
	start := time.Now()
	mustPublish(t, q, true, "a", "b")
	if err := publishP(t, q, "short", true, msgProps{expiration: "1", priority: -1}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openBroker(t, dir)
	defer b.Close()
	q, err := b.Queue("/", "q")
	if err != nil {
		t.Fatal(err)
	}
	if n := readyCount(q); n != 2 && time.Since(start) < 350*time.Millisecond {
		t.Fatalf("ready %d after restart, want 2 (the short one expired)", n)
	}
	armed := q.StateForTest().TTLArmed
	if !armed {
		t.Fatal("no TTL timer after restart")
	}
	eventually(t, "expiry after restart", func() bool {
		return q.StateForTest().Ready == 0
	})
	if el := time.Since(start); el < 390*time.Millisecond || el > 3*time.Second {
		t.Fatalf("expired %v after publishing, want about 400ms", el)
	}
}

// Ensure the expiry bookkeeping of a busy queue is bounded by its ready
// messages, not by its throughput: messages with a long TTL that are
// consumed long before they expire leave no expiry behind for long.
func TestTTLBookkeepingBounded(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	q := declareWith(t, b, "q", false, map[string]any{"x-max-priority": int32(1)})
	publishPrio(t, q, false, "anchor", 0) // stays ready: the queue is never empty
	for i := range 3 * classic.CompactAtForTest {
		exp := strconv.Itoa(600_000 - i) // distinct, decreasing: no two entries merge
		if err := publishP(t, q, "m", false, msgProps{expiration: exp, priority: 1}); err != nil {
			t.Fatal(err)
		}
		if g, ok := getOne(t, q, true); !ok || g.body != "m" {
			t.Fatalf("get %d: %+v %v", i, g, ok)
		}
	}
	n := q.StateForTest().Expiries
	if n > classic.CompactAtForTest+2 {
		t.Fatalf("%d expiries kept for 1 ready message", n)
	}
}
