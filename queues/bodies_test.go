package queues

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// publishTo routes one message to the named queues of vhost "/" and
// waits for every destination's outcome.
func publishTo(t testing.TB, b *Broker, rec []byte, persistent bool, names ...string) {
	t.Helper()
	var dsts []Destination
	for _, n := range names {
		d, ok := b.Destination("/", n)
		if !ok {
			t.Fatalf("no queue %q", n)
		}
		dsts = append(dsts, d)
	}
	errs := make(chan error, len(dsts))
	Publish(dsts, &Publishing{Record: rec, Persistent: persistent}, func(err error) { errs <- err })
	for range dsts {
		if err := <-errs; err != nil {
			t.Fatalf("publish to %v: %v", names, err)
		}
	}
}

// dirBytes is the size of the segment files in dir.
func dirBytes(t testing.TB, dir string) int64 {
	t.Helper()
	var n int64
	for name, size := range fileSizes(t, dir) {
		if strings.HasSuffix(name, ".segment") {
			n += size
		}
	}
	return n
}

func (b *Broker) testBodyDir(vhost string) string { return bodyLogDir(b.bodiesDir(), vhost) }

// drainAll consumes every ready message of q, acking them, and returns
// their bodies in delivery order.
func drainAll(t *testing.T, q *Queue, n int) []string {
	t.Helper()
	s := newSink(0)
	c := consumeQ(t, q, "drain", 0, s)
	gs := s.wait(t, n)
	s.ack(q, gs...)
	q.Cancel(c)
	return bodiesOf(gs)
}

// Ensure a message routed to several durable queues is stored once:
// each queue's log holds a small reference, every queue delivers every
// message in publish order (with the messages only it got in between),
// a transient queue gets its own copy, a restart keeps everything, and
// the body log's segments go once no queue references them.
func TestFanoutByReference(t *testing.T) {
	dir := t.TempDir()
	open := func() *Broker {
		b, err := Open(dir, Options{QueueSegmentSize: 16 << 10})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := open()
	a := declareQ(t, b, "a", true)
	declareQ(t, b, "b", true)
	if _, _, _, err := b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "c", Durable: true, Args: map[string]any{"x-queue-type": "quorum"}}}); err != nil {
		t.Fatal(err)
	}
	declareQ(t, b, "t", false)

	const n = 400
	body := strings.Repeat("x", 500)
	var wantA, wantAll []string
	for i := range n {
		m := fmt.Sprintf("m%d-%s", i, body)
		publishTo(t, b, testRecord(m, true), true, "a", "b", "c", "t")
		wantA, wantAll = append(wantA, m), append(wantAll, m)
		if i%10 == 0 {
			only := fmt.Sprintf("only-a-%d", i)
			publishTo(t, b, testRecord(only, true), true, "a")
			wantA = append(wantA, only)
		}
	}
	bodies := dirBytes(t, b.testBodyDir("/"))
	if bodies < n*500 {
		t.Fatalf("body log holds %d bytes for %d bodies of 500", bodies, n)
	}
	for _, name := range []string{"b", "c"} {
		q, _ := b.Queue("/", name)
		if got := dirBytes(t, b.testDir(q)); got > bodies/5 {
			t.Fatalf("queue %s log holds %d bytes, bodies %d: not references", name, got, bodies)
		}
	}
	if tq, _ := b.Queue("/", "t"); dirBytes(t, b.testDir(tq)) < n*500 {
		t.Fatal("the transient queue did not get its own copy")
	}
	if got := drainAll(t, a, len(wantA)); !slices.Equal(got, wantA) {
		t.Fatalf("queue a: %d messages, first %.20q; want %d", len(got), got[:min(3, len(got))], len(wantA))
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	// After a restart: b and c still have everything, a is empty.
	b = open()
	defer func() { b.Close() }()
	qa, _ := b.Queue("/", "a")
	qb, _ := b.Queue("/", "b")
	qc, _ := b.Queue("/", "c")
	wantCounts(t, qa, 0, 0)
	wantCounts(t, qb, n, 0)
	if got := drainAll(t, qc, n); !slices.Equal(got, wantAll) {
		t.Fatalf("queue c after restart: %d messages", len(got))
	}
	// b still holds references to every body: nothing goes.
	segs := segmentCount(t, b.testBodyDir("/"))
	if segs < 3 {
		t.Fatalf("body log has %d segments; the test wants several", segs)
	}
	b.ReclaimBodies()
	if got := segmentCount(t, b.testBodyDir("/")); got != segs {
		t.Fatalf("body segments %d -> %d while queue b references them", segs, got)
	}
	// b consumes half: the segments below its oldest reference go.
	s := newSink(0)
	c := consumeQ(t, qb, "half", 0, s)
	gs := s.wait(t, n)
	if !slices.Equal(bodiesOf(gs), wantAll) {
		t.Fatalf("queue b after restart: %d messages", len(gs))
	}
	s.ack(qb, gs[:n/2]...)
	eventually(t, "body segments below queue b's oldest reference deleted", func() bool {
		b.ReclaimBodies()
		return segmentCount(t, b.testBodyDir("/")) < segs
	})
	if got := segmentCount(t, b.testBodyDir("/")); got < 2 {
		t.Fatalf("body segments %d -> %d after half of b was acked", segs, got)
	}
	// Deleting b lets go of the rest but the active segment.
	qb.Cancel(c)
	if _, err := b.DeleteQueue("/", "b", nil, false, false); err != nil {
		t.Fatal(err)
	}
	eventually(t, "every body segment but the active one deleted", func() bool {
		b.ReclaimBodies()
		return segmentCount(t, b.testBodyDir("/")) == 1
	})
}

// fileSizes returns the sizes of the segment and index files in dir.
func fileSizes(t testing.TB, dir string) map[string]int64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".segment") || strings.HasSuffix(e.Name(), ".index") {
			fi, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			out[e.Name()] = fi.Size()
		}
	}
	return out
}

// Ensure references a crash lost are rebuilt from the body log, the
// journal, at the next start: a queue's log cut back to where it was
// before the last fan-outs gets their references again, in order, after
// the messages it kept; the queue that kept them gets no second copy;
// and a checkpoint moves the journal's start past what it covers.
func TestFanoutRebuildsLostReferences(t *testing.T) {
	dir := t.TempDir()
	opts := Options{QueueSegmentSize: 1 << 20, BodyReclaimInterval: -1}
	b, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	q1 := declareQ(t, b, "q1", true)
	declareQ(t, b, "q2", true)
	var want []string
	for i := range 20 {
		m := fmt.Sprintf("early-%d", i)
		publishTo(t, b, testRecord(m, true), true, "q1", "q2")
		want = append(want, m)
	}
	// A message for q1 alone, synced: the cut keeps it.
	publishTo(t, b, testRecord("direct", true), true, "q1")
	wantQ1 := append(append([]string(nil), want...), "direct")
	q1dir := b.testDir(q1)
	kept := fileSizes(t, q1dir)
	for i := range 30 {
		m := fmt.Sprintf("late-%d", i)
		publishTo(t, b, testRecord(m, true), true, "q1", "q2")
		want, wantQ1 = append(want, m), append(wantQ1, m)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// The crash: q1's log never got the last 30 references.
	for name, size := range kept {
		if err := os.Truncate(filepath.Join(q1dir, name), size); err != nil {
			t.Fatal(err)
		}
	}

	b, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { b.Close() }()
	q1, _ = b.Queue("/", "q1")
	q2, _ := b.Queue("/", "q2")
	wantCounts(t, q1, len(wantQ1), 0)
	wantCounts(t, q2, len(want), 0)
	if got := drainAll(t, q1, len(wantQ1)); !slices.Equal(got, wantQ1) {
		t.Fatalf("q1 after the rebuild: %q", got)
	}
	if got := drainAll(t, q2, len(want)); !slices.Equal(got, want) {
		t.Fatalf("q2 after the rebuild: %q", got)
	}

	// A checkpoint covers everything: nothing to rebuild after the next
	// start, whatever the body log holds.
	publishTo(t, b, testRecord("after", true), true, "q1", "q2")
	b.ReclaimBodies()
	var ck bodyCheckpoint
	if err := b.cat.get(bodyCkptKey("/"), &ck); err != nil || ck.From != uint64(len(want)+1) || len(ck.Ends) != 2 {
		t.Fatalf("checkpoint %+v, %v; want from %d and two queues", ck, err, len(want)+1)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	q1, _ = b.Queue("/", "q1")
	wantCounts(t, q1, 1, 0)
}

// Ensure a queue that refuses a fan-out (x-overflow reject-publish) is not
// named by its body, so a rebuild after a crash never gives it what it
// refused, while the queue that took the message gets it back.
func TestFanoutRejectPublishNotRebuilt(t *testing.T) {
	dir := t.TempDir()
	opts := Options{BodyReclaimInterval: -1}
	b, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	full := declareWith(t, b, "full", true, map[string]any{"x-max-length": int64(5), "x-overflow": "reject-publish"})
	other := declareQ(t, b, "other", true)
	before := map[string]map[string]int64{"full": fileSizes(t, b.testDir(full)), "other": fileSizes(t, b.testDir(other))}
	dirs := map[string]string{"full": b.testDir(full), "other": b.testDir(other)}
	rejected := 0
	for i := range 10 {
		d1, _ := b.Destination("/", "full")
		d2, _ := b.Destination("/", "other")
		errs := make(chan error, 2)
		Publish([]Destination{d1, d2}, &Publishing{Record: testRecord(fmt.Sprint("m", i), true), Persistent: true}, func(err error) { errs <- err })
		for range 2 {
			if err := <-errs; err == ErrRejectPublish {
				rejected++
			} else if err != nil {
				t.Fatal(err)
			}
		}
	}
	if rejected != 5 {
		t.Fatalf("%d refusals, want 5", rejected)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// The crash lost every reference.
	for q, sizes := range before {
		for name, size := range sizes {
			if err := os.Truncate(filepath.Join(dirs[q], name), size); err != nil {
				t.Fatal(err)
			}
		}
	}
	b, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	full, _ = b.Queue("/", "full")
	other, _ = b.Queue("/", "other")
	wantCounts(t, full, 5, 0)
	wantCounts(t, other, 10, 0)
	if got := drainAll(t, full, 5); !slices.Equal(got, []string{"m0", "m1", "m2", "m3", "m4"}) {
		t.Fatalf("full after the rebuild: %q", got)
	}
}

// Ensure a queue that took references keeps its log from the last
// journal checkpoint's end on, settled or not, so that a rebuild finds its
// last reference; the next checkpoint lets the settled segments go.
func TestFanoutJournalFloorKeepsSegments(t *testing.T) {
	b, err := Open(t.TempDir(), Options{QueueSegmentSize: 8 << 10, BodyReclaimInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	q1 := declareQ(t, b, "q1", true)
	declareQ(t, b, "q2", true)
	body := strings.Repeat("y", 400)
	for i := range 200 {
		publishTo(t, b, testRecord(fmt.Sprint(i, body), true), true, "q1", "q2")
	}
	segs := segmentCount(t, b.testDir(q1))
	if segs < 2 {
		t.Fatalf("q1 has %d segments; the test wants several", segs)
	}
	drainAll(t, q1, 200)
	// Every message settled, and the persister's sweeps run: no
	// checkpoint yet, so every segment stays.
	time.Sleep(300 * time.Millisecond)
	if got := segmentCount(t, b.testDir(q1)); got != segs {
		t.Fatalf("q1's segments %d -> %d before a checkpoint", segs, got)
	}
	b.ReclaimBodies() // checkpoints, then reclaims
	eventually(t, "q1's settled segments deleted after the checkpoint", func() bool {
		return segmentCount(t, b.testDir(q1)) == 1
	})
}
