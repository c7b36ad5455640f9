package queues

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// publishPrio publishes messages with priorities (-1: none).
func publishPrio(t *testing.T, q *Queue, persistent bool, msgs ...any) {
	t.Helper()
	for i := 0; i < len(msgs); i += 2 {
		if err := publishP(t, q, msgs[i].(string), persistent, msgProps{priority: msgs[i+1].(int)}); err != nil {
			t.Fatal(err)
		}
	}
}

// Ensure a priority queue delivers the highest priority first, FIFO
// within a priority, clamps priorities above x-max-priority and takes an
// absent priority as 0.
func TestPriorityOrder(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	q := declareWith(t, b, "q", false, map[string]any{"x-max-priority": int32(5)})
	publishPrio(t, q, false, "p0a", 0, "none", -1, "p3a", 3, "p5a", 5, "p9", 9, "p3b", 3, "p5b", 5, "p0b", 0)
	wantCounts(t, q, 8, 0)
	want := []string{"p5a", "p9", "p5b", "p3a", "p3b", "p0a", "none", "p0b"}
	if got := drain(t, q); !reflect.DeepEqual(got, want) {
		t.Fatalf("order %v\nwant %v", got, want)
	}
	// A consumer sees the same order; a later higher priority overtakes.
	publishPrio(t, q, false, "a1", 1, "a2", 2)
	s := newSink(1)
	consumeQ(t, q, "c", 1, s)
	gs := s.wait(t, 1)
	publishPrio(t, q, false, "a4", 4)
	for n := 1; n < 3; n++ {
		s.ack(q, gs[n-1])
		gs = s.wait(t, n+1)
	}
	if got := bodiesOf(gs); !reflect.DeepEqual(got, []string{"a2", "a4", "a1"}) {
		t.Fatalf("consumer order %v", got)
	}
}

// Ensure requeued messages keep their priority and go before the fresh
// ones of the same priority, in their original order.
func TestPriorityRequeue(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	q := declareWith(t, b, "q", false, map[string]any{"x-max-priority": int32(3)})
	publishPrio(t, q, false, "h1", 3, "h2", 3, "l1", 1)
	g1, _ := getOne(t, q, false)
	g2, _ := getOne(t, q, false)
	publishPrio(t, q, false, "h3", 3, "l2", 1)
	q.Requeue(g2.id, g1.id)
	want := []string{"h1", "h2", "h3", "l1", "l2"}
	if got := drain(t, q); !reflect.DeepEqual(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}

// Ensure x-max-priority 0 makes two levels (RabbitMQ clamps it to 1) and
// that the validation texts are RabbitMQ's.
func TestPriorityArgs(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	q := declareWith(t, b, "q", false, map[string]any{"x-max-priority": int32(0)})
	publishPrio(t, q, false, "low", 0, "high", 7)
	if got := drain(t, q); !reflect.DeepEqual(got, []string{"high", "low"}) {
		t.Fatalf("order %v", got)
	}
	_, _, _, err := b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "bad", Args: map[string]any{"x-max-priority": int32(256)}}})
	wantQErr(t, err, CodePreconditionFailed, "PRECONDITION_FAILED - invalid arg 'x-max-priority' for queue 'bad' in vhost '/': {max_value_exceeded,256}")
	_, _, _, err = b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "bad", Args: map[string]any{"x-max-priority": int32(-1)}}})
	wantQErr(t, err, CodePreconditionFailed, "PRECONDITION_FAILED - invalid arg 'x-max-priority' for queue 'bad' in vhost '/': {value_negative,-1}")
	_, _, _, err = b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "bad", Args: map[string]any{"x-max-priority": "x"}}})
	wantQErr(t, err, CodePreconditionFailed, "PRECONDITION_FAILED - invalid arg 'x-max-priority' for queue 'bad' in vhost '/': \"expected integer, got longstr\"")
}

// Ensure drop-head in a priority queue drops the head, the highest
// priority's oldest message, as RabbitMQ's priority queue does.
func TestPriorityDropHead(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	q := declareWith(t, b, "q", false, map[string]any{"x-max-priority": int32(2), "x-max-length": int32(2)})
	publishPrio(t, q, false, "low", 0, "high", 2, "mid", 1)
	if got := drain(t, q); !reflect.DeepEqual(got, []string{"mid", "low"}) {
		t.Fatalf("kept %v", got)
	}
}

// Ensure a durable priority queue comes back from a restart in priority
// order, with what was delivered before coming back redelivered.
func TestPriorityRestart(t *testing.T) {
	dir := t.TempDir()
	b := openBroker(t, dir)
	q := declareWith(t, b, "q", true, map[string]any{"x-max-priority": int32(9)})
	publishPrio(t, q, true, "a0", 0, "b5", 5, "c9", 9, "d5", 5, "e0", 0)
	g, _ := getOne(t, q, false) // c9, unacked at the restart
	if g.body != "c9" {
		t.Fatalf("head %q", g.body)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openBroker(t, dir)
	defer b.Close()
	q, _ = b.Queue("/", "q")
	wantCounts(t, q, 5, 0)
	var got []string
	for {
		g, ok := getOne(t, q, true)
		if !ok {
			break
		}
		got = append(got, g.body)
		if g.body == "c9" && !g.redelivered {
			t.Fatal("c9 not redelivered")
		}
	}
	if want := []string{"c9", "b5", "d5", "a0", "e0"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}

// Ensure message ids stay exact when publish batches roll the log to new
// segments (tracking chunks land among a batch's messages): a priority
// queue, which places every id by priority, delivers each message once,
// in priority order, across many rolls, live and after a restart.
func TestPrioritySegmentRolls(t *testing.T) {
	dir := t.TempDir()
	b := openBroker(t, dir)
	b.queueReg().segmentSize = 4096
	durable := declareWith(t, b, "durable", true, map[string]any{"x-max-priority": int32(1)})
	live := declareWith(t, b, "live", false, map[string]any{"x-max-priority": int32(1)})
	const n = 400
	errs := make(chan error, 2*n)
	for i := range n { // without waiting: batches of many messages
		p := msgProps{priority: i % 2}
		rec := EncodeRecord(nil, &Message{Exchange: "ex", RoutingKey: "rk", Props: p.encode(),
			Body: []byte(fmt.Sprintf("%03d-%s", i, strings.Repeat("x", 40))), Persistent: true})
		durable.Publish(rec, true, func(err error) { errs <- err })
		live.Publish(rec, true, func(err error) { errs <- err })
	}
	for range 2 * n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []*Queue{durable, live} {
		if segs := segmentCount(t, b.testDir(q)); segs < 5 {
			t.Fatalf("%s: %d segments: no rolls", q.Def().Name, segs)
		}
	}
	check := func(q *Queue) {
		t.Helper()
		got := drain(t, q)
		if len(got) != n {
			t.Fatalf("%s: %d messages, want %d", q.Def().Name, len(got), n)
		}
		for i, body := range got {
			want := 2*i + 1 // the odd ones have priority 1
			if i >= n/2 {
				want = 2 * (i - n/2)
			}
			if body[:3] != fmt.Sprintf("%03d", want) {
				t.Fatalf("%s: message %d is %q, want %03d", q.Def().Name, i, body[:3], want)
			}
		}
	}
	check(live)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openBroker(t, dir)
	defer b.Close()
	durable, _ = b.Queue("/", "durable")
	check(durable)
}
