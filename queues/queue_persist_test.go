package queues

import (
	"maps"
	"os"
	"slices"
	"testing"
	"time"
)

// crashImage copies the broker's data directory as the operating system
// has it, which is what a SIGKILL leaves: pebble's and the logs' unsynced
// buffers in the process are not in it. The broker must be quiet (the
// test waits for the persister first).
func crashImage(t *testing.T, b *Broker) string {
	t.Helper()
	dir := t.TempDir() + "/image"
	if err := os.CopyFS(dir, os.DirFS(b.dataDir)); err != nil {
		t.Fatalf("copy data directory: %v", err)
	}
	return dir
}

// waitPersisted waits, without asking for it, until the persister has
// written everything q changed: the regular, periodic path.
func waitPersisted(t *testing.T, b *Broker, q *Queue) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		done, next := b.persist.PersistedForTest(q)
		if done {
			return
		}
		select {
		case <-next:
		case <-deadline:
			t.Fatal("ack state not persisted after 10 s")
		}
	}
}

// getAll drains q with basic.get (acking nothing).
func getAll(t *testing.T, q *Queue) []got {
	t.Helper()
	var out []got
	for {
		var g got
		ok, err := q.Get(nil, false, func(d *Delivery) {
			g = got{id: d.ID, body: string(d.Body), redelivered: d.Redelivered, count: d.DeliveryCount}
		})
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		out = append(out, g)
	}
}

// Ensure acks reach the disk by themselves, without a close: a crash
// after the persister's regular write loses none of them, and the
// delivered but unacked messages come back redelivered (quorum: with a
// delivery count of 1), while a message published after the restart is
// not redelivered.
func TestPersistAcksWithoutClose(t *testing.T) {
	for _, quorum := range []bool{false, true} {
		t.Run(map[bool]string{false: "classic", true: "quorum"}[quorum], func(t *testing.T) {
			b := openBroker(t, t.TempDir())
			defer b.Close()
			var args map[string]any
			if quorum {
				args = quorumArgs()
			}
			q := declareWith(t, b, "q", true, args)
			publishQ(t, q, true, seqBodies("m", 0, 20)...)
			s := newSink(0)
			consumeQ(t, q, "c", 0, s)
			gs := s.wait(t, 20)
			s.ack(q, gs[:12]...)
			waitPersisted(t, b, q)

			img := crashImage(t, b)
			b2 := openBroker(t, img)
			defer b2.Close()
			q2, err := b2.Queue("/", "q")
			if err != nil {
				t.Fatal(err)
			}
			back := getAll(t, q2)
			if got, want := bodiesOf(back), seqBodies("m", 12, 20); !slices.Equal(got, want) {
				t.Fatalf("after the crash %v, want %v", got, want)
			}
			for _, g := range back {
				if !g.redelivered || (quorum && g.count != 1) {
					t.Fatalf("%s after the crash: redelivered %v count %d", g.body, g.redelivered, g.count)
				}
			}
			publishQ(t, q2, true, "new")
			if g := getAll(t, q2); len(g) != 1 || g[0].body != "new" || g[0].redelivered || g[0].count != 0 {
				t.Fatalf("published after the restart: %+v", g)
			}
		})
	}
}

// Ensure a quorum queue's delivery counts survive a crash exactly: for
// messages held unacked, and for messages requeued while the queue has
// no consumer.
func TestPersistQuorumCounts(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	q := declareWith(t, b, "q", true, quorumArgs())
	publishQ(t, q, true, "a", "b", "c")
	s := newSink(0)
	c := consumeQ(t, q, "c", 0, s)
	gs := s.wait(t, 3)
	a := gs[0]
	for i := 1; i <= 2; i++ { // a: delivered 3 times
		s.settled(1)
		q.Requeue(a.id)
		gs = s.wait(t, 3+i)
		if a = gs[2+i]; a.body != "a" || a.count != uint32(i) {
			t.Fatalf("redelivery %d: %+v", i, a)
		}
	}
	check := func(what string, want map[string]uint32) {
		t.Helper()
		waitPersisted(t, b, q)
		b2 := openBroker(t, crashImage(t, b))
		defer b2.Close()
		q2, _ := b2.Queue("/", "q")
		got := map[string]uint32{}
		for _, g := range getAll(t, q2) {
			if !g.redelivered {
				t.Fatalf("%s: %s not redelivered", what, g.body)
			}
			got[g.body] = g.count
		}
		if !maps.Equal(got, want) {
			t.Fatalf("%s: counts after the crash %v, want %v", what, got, want)
		}
	}
	check("held unacked", map[string]uint32{"a": 3, "b": 1, "c": 1})

	q.Cancel(c)
	q.Requeue(a.id, gs[1].id)
	q.Ack(gs[2].id)
	check("requeued without consumers", map[string]uint32{"a": 3, "b": 1})
}

// Ensure a released delivery (AMQP 1.0 released, RabbitMQ 4.x) does not
// count toward a quorum queue's delivery count or limit, yet the message
// stays redelivered, also across a crash.
func TestPersistQuorumReleased(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	q := declareWith(t, b, "q", true, quorumArgs("x-delivery-limit", int64(1)))
	publishQ(t, q, true, "a", "b")
	s := newSink(0)
	c := consumeQ(t, q, "c", 0, s)
	gs := s.wait(t, 2)
	a := gs[0]
	for i := 1; i <= 4; i++ { // past the limit of 1, uncounted
		s.settled(1)
		q.Release(a.id)
		gs = s.wait(t, 2+i)
		if a = gs[1+i]; a.body != "a" || a.count != 0 || !a.redelivered {
			t.Fatalf("release %d: %+v", i, a)
		}
	}
	s.settled(1)
	q.Requeue(a.id) // counted: 1, within the limit
	gs = s.wait(t, 7)
	if a = gs[6]; a.body != "a" || a.count != 1 {
		t.Fatalf("after a counted return: %+v", a)
	}
	q.Cancel(c)
	q.Release(a.id, gs[1].id)
	waitPersisted(t, b, q)
	b2 := openBroker(t, crashImage(t, b))
	defer b2.Close()
	q2, _ := b2.Queue("/", "q")
	got := map[string]uint32{}
	for _, g := range getAll(t, q2) {
		if !g.redelivered {
			t.Fatalf("%s not redelivered after the crash", g.body)
		}
		got[g.body] = g.count
	}
	if want := map[string]uint32{"a": 1, "b": 0}; !maps.Equal(got, want) {
		t.Fatalf("counts after the crash %v, want %v", got, want)
	}
}

// Ensure a quorum queue redelivers a requeued message only once its new
// count is on disk: a crash right after the redelivery finds it.
func TestPersistQuorumRedeliveryCovered(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	q := declareWith(t, b, "q", true, quorumArgs())
	publishQ(t, q, true, "a")
	s := newSink(0)
	consumeQ(t, q, "c", 0, s)
	g := s.wait(t, 1)[0]
	for i := 1; i <= 3; i++ {
		s.settled(1)
		q.Requeue(g.id)
		g = s.wait(t, 1+i)[i]
		if g.count != uint32(i) {
			t.Fatalf("redelivery %d: count %d", i, g.count)
		}
		// No waiting for the persister: what gated the redelivery is on
		// disk.
		var img string
		b.persist.WithoutWritesForTest(func() { img = crashImage(t, b) }) // let a write in progress finish its file I/O
		b2 := openBroker(t, img)
		q2, _ := b2.Queue("/", "q")
		back := getAll(t, q2)
		b2.Close()
		if len(back) != 1 || back[0].count < uint32(i+1) {
			t.Fatalf("after redelivery %d and a crash: %+v, want a count of at least %d", i, back, i+1)
		}
	}
}

// Ensure the delivered mark's reservation shrinks back once a queue has
// no consumer: after a crash, messages never delivered are not flagged.
func TestPersistReservationShrinks(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	q := declareQ(t, b, "q", true)
	publishQ(t, q, true, seqBodies("m", 0, 10)...)
	s := newSink(0)
	c := consumeQ(t, q, "c", 0, s)
	s.ack(q, s.wait(t, 10)...)
	waitPersisted(t, b, q)
	st := q.StateForTest()
	ahead := st.MarkSafe > st.DeliveredMark
	if !ahead {
		t.Fatal("no reservation ahead while the queue has a consumer")
	}
	q.Cancel(c)
	publishQ(t, q, true, seqBodies("n", 0, 5)...)
	waitPersisted(t, b, q)
	st = q.StateForTest()
	safe, mark := st.MarkSafe, st.DeliveredMark
	if safe != mark {
		t.Fatalf("reservation %d, delivered mark %d: want them equal without consumers", safe, mark)
	}
	b2 := openBroker(t, crashImage(t, b))
	defer b2.Close()
	q2, _ := b2.Queue("/", "q")
	back := getAll(t, q2)
	if got, want := bodiesOf(back), seqBodies("n", 0, 5); !slices.Equal(got, want) {
		t.Fatalf("after the crash %v, want %v", got, want)
	}
	for _, g := range back {
		if g.redelivered {
			t.Fatalf("%s never delivered, redelivered after the crash", g.body)
		}
	}
}

// Ensure a quorum message a crash returns past its delivery limit is
// dead-lettered when the queue starts (reason delivery_limit).
func TestPersistQuorumOverLimitAtRecovery(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	declareQ(t, b, "dlq", true)
	q := declareWith(t, b, "q", true, quorumArgs("x-delivery-limit", int64(1),
		"x-dead-letter-exchange", "", "x-dead-letter-routing-key", "dlq"))
	publishQ(t, q, true, "a", "b")
	s := newSink(0)
	consumeQ(t, q, "c", 0, s)
	gs := s.wait(t, 2)
	s.settled(1)
	q.Requeue(gs[0].id) // a: one return, within the limit
	a := s.wait(t, 3)[2]
	if a.body != "a" || a.count != 1 {
		t.Fatalf("redelivery: %+v", a)
	}
	waitPersisted(t, b, q) // a held: two deliveries; b: one

	b2 := openBroker(t, crashImage(t, b))
	defer b2.Close()
	q2, _ := b2.Queue("/", "q")
	dlq, _ := b2.Queue("/", "dlq")
	waitReady(t, dlq, 1)
	d, _ := getOne(t, dlq, true)
	if d.body != "a" {
		t.Fatalf("dead-lettered after the crash: %q, want a", d.body)
	}
	checkXDeath(t, d.props, wantDeathEntry{count: 1, reason: "delivery_limit", queue: "q", exchange: "ex", keys: []string{"rk"},
		notBefore: time.Now().Add(-time.Minute), notAfter: time.Now().Add(time.Minute)})
	if back := getAll(t, q2); len(back) != 1 || back[0].body != "b" || back[0].count != 1 {
		t.Fatalf("left in the queue: %+v, want b with count 1", back)
	}
}
