package queues

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/warren-mq/warren/queues/classic"
)

// Ensure a restart keeps durable queues and their persistent messages,
// drops transient messages and transient queues, redelivers what was
// delivered and not acked (redelivered), and not what was acked.
func TestQueueRestart(t *testing.T) {
	dir := t.TempDir()
	b := openBroker(t, dir)
	q := declareQ(t, b, "dq", true)
	tq := declareQ(t, b, "tq", false)
	publishQ(t, tq, false, "gone")
	// p0 t0 p1 t1 p2 ... : persistent and transient interleaved, so that
	// chunks hold both.
	// Published without waiting, so that chunks mix them.
	errs := make(chan error, 20)
	for i := 0; i < 10; i++ {
		q.Publish(testRecord(fmt.Sprintf("p%d", i), true), true, func(err error) { errs <- err })
		q.Publish(testRecord(fmt.Sprintf("t%d", i), false), false, func(err error) { errs <- err })
	}
	for range 20 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	big := strings.Repeat("x", 3000)
	publishQ(t, q, true, "p-big-"+big)
	wantCounts(t, q, 21, 0)

	// Deliver 6 (p0 t0 p1 t1 p2 t2); ack p0 and t1; p1, p2 stay unacked.
	s := newSink(0)
	c := consumeQ(t, q, "c", 6, s)
	gs := s.wait(t, 6)
	// Cancel before acking: acks make room, and the dispatcher would
	// deliver (and mark as delivered) more before a later cancel.
	q.Cancel(c)
	q.Ack(gs[0].id, gs[3].id)
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	b = openBroker(t, dir)
	defer func() { b.Close() }() // the last one
	if _, err := b.Queue("/", "tq"); err == nil {
		t.Fatal("transient queue survived a restart")
	}
	if dirs := queueDirs(t, b, "transient"); len(dirs) != 0 {
		t.Fatalf("transient dirs left: %v", dirs)
	}
	q, err := b.Queue("/", "dq")
	if err != nil {
		t.Fatal(err)
	}
	if !q.Def().Durable || q.Def().Type != QueueClassic {
		t.Fatalf("def %+v", q.Def())
	}
	// Persistent and not acked: p1..p9 and the big one.
	wantCounts(t, q, 10, 0)
	s = newSink(0)
	consumeQ(t, q, "c", 0, s)
	gs = s.wait(t, 10)
	var bodies []string
	for _, g := range gs {
		bodies = append(bodies, strings.TrimSuffix(g.body, big))
	}
	want := []string{"p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9", "p-big-"}
	if !reflect.DeepEqual(bodies, want) {
		t.Fatalf("after restart %v\nwant %v", bodies, want)
	}
	for _, g := range gs {
		wasDelivered := g.body == "p1" || g.body == "p2"
		if g.redelivered != wasDelivered {
			t.Fatalf("%s: redelivered %v", g.body, g.redelivered)
		}
	}
	// Ack everything; after another restart the queue is empty, and the
	// transient messages stay gone.
	s.ack(q, gs...)
	publishQ(t, q, false, "transient-after")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openBroker(t, dir)
	q, err = b.Queue("/", "dq")
	if err != nil {
		t.Fatal(err)
	}
	wantCounts(t, q, 0, 0)
	publishQ(t, q, true, "fresh")
	s = newSink(0)
	consumeQ(t, q, "c", 0, s)
	if g := s.wait(t, 1)[0]; g.body != "fresh" || g.redelivered {
		t.Fatalf("fresh after restarts: %+v", g)
	}
}

// Ensure a restart after purges and deletes that went through the ack
// state counts right, and that orphan directories are removed.
func TestQueueRestartOrphans(t *testing.T) {
	dir := t.TempDir()
	b := openBroker(t, dir)
	q := declareQ(t, b, "a", true)
	publishQ(t, q, true, seqBodies("m", 0, 5)...)
	if n, _ := q.Purge(); n != 5 {
		t.Fatalf("purged %d", n)
	}
	publishQ(t, q, true, "after")
	declareQ(t, b, "b", true)
	if _, err := b.DeleteQueue("/", "b", nil, false, false); err != nil {
		t.Fatal(err)
	}
	b.Close()
	// A leftover directory nobody owns.
	orphan := b.queueDir(true, 999)
	if err := mkdirAll(orphan); err != nil {
		t.Fatal(err)
	}
	b = openBroker(t, dir)
	defer b.Close()
	q, err := b.Queue("/", "a")
	if err != nil {
		t.Fatal(err)
	}
	wantCounts(t, q, 1, 0)
	if dirs := queueDirs(t, b, "queues"); len(dirs) != 1 {
		t.Fatalf("queue dirs %v", dirs)
	}
}

// Ensure sealed segments wholly below the head are deleted once the
// messages in them are settled, the active one stays, and a restart
// afterwards still counts right.
func TestQueueDeletesSettledSegments(t *testing.T) {
	dir := t.TempDir()
	b := openBroker(t, dir)
	b.queueReg().segmentSize = 4096
	q := declareQ(t, b, "q", true)
	body := strings.Repeat("b", 200)
	var bodies []string
	for i := 0; i < 300; i++ {
		bodies = append(bodies, fmt.Sprintf("%d-%s", i, body))
	}
	publishQ(t, q, true, bodies...)
	before := segmentCount(t, b.testDir(q))
	if before < 10 {
		t.Fatalf("only %d segments", before)
	}
	s := newSink(0)
	consumeQ(t, q, "c", 50, s)
	// Ack the first 200 only.
	for n := 0; n < 200; {
		gs := s.wait(t, n+1)
		hi := min(len(gs), 200)
		s.ack(q, gs[n:hi]...)
		n = hi
	}
	if err := q.SweepForTest(); err != nil {
		t.Fatal(err)
	}
	mid := segmentCount(t, b.testDir(q))
	if mid >= before || mid < 2 {
		t.Fatalf("%d segments after acking 2/3, %d before", mid, before)
	}
	// The first unacked message (the head) is still there.
	if first, head := q.LogStatsForTest().FirstOffset, s.wait(t, 201)[200].id; first > head || first == 0 {
		t.Fatalf("first offset %d, head %d", first, head)
	}
	// The rest.
	for n := 200; n < 300; {
		gs := s.wait(t, n+1)
		s.ack(q, gs[n:]...)
		n = len(gs)
	}
	if err := q.SweepForTest(); err != nil {
		t.Fatal(err)
	}
	if n := segmentCount(t, b.testDir(q)); n != 1 {
		t.Fatalf("%d segments with everything acked, want the active one", n)
	}
	b.Close()
	b = openBroker(t, dir)
	defer b.Close()
	q, _ = b.Queue("/", "q")
	wantCounts(t, q, 0, 0)
	publishQ(t, q, true, "next")
	s = newSink(0)
	consumeQ(t, q, "c", 0, s)
	if g := s.wait(t, 1)[0]; g.body != "next" || g.redelivered {
		t.Fatalf("after truncation and restart: %+v", g)
	}
}

// Ensure concurrent publishers, consumers acking, requeueing and
// rejecting, and basic.get settle every message exactly once (run with
// -race).
func TestQueueConcurrent(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	b.queueReg().segmentSize = 16 << 10
	q := declareQ(t, b, "q", true)
	const publishers, perPublisher = 4, 300
	total := publishers * perPublisher

	var mu sync.Mutex
	settled := map[string]int{}
	settle := func(body string) {
		mu.Lock()
		settled[body]++
		mu.Unlock()
	}
	r := newRecorder()
	var consumers []*Consumer
	for i := 0; i < 3; i++ {
		s := newSinkIn(r, 0)
		n := 0
		s.onDeliver = func(d *Delivery) {
			n++
			body := string(d.Body)
			switch {
			case n%7 == 0 && d.DeliveryCount == 0:
				q.Requeue(d.ID)
			case n%11 == 0:
				settle(body)
				q.Discard(d.ID)
			default:
				settle(body)
				q.Ack(d.ID)
			}
		}
		c, err := q.Consume(ConsumerOptions{Tag: fmt.Sprint("c", i), Prefetch: 5, Sink: s})
		if err != nil {
			t.Fatal(err)
		}
		consumers = append(consumers, c)
	}
	var wg sync.WaitGroup
	for p := 0; p < publishers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			persistent := p%2 == 0
			errs := make(chan error, perPublisher)
			for _, body := range seqBodies(fmt.Sprintf("p%d-", p), 0, perPublisher) {
				q.Publish(testRecord(body, persistent), persistent, func(err error) { errs <- err })
			}
			for range perPublisher {
				if err := <-errs; err != nil {
					t.Errorf("Publish: %v", err)
				}
			}
		}()
	}
	wg.Add(1)
	go func() { // a basic.get poller
		defer wg.Done()
		for i := 0; i < 100; i++ {
			_, _ = q.Get(nil, false, func(d *Delivery) {
				settle(string(d.Body))
				q.Ack(d.ID)
			})
		}
	}()
	wg.Wait()
	r.waitFor(t, "all settled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(settled) == total
	})
	for _, c := range consumers {
		q.Cancel(c)
	}
	mu.Lock()
	for body, n := range settled {
		if n != 1 {
			t.Errorf("%s settled %d times", body, n)
		}
	}
	mu.Unlock()
	wantCounts(t, q, 0, 0)
	st := q.StateForTest()
	unacked, head, tail := st.Unacked, st.Head, st.Tail
	if unacked != 0 || head != tail {
		t.Fatalf("unacked %d, head %d, tail %d", unacked, head, tail)
	}
	var got []string
	for body := range settled {
		got = append(got, body)
	}
	slices.Sort(got)
	if len(got) != total {
		t.Fatalf("%d distinct messages", len(got))
	}
}

// Ensure an idle queue keeps no goroutine and no reader of its own: the
// dispatcher exits with the last consumer, and basic.get's reader closes
// at the next idle sweep. (What remains is the log's: its writer
// goroutine and the active segment's two files.)
func TestIdleQueueHoldsNothing(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	b.queueReg().segmentSize = 4096
	q := declareQ(t, b, "q", true)
	publishQ(t, q, true, seqBodies(strings.Repeat("m", 500), 0, 40)...) // several segments
	s := newSink(20)
	c := consumeQ(t, q, "c", 20, s)
	gs := s.wait(t, 20)
	done := q.StateForTest().DispatcherDone
	q.Cancel(c)
	<-done // the dispatcher exits
	dispatching := q.StateForTest().Dispatching
	if dispatching {
		t.Fatal("dispatcher still marked running")
	}
	s.ack(q, gs[:20]...)
	if ok, err := q.Get(nil, false, func(*Delivery) {}); !ok || err != nil {
		t.Fatalf("Get: %v %v", ok, err)
	}
	if open, _ := q.GetReaderForTest(); !open {
		t.Fatal("Get left no reader to reuse")
	}
	q.SweepForTest() // a Get happened since the last sweep: kept
	q.SweepForTest() // none since: closed
	if open, buffered := q.GetReaderForTest(); open || buffered {
		t.Fatal("basic.get's reader still open when idle")
	}
}

// Ensure acks not yet persisted at a crash are redelivered, marked
// redelivered, and those persisted are not: at least once, never lost.
func TestQueueCrashRedelivers(t *testing.T) {
	dir := t.TempDir()
	b := openBroker(t, dir)
	q := declareQ(t, b, "q", true)
	publishQ(t, q, true, seqBodies("m", 0, 6)...)
	s := newSink(0)
	consumeQ(t, q, "c", 5, s)
	gs := s.wait(t, 5)
	s.ack(q, gs[0], gs[1])
	// The acks made room: m5 goes out too, before the persist, so every
	// message left has been delivered when the state is saved.
	gs = s.wait(t, 6)
	b.persist.FlushForTest()
	id := q.Def().ID
	saved, closer, err := b.cat.db.Get(classic.AckKey(id))
	if err != nil {
		t.Fatal(err)
	}
	saved = append([]byte(nil), saved...)
	closer.Close()
	s.ack(q, gs[2], gs[3]) // these acks "die" with the crash
	b.Close()
	// The crash: the catalog holds the state of the last persist tick.
	cat, err := openCatalog(dir+"/catalog", b.log)
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.db.Set(classic.AckKey(id), saved, nil); err != nil {
		t.Fatal(err)
	}
	cat.close()

	b = openBroker(t, dir)
	defer b.Close()
	q, _ = b.Queue("/", "q")
	wantCounts(t, q, 4, 0)
	s = newSink(0)
	consumeQ(t, q, "c", 0, s)
	gs = s.wait(t, 4)
	if got := bodiesOf(gs); !slices.Equal(got, []string{"m2", "m3", "m4", "m5"}) {
		t.Fatalf("after crash %v", got)
	}
	for _, g := range gs {
		if !g.redelivered {
			t.Fatalf("%s not redelivered after the crash", g.body)
		}
	}
}

// Ensure deleting a vhost's queues deletes them all, exclusive ones too.
func TestDeleteVHostQueues(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	if err := b.AddVHost("v"); err != nil {
		t.Fatal(err)
	}
	for i, excl := range []bool{false, true, false} {
		if _, _, _, err := b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "v", Name: fmt.Sprint("q", i), Durable: true, Exclusive: excl}, Owner: "conn"}); err != nil {
			t.Fatal(err)
		}
	}
	declareQ(t, b, "stays", true)
	if err := b.deleteVHostQueues("v"); err != nil {
		t.Fatal(err)
	}
	if qs := b.Queues("v"); len(qs) != 0 {
		t.Fatalf("%d queues left in v", len(qs))
	}
	if qs := b.Queues("/"); len(qs) != 1 {
		t.Fatalf("%d queues in /", len(qs))
	}
}
