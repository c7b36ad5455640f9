package queues

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/warren-mq/warren/queues/classic"
)

// Ensure messages published to a queue reach a consumer in order with
// their exchange and routing key, never more than prefetch unacked, and
// that acking frees room until all are delivered and the queue is empty.
func TestQueuePublishConsumeAck(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	q := declareQ(t, b, "q", true)
	want := seqBodies("m", 0, 100)
	publishQ(t, q, true, want...)
	wantCounts(t, q, 100, 0)

	s := newSink(10)
	consumeQ(t, q, "c1", 10, s)
	for acked := 0; acked < 100; {
		gs := s.wait(t, acked+1)
		s.ack(q, gs[acked:]...)
		acked = len(gs)
	}
	gs := s.wait(t, 100)
	s.check(t)
	if !reflect.DeepEqual(bodiesOf(gs), want) {
		t.Fatalf("bodies %v", bodiesOf(gs))
	}
	for _, g := range gs {
		if g.tag != "c1" || g.exchange != "ex" || g.routingKey != "rk" || g.redelivered || g.count != 0 {
			t.Fatalf("delivery %+v", g)
		}
	}
	wantCounts(t, q, 0, 1)
	// Later publishes go straight to the consumer.
	publishQ(t, q, false, "late")
	if g := s.wait(t, 101)[100]; g.body != "late" {
		t.Fatalf("late delivery %+v", g)
	}
}

// Ensure requeued messages come back redelivered, with their delivery
// count, in their original order and before never-delivered ones.
func TestQueueRequeueOrder(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	q := declareQ(t, b, "q", false)
	publishQ(t, q, false, seqBodies("m", 0, 10)...)
	s := newSink(5)
	consumeQ(t, q, "c", 5, s)
	gs := s.wait(t, 5)
	s.settled(2)
	q.Requeue(gs[3].id, gs[1].id) // out of order on purpose
	gs = s.wait(t, 7)
	if got := bodiesOf(gs[5:7]); !reflect.DeepEqual(got, []string{"m1", "m3"}) {
		t.Fatalf("after requeue got %v, want m1 m3 first", got)
	}
	for _, g := range gs[5:7] {
		if !g.redelivered || g.count != 1 {
			t.Fatalf("requeued delivery %+v", g)
		}
	}
	wantCounts(t, q, 5, 1)
	// Requeued again: the count grows.
	s.settled(1)
	q.Requeue(gs[5].id)
	gs = s.wait(t, 8)
	if g := gs[7]; g.body != "m1" || g.count != 2 || !g.redelivered {
		t.Fatalf("second requeue %+v", g)
	}
	// Ack all outstanding; the rest follows in order, not redelivered.
	s.ack(q, gs[0], gs[2], gs[4], gs[6], gs[7])
	gs = s.wait(t, 13)
	if got := bodiesOf(gs[8:13]); !reflect.DeepEqual(got, seqBodies("m", 5, 10)) {
		t.Fatalf("rest %v", got)
	}
	for _, g := range gs[8:] {
		if g.redelivered {
			t.Fatalf("fresh message redelivered: %+v", g)
		}
	}
	s.check(t)
}

// Ensure several consumers are served round robin, each within its own
// prefetch and in queue order.
func TestQueueRoundRobinPrefetch(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	q := declareQ(t, b, "q", false)
	r := newRecorder()
	s1, s2 := newSinkIn(r, 2), newSinkIn(r, 3)
	// Both consumers first: with messages waiting, the first would take
	// some before the second registers.
	consumeQ(t, q, "a", 2, s1)
	consumeQ(t, q, "b", 3, s2)
	publishQ(t, q, false, seqBodies("m", 0, 40)...)
	r.waitFor(t, "prefetch filled", func() bool { return len(s1.got) == 2 && len(s2.got) == 3 })
	wantCounts(t, q, 35, 2)
	g1, g2 := s1.deliveries(), s2.deliveries()
	if g1[0].id != 0 || g2[0].id != 1 || g1[1].id != 2 || g2[1].id != 3 || g2[2].id != 4 {
		t.Fatalf("not round robin: a %v b %v", bodiesOf(g1), bodiesOf(g2))
	}
	acked1, acked2 := 0, 0
	for acked1+acked2 < 40 {
		r.waitFor(t, "more deliveries", func() bool { return len(s1.got) > acked1 || len(s2.got) > acked2 })
		g1, g2 = s1.deliveries(), s2.deliveries()
		s1.ack(q, g1[acked1:]...)
		s2.ack(q, g2[acked2:]...)
		acked1, acked2 = len(g1), len(g2)
	}
	s1.check(t)
	s2.check(t)
	if acked1 < 8 || acked2 < 8 {
		t.Fatalf("unfair split %d / %d", acked1, acked2)
	}
	for _, gs := range [][]got{g1, g2} {
		for i := 1; i < len(gs); i++ {
			if gs[i].id <= gs[i-1].id {
				t.Fatalf("out of order for one consumer: %v", bodiesOf(gs))
			}
		}
	}
	wantCounts(t, q, 0, 2)
}

// Ensure a channel-wide limit is shared by consumers of two queues, that
// an ack on either frees room for both, and that SetLimit widens it.
func TestQueueChannelLimitAcrossQueues(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	q1, q2 := declareQ(t, b, "q1", false), declareQ(t, b, "q2", false)
	publishQ(t, q1, false, seqBodies("a", 0, 10)...)
	publishQ(t, q2, false, seqBodies("b", 0, 10)...)
	ch := &ChannelLimit{Limit: 3}
	r := newRecorder()
	chCheck := &limitCheck{limit: 3}
	s1, s2 := newSinkIn(r, 0), newSinkIn(r, 0)
	s1.shared, s2.shared = chCheck, chCheck
	if _, err := q1.Consume(ConsumerOptions{Tag: "c1", Channel: ch, Sink: s1}); err != nil {
		t.Fatal(err)
	}
	if _, err := q2.Consume(ConsumerOptions{Tag: "c2", Channel: ch, Sink: s2}); err != nil {
		t.Fatal(err)
	}
	total := func() int { return len(s1.got) + len(s2.got) }
	r.waitFor(t, "3 deliveries", func() bool { return total() == 3 })
	if ch.Unacked() != 3 {
		t.Fatalf("channel unacked %d", ch.Unacked())
	}
	// Ack one outstanding delivery of either queue: exactly one more
	// comes, from either (both queues wait on the limit).
	acked := map[uint64]bool{}
	ackOne := func(s *fakeSink, q *Queue) bool {
		for _, g := range s.deliveries() {
			key := g.id<<1 | map[bool]uint64{false: 0, true: 1}[q == q2]
			if !acked[key] {
				acked[key] = true
				s.ack(q, g)
				return true
			}
		}
		return false
	}
	for round := 0; round < 6; round++ {
		n := total()
		if round%2 == 0 && ackOne(s1, q1) || ackOne(s2, q2) || ackOne(s1, q1) {
			r.waitFor(t, "one more delivery", func() bool { return total() == n+1 })
		}
		if ch.Unacked() != 3 {
			t.Fatalf("channel unacked %d, want 3", ch.Unacked())
		}
	}
	s1.check(t)
	ch.SetLimit(0) // unlimited: everything comes
	r.waitFor(t, "all 20", func() bool { return total() == 20 })
	if len(s1.got) != 10 || len(s2.got) != 10 {
		t.Fatalf("got %d and %d", len(s1.got), len(s2.got))
	}
}

// Ensure a no-ack consumer gets everything at once and leaves nothing
// unacked, and that Ack of its ids is a no-op.
func TestQueueNoAck(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	q := declareQ(t, b, "q", true)
	publishQ(t, q, true, seqBodies("m", 0, 50)...)
	s := newSink(0)
	if _, err := q.Consume(ConsumerOptions{Tag: "n", NoAck: true, Prefetch: 1, Sink: s}); err != nil {
		t.Fatal(err)
	}
	gs := s.wait(t, 50)
	if !reflect.DeepEqual(bodiesOf(gs), seqBodies("m", 0, 50)) {
		t.Fatalf("bodies %v", bodiesOf(gs))
	}
	q.Ack(gs[0].id)
	st := q.StateForTest()
	unacked, head := st.Unacked, st.Head
	if unacked != 0 || head != 50 {
		t.Fatalf("unacked %d, head %d", unacked, head)
	}
	wantCounts(t, q, 0, 1)
}

// Ensure basic.get takes one message at a time with the count of those
// left, and that a get's message is acked or requeued like a delivery.
func TestQueueGet(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	q := declareQ(t, b, "q", false)
	get := func(noAck bool) (got, bool) {
		t.Helper()
		var g got
		ok, err := q.Get("conn", noAck, func(d *Delivery) {
			g = got{d.ConsumerTag, d.ID, string(d.Body), d.Exchange, d.RoutingKey, d.Redelivered, d.MessageCount}
		})
		if err != nil {
			t.Fatal(err)
		}
		return g, ok
	}
	if _, ok := get(false); ok {
		t.Fatal("Get from an empty queue")
	}
	publishQ(t, q, false, "a", "b", "c")
	g, ok := get(false)
	if !ok || g.body != "a" || g.count != 2 || g.redelivered {
		t.Fatalf("first get %+v %v (count holds MessageCount)", g, ok)
	}
	q.Requeue(g.id)
	wantCounts(t, q, 3, 0)
	g, _ = get(true)
	if g.body != "a" || !g.redelivered || g.count != 2 {
		t.Fatalf("get after requeue %+v", g)
	}
	g, _ = get(false)
	if g.body != "b" || g.count != 1 {
		t.Fatalf("get %+v", g)
	}
	q.Ack(g.id)
	g, _ = get(true)
	if g.body != "c" || g.count != 0 {
		t.Fatalf("last get %+v", g)
	}
	if _, ok := get(false); ok {
		t.Fatal("Get from an emptied queue")
	}
	unacked := q.StateForTest().Unacked
	if unacked != 0 {
		t.Fatalf("%d unacked", unacked)
	}
	// Get does not count as a consumer for auto-delete, nor does it
	// need an owner on a shared queue; an exclusive one refuses others.
	x, _, _, err := b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "x", Exclusive: true}, Owner: "conn"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = x.Get("other", false, func(*Delivery) {})
	wantQErr(t, err, CodeResourceLocked, "RESOURCE_LOCKED - cannot obtain exclusive access to locked queue 'x' in vhost '/'. "+
		"It could be originally declared on another connection or the exclusive property value does not match that of the original declaration.")
}

// Ensure purge drops the ready messages, requeued ones included, and not
// the unacked ones, which can still be acked or requeued.
func TestQueuePurge(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	q := declareQ(t, b, "q", true)
	publishQ(t, q, true, seqBodies("m", 0, 10)...)
	s := newSink(0)
	c := consumeQ(t, q, "c", 3, s)
	gs := s.wait(t, 3)
	q.Cancel(c)
	q.Requeue(gs[2].id)
	wantCounts(t, q, 8, 0)
	n, err := q.Purge()
	if err != nil || n != 8 {
		t.Fatalf("Purge = %d, %v; want 8", n, err)
	}
	wantCounts(t, q, 0, 0)
	q.Ack(gs[0].id)
	q.Requeue(gs[1].id)
	wantCounts(t, q, 1, 0)
	s2 := newSink(0)
	consumeQ(t, q, "c2", 0, s2)
	if g := s2.wait(t, 1)[0]; g.body != "m1" || !g.redelivered {
		t.Fatalf("after purge %+v", g)
	}
	publishQ(t, q, true, "new")
	if g := s2.wait(t, 2)[1]; g.body != "new" {
		t.Fatalf("after purge %+v", g)
	}
}

// Ensure queue.delete honours if-unused and if-empty with RabbitMQ's
// texts, cancels consumers, returns the ready count and removes the
// files, and that deleting a missing queue is fine.
func TestDeleteQueue(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	q := declareQ(t, b, "q", true)
	publishQ(t, q, true, "a", "b", "c")
	s := newSink(0)
	consumeQ(t, q, "c", 1, s)
	s.wait(t, 1)
	_, err := b.DeleteQueue("/", "q", nil, true, false)
	wantQErr(t, err, CodePreconditionFailed, "PRECONDITION_FAILED - queue 'q' in vhost '/' in use")
	_, err = b.DeleteQueue("/", "q", nil, false, true)
	wantQErr(t, err, CodePreconditionFailed, "PRECONDITION_FAILED - queue 'q' in vhost '/' not empty")
	dir := b.testDir(q)
	n, err := b.DeleteQueue("/", "q", nil, false, false)
	if err != nil || n != 2 {
		t.Fatalf("DeleteQueue = %d, %v; want 2 ready", n, err)
	}
	if s.cancelled == nil || s.cancelled[0] != "c" {
		t.Fatalf("consumer not told: %v", s.cancelled)
	}
	if _, err := b.Queue("/", "q"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Queue after delete: %v", err)
	}
	wantQErr(t, func() error { _, err := b.Queue("/", "q"); return err }(), CodeNotFound, "NOT_FOUND - no queue 'q' in vhost '/'")
	if _, err := q.Purge(); err == nil {
		t.Fatal("Purge of a deleted queue")
	}
	perr := make(chan error, 1)
	q.Publish(testRecord("x", true), true, func(err error) { perr <- err })
	if err := <-perr; err == nil {
		t.Fatal("Publish to a deleted queue succeeded")
	}
	if _, err := q.Consume(ConsumerOptions{Sink: newSink(0)}); err == nil {
		t.Fatal("Consume on a deleted queue")
	}
	if n, err := b.DeleteQueue("/", "q", nil, true, true); n != 0 || err != nil {
		t.Fatalf("delete missing: %d, %v", n, err)
	}
	if ok, _ := b.cat.has(queueKey("/", "q")); ok {
		t.Fatal("catalog entry left")
	}
	if ok, _ := b.cat.has(classic.AckKey(q.Def().ID)); ok {
		t.Fatal("ack state left")
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatal("log directory left")
	}
	// A new queue of the same name starts empty.
	q2 := declareQ(t, b, "q", true)
	wantCounts(t, q2, 0, 0)
}

// Ensure exclusive queues belong to their connection (405 elsewhere, for
// declare, passive declare, consume, get and delete), are not durable,
// and go when the connection closes; and that exclusive consumers keep
// others out (403) as others keep them out.
func TestExclusive(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	type conn struct{ n int }
	a, other := &conn{1}, &conn{2}
	q, _, _, err := b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "x", Exclusive: true, Durable: true}, Owner: a})
	if err != nil {
		t.Fatal(err)
	}
	if q.Def().Durable {
		t.Fatal("exclusive queue is durable")
	}
	locked := "RESOURCE_LOCKED - cannot obtain exclusive access to locked queue 'x' in vhost '/'. " +
		"It could be originally declared on another connection or the exclusive property value does not match that of the original declaration."
	_, _, _, err = b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "x", Exclusive: true}, Owner: other})
	wantQErr(t, err, CodeResourceLocked, locked)
	_, _, _, err = b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "x"}, Owner: a})
	wantQErr(t, err, CodeResourceLocked, locked) // strict: exclusive flag must match
	_, _, _, err = b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "x"}, Passive: true, Owner: other})
	wantQErr(t, err, CodeResourceLocked, locked)
	if _, _, _, err := b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "x"}, Passive: true, Owner: a}); err != nil {
		t.Fatalf("passive by the owner: %v", err)
	}
	if _, _, _, err := b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "x", Exclusive: true, Durable: true}, Owner: a}); err != nil {
		t.Fatalf("redeclare by the owner: %v", err)
	}
	_, err = q.Consume(ConsumerOptions{Tag: "c", Owner: other, Sink: newSink(0)})
	wantQErr(t, err, CodeResourceLocked, locked)
	_, err = b.DeleteQueue("/", "x", other, false, false)
	wantQErr(t, err, CodeResourceLocked, locked)

	// Exclusive consumers.
	shared := declareQ(t, b, "shared", false)
	c1, err := shared.Consume(ConsumerOptions{Tag: "c1", Sink: newSink(0)})
	if err != nil {
		t.Fatal(err)
	}
	inUse := "ACCESS_REFUSED - queue 'shared' in vhost '/' in exclusive use"
	_, err = shared.Consume(ConsumerOptions{Tag: "c2", Exclusive: true, Sink: newSink(0)})
	wantQErr(t, err, CodeAccessRefused, inUse)
	shared.Cancel(c1)
	ex, err := shared.Consume(ConsumerOptions{Tag: "c3", Exclusive: true, Sink: newSink(0)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = shared.Consume(ConsumerOptions{Tag: "c4", Sink: newSink(0)})
	wantQErr(t, err, CodeAccessRefused, inUse)
	shared.Cancel(ex)
	if _, err := shared.Consume(ConsumerOptions{Tag: "c5", Sink: newSink(0)}); err != nil {
		t.Fatalf("consume after the exclusive consumer left: %v", err)
	}

	// The owner's connection closes: its exclusive queues go.
	sink := newSink(0)
	if _, err := q.Consume(ConsumerOptions{Tag: "mine", Owner: a, Sink: sink}); err != nil {
		t.Fatal(err)
	}
	b.OwnerClosed(other)
	if _, err := b.Queue("/", "x"); err != nil {
		t.Fatal("OwnerClosed of another connection deleted the queue")
	}
	b.OwnerClosed(a)
	if _, err := b.Queue("/", "x"); err == nil {
		t.Fatal("exclusive queue survived its connection")
	}
	if _, err := b.Queue("/", "shared"); err != nil {
		t.Fatal("OwnerClosed deleted a shared queue")
	}
	if dirs := queueDirs(t, b, "transient"); len(dirs) != 1 { // "shared" is left
		t.Fatalf("transient dirs %v", dirs)
	}
}

// Ensure redeclares are checked for equivalence with RabbitMQ's texts:
// flags first, then the classic arguments, integer types as one class,
// and absent x-queue-type equal to "classic".
func TestDeclareEquivalence(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	decl := func(name string, durable, autoDelete bool, args map[string]any) error {
		_, _, _, err := b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: name, Durable: durable, AutoDelete: autoDelete, Args: args}})
		return err
	}
	if err := decl("q", true, false, map[string]any{"x-message-ttl": int32(1000), "x-queue-type": "classic", "other": "ignored"}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		durable, autoDelete bool
		args                map[string]any
		want                string // "" for equivalent
	}{
		{true, false, map[string]any{"x-message-ttl": int64(1000)}, ""},
		{true, false, map[string]any{"x-message-ttl": uint16(1000), "x-queue-type": "classic", "unrelated": true}, ""},
		{false, false, map[string]any{"x-message-ttl": int32(1000)},
			"PRECONDITION_FAILED - inequivalent arg 'durable' for queue 'q' in vhost '/': received 'false' but current is 'true'"},
		{true, true, map[string]any{"x-message-ttl": int32(1000)},
			"PRECONDITION_FAILED - inequivalent arg 'auto_delete' for queue 'q' in vhost '/': received 'true' but current is 'false'"},
		{true, false, map[string]any{"x-message-ttl": int32(2000)},
			"PRECONDITION_FAILED - inequivalent arg 'x-message-ttl' for queue 'q' in vhost '/': received '2000' but current is '1000'"},
		{true, false, nil,
			"PRECONDITION_FAILED - inequivalent arg 'x-message-ttl' for queue 'q' in vhost '/': received none but current is the value '1000' of type 'signedint'"},
		{true, false, map[string]any{"x-message-ttl": int32(1000), "x-max-length": int64(5)},
			"PRECONDITION_FAILED - inequivalent arg 'x-max-length' for queue 'q' in vhost '/': received the value '5' of type 'long' but current is none"},
		{true, false, map[string]any{"x-message-ttl": "1000"},
			"PRECONDITION_FAILED - inequivalent arg 'x-message-ttl' for queue 'q' in vhost '/': received '1000' but current is '1000'"},
		{true, false, map[string]any{"x-message-ttl": int32(1000), "x-queue-type": "quorum"},
			"PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'q' in vhost '/': received 'quorum' but current is 'classic'"},
	}
	for i, c := range cases {
		err := decl("q", c.durable, c.autoDelete, c.args)
		if c.want == "" {
			if err != nil {
				t.Fatalf("case %d: %v", i, err)
			}
			continue
		}
		wantQErr(t, err, CodePreconditionFailed, c.want)
	}

	// Absent x-queue-type on one side, "classic" on the other: equal.
	if err := decl("plain", false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := decl("plain", false, false, map[string]any{"x-queue-type": "classic"}); err != nil {
		t.Fatalf("classic vs absent: %v", err)
	}
	wantQErr(t, decl("plain", false, false, map[string]any{"x-queue-type": "stream"}), CodePreconditionFailed,
		"PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'plain' in vhost '/': received the value 'stream' of type 'longstr' but current is none")

	// Creation checks.
	wantQErr(t, decl("amq.x", false, false, nil), CodeAccessRefused, "ACCESS_REFUSED - queue name 'amq.x' contains reserved prefix 'amq.*'")
	wantQErr(t, decl("neg", false, false, map[string]any{"x-max-length": int32(-5)}), CodePreconditionFailed,
		"PRECONDITION_FAILED - invalid arg 'x-max-length' for queue 'neg' in vhost '/': {value_negative,-5}")
	wantQErr(t, decl("str", false, false, map[string]any{"x-max-length": "5"}), CodePreconditionFailed,
		`PRECONDITION_FAILED - invalid arg 'x-max-length' for queue 'str' in vhost '/': "expected integer, got longstr"`)
	if err := decl("qq", true, false, map[string]any{"x-queue-type": "quorum"}); err != nil {
		t.Fatalf("quorum queue: %v", err) // more in queue_quorum_test.go
	}
	_, _, _, err := b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "missing"}, Passive: true})
	wantQErr(t, err, CodeNotFound, "NOT_FOUND - no queue 'missing' in vhost '/'")

	// Arguments are kept with their types.
	q, _ := b.Queue("/", "q")
	if v, ok := q.Def().Args["x-message-ttl"].(int32); !ok || v != 1000 {
		t.Fatalf("args %#v", q.Def().Args)
	}

	// Server-named queues.
	sq, m, c, err := b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/"}})
	if err != nil || m != 0 || c != 0 {
		t.Fatal(err)
	}
	name := sq.Def().Name
	if !strings.HasPrefix(name, "amq.gen-") || len(name) != len("amq.gen-")+22 || strings.ContainsAny(name[8:], "+/=") {
		t.Fatalf("server name %q", name)
	}
	// Redeclaring it by name is fine (the prefix is checked on creation).
	if _, _, _, err := b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: name}}); err != nil {
		t.Fatalf("redeclare %q: %v", name, err)
	}
	// Declare-ok counts.
	publishQ(t, sq, false, "1", "2")
	sink := newSink(0)
	if _, err := sq.Consume(ConsumerOptions{Tag: "c", Prefetch: 1, Sink: sink}); err != nil {
		t.Fatal(err)
	}
	sink.wait(t, 1)
	if _, m, c, err := b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: name}, Passive: true}); err != nil || m != 1 || c != 1 {
		t.Fatalf("passive counts %d %d %v", m, c, err)
	}
}

// Ensure an auto-delete queue goes when its last consumer goes, and not
// before it ever had one (basic.get does not count).
func TestAutoDelete(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	q, _, _, err := b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "ad", AutoDelete: true}})
	if err != nil {
		t.Fatal(err)
	}
	publishQ(t, q, false, "a", "b")
	if _, err := q.Get(nil, true, func(*Delivery) {}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Queue("/", "ad"); err != nil {
		t.Fatal("auto-delete queue went without ever having a consumer")
	}
	c1 := consumeQ(t, q, "c1", 0, newSink(0))
	c2 := consumeQ(t, q, "c2", 0, newSink(0))
	q.Cancel(c1)
	if _, err := b.Queue("/", "ad"); err != nil {
		t.Fatal("auto-delete queue went with a consumer left")
	}
	q.Cancel(c2)
	if _, err := b.Queue("/", "ad"); err == nil {
		t.Fatal("auto-delete queue survived its last consumer")
	}
	if dirs := queueDirs(t, b, "transient"); len(dirs) != 0 {
		t.Fatalf("transient dirs %v", dirs)
	}
	q.Cancel(c2) // idempotent
}
