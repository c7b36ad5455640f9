package classic

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/segment"
)

// Tests of LogState queues: the ack state written to the queue's own log
// (persist.go), as a replicated quorum queue keeps it.

// lsBroker is the Broker of these tests: no policies, no dead letters.
type lsBroker struct{}

func (lsBroker) Args(string, *Def) func(string) (any, bool) {
	return func(string) (any, bool) { return nil, false }
}
func (lsBroker) RouteDeadLetter(_, _ string, _ *DeadLetter, dst []string) ([]string, error) {
	return dst, nil
}
func (lsBroker) Queue(vhost, name string) (*Queue, error) { return nil, NoQueueError(vhost, name) }
func (lsBroker) Unused(*Queue)                            {}
func (lsBroker) Expired(*Queue)                           {}
func (lsBroker) BodyLog(string) (*osiris.Stream, error)   { return nil, errors.New("no body log") }

// lsPebbleLogger keeps pebble's chatter out of the test output.
type lsPebbleLogger struct{ t *testing.T }

func (lsPebbleLogger) Infof(string, ...any)                {}
func (l lsPebbleLogger) Errorf(format string, args ...any) { l.t.Errorf("pebble: "+format, args...) }
func (l lsPebbleLogger) Fatalf(format string, args ...any) { l.t.Fatalf("pebble: "+format, args...) }

// lsEnv is an Env with its own catalog (pebble) and Persister.
type lsEnv struct {
	env *Env
	db  *pebble.DB
}

func newLSEnv(t *testing.T) *lsEnv {
	t.Helper()
	db, err := pebble.Open(filepath.Join(t.TempDir(), "catalog"), &pebble.Options{Logger: lsPebbleLogger{t}})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	e := &lsEnv{env: &Env{Broker: lsBroker{}, Persister: NewPersister(db, log), Logger: log}, db: db}
	t.Cleanup(func() {
		e.env.Persister.Close()
		db.Close()
	})
	return e
}

// noAckKey fails unless the catalog lacks queue id's ack state.
func (e *lsEnv) noAckKey(t *testing.T, id uint64) {
	t.Helper()
	if _, closer, err := e.db.Get(AckKey(id)); !errors.Is(err, pebble.ErrNotFound) {
		if err == nil {
			closer.Close()
		}
		t.Fatalf("catalog ack state of queue %d: %v, want none", id, err)
	}
}

var lsLogConfig = osiris.Config{MaxSegmentSize: 4 << 10, FilterSize: segment.MinBloomSize, Fsync: osiris.FsyncAlways}

func lsDef() Def {
	return Def{VHost: "/", Name: "lq", ID: 7, Type: TypeQuorum, Durable: true, LogState: true}
}

// newLSQueue creates a LogState quorum queue over a new log in dir.
func newLSQueue(t *testing.T, e *lsEnv, dir string) *Queue {
	t.Helper()
	s, err := osiris.Create(dir, lsLogConfig, osiris.Options{RetentionInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	q := New(e.env, lsDef(), nil, s)
	q.Start()
	return q
}

// recoverLS reopens the log in dir and recovers the queue over it.
func recoverLS(t *testing.T, e *lsEnv, dir string) *Queue {
	t.Helper()
	s, err := osiris.Open(dir, osiris.Options{RetentionInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	q, err := Recover(e.env, lsDef(), s, NoJournalFloor)
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	q.Start()
	return q
}

// shutdown ends q as the broker does at close.
func shutdown(t *testing.T, q *Queue) {
	t.Helper()
	if _, err := q.BeginShutdown(false, false); err != nil {
		t.Fatal(err)
	}
	if err := q.FinishShutdown(false); err != nil {
		t.Fatal(err)
	}
}

func lsPublish(t *testing.T, q *Queue, bodies ...string) {
	t.Helper()
	errs := make(chan error, len(bodies))
	for _, b := range bodies {
		rec := EncodeRecord(nil, &Message{Exchange: "ex", RoutingKey: "rk", Props: []byte{0, 0}, Body: []byte(b), Persistent: true})
		q.Publish(rec, true, func(err error) { errs <- err })
	}
	for range bodies {
		if err := <-errs; err != nil {
			t.Fatalf("Publish: %v", err)
		}
	}
}

// lsGot is a delivery as basic.get saw it.
type lsGot struct {
	id          uint64
	body        string
	redelivered bool
	count       uint32
}

func lsGet(t *testing.T, q *Queue) (lsGot, bool) {
	t.Helper()
	var g lsGot
	ok, err := q.Get(nil, false, func(d *Delivery) {
		g = lsGot{d.ID, string(d.Body), d.Redelivered, d.DeliveryCount}
	})
	if err != nil {
		t.Fatal(err)
	}
	return g, ok
}

// copyLogDir copies the log files in src to a new directory: what the OS
// has of them, as a crash (or a replica's copy) leaves them.
func copyLogDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "copy")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// Ensure a LogState quorum queue's acks and delivery counts survive a
// crash from its log alone: the catalog never holds its ack state; acks
// made before the last state that landed stay acked, the delivered
// unacked messages come back redelivered with counts at least their
// deliveries, and nothing is lost; the same in a copy of the log
// recovered by another Env with an empty catalog, as a promoted replica
// does.
func TestLogStateCrashRecovery(t *testing.T) {
	for _, fresh := range []bool{false, true} {
		t.Run(fmt.Sprintf("fresh=%v", fresh), func(t *testing.T) {
			e := newLSEnv(t)
			dir := filepath.Join(t.TempDir(), "log")
			q := newLSQueue(t, e, dir)
			var bodies []string
			for i := range 20 {
				bodies = append(bodies, fmt.Sprintf("m%d", i))
			}
			lsPublish(t, q, bodies...)
			deliveries := map[string]uint32{}
			var got []lsGot
			for range 10 {
				g, ok := lsGet(t, q)
				if !ok {
					t.Fatal("queue empty")
				}
				deliveries[g.body]++
				got = append(got, g)
			}
			q.Ack(got[0].id, got[1].id, got[2].id, got[3].id)
			for range 2 { // m4 and m5: requeued twice, delivered three times
				q.Requeue(got[4].id, got[5].id)
				for range 2 {
					g, ok := lsGet(t, q)
					if !ok || (g.body != "m4" && g.body != "m5") || !g.redelivered {
						t.Fatalf("after a requeue got %+v (%v)", g, ok)
					}
					deliveries[g.body]++
				}
			}
			e.env.Persister.FlushForTest()
			if ok, _ := e.env.Persister.PersistedForTest(q); !ok {
				t.Fatal("state not landed after a flush")
			}
			if q.log.State() == nil {
				t.Fatal("no state in the log after a flush")
			}
			q.Ack(got[6].id) // after the last landed state: comes back
			e.noAckKey(t, lsDef().ID)

			// The crash: what the OS has of the log now; the queue's
			// final state below goes to the original only.
			var img string
			e.env.Persister.WithoutWritesForTest(func() { img = copyLogDir(t, dir) })
			shutdown(t, q)

			re := e
			if fresh {
				re = newLSEnv(t)
			}
			q2 := recoverLS(t, re, img)
			defer shutdown(t, q2)
			back := map[string]lsGot{}
			for {
				g, ok := lsGet(t, q2)
				if !ok {
					break
				}
				if _, dup := back[g.body]; dup {
					t.Fatalf("%s delivered twice after recovery", g.body)
				}
				back[g.body] = g
			}
			for i, b := range bodies {
				g, ok := back[b]
				switch {
				case i < 4:
					if ok {
						t.Errorf("%s acked before the last landed state, back after recovery", b)
					}
				case !ok:
					t.Errorf("%s lost", b)
				case deliveries[b] > 0 && (!g.redelivered || g.count < deliveries[b]):
					t.Errorf("%s delivered %d times: back with redelivered %v, count %d", b, deliveries[b], g.redelivered, g.count)
				}
			}
			re.noAckKey(t, lsDef().ID)
		})
	}
}

// Ensure a LogState queue's clean close writes its final state to the
// log and the catalog never holds it: after a reopen only the unacked
// messages are back, exactly (no reservation ahead).
func TestLogStateFinalState(t *testing.T) {
	e := newLSEnv(t)
	dir := filepath.Join(t.TempDir(), "log")
	q := newLSQueue(t, e, dir)
	lsPublish(t, q, "a", "b", "c", "d")
	g, _ := lsGet(t, q)
	q.Ack(g.id)
	g2, _ := lsGet(t, q) // b: delivered, not acked
	shutdown(t, q)
	e.noAckKey(t, lsDef().ID)

	q = recoverLS(t, e, dir)
	defer shutdown(t, q)
	var back []lsGot
	for {
		g, ok := lsGet(t, q)
		if !ok {
			break
		}
		back = append(back, g)
	}
	if len(back) != 3 || back[0].body != g2.body || !back[0].redelivered || back[0].count != 1 {
		t.Fatalf("after a clean close: %+v", back)
	}
	for _, g := range back[1:] {
		if g.redelivered || g.count != 0 {
			t.Fatalf("never delivered, back as %+v", g)
		}
	}
}

// Ensure the tracking chunks of a LogState queue's states, written between
// its messages, are settled by the live queue: once every message is
// acked the head passes them and the sweep deletes the old segments.
func TestLogStateSweep(t *testing.T) {
	e := newLSEnv(t)
	q := newLSQueue(t, e, filepath.Join(t.TempDir(), "log"))
	defer shutdown(t, q)
	body := string(make([]byte, 200))
	n := 0
	for range 60 {
		lsPublish(t, q, body, body, body)
		n += 3
		var ids []uint64
		for {
			g, ok := lsGet(t, q)
			if !ok {
				break
			}
			ids = append(ids, g.id)
		}
		q.Ack(ids...)
		e.env.Persister.FlushForTest() // a state chunk after the batch
	}
	// The queue's sweep timer may have deleted segments already.
	if err := q.SweepForTest(); err != nil {
		t.Fatal(err)
	}
	qs, st := q.StateForTest(), q.LogStatsForTest()
	if st.NextOffset <= uint64(n) {
		t.Fatalf("log of %d messages: next offset %d, want tracking chunks among them", n, st.NextOffset)
	}
	if st.Segments > 2 || st.FirstOffset < st.NextOffset/2 {
		t.Fatalf("after acking everything: %d segments from offset %d (head %d, tail %d, log next %d)",
			st.Segments, st.FirstOffset, qs.Head, qs.Tail, st.NextOffset)
	}
	if qs.Head != qs.Tail {
		t.Fatalf("head %d, tail %d: offsets between messages not settled", qs.Head, qs.Tail)
	}
}

// Ensure a LogState queue over a replicated log (a leader and one
// replica, two members) lands its state only once the replica holds it,
// and that the replica's copy, opened as the new leader, recovers the
// queue: acks kept, unacked messages back redelivered with their counts,
// nothing lost, with an empty catalog.
func TestLogStateReplicatedPromotion(t *testing.T) {
	e := newLSEnv(t)
	root := t.TempDir()
	ldir, rdir := filepath.Join(root, "l"), filepath.Join(root, "r")
	member := func(dir string, rp osiris.Replication) *osiris.Stream {
		s, err := osiris.Create(dir, lsLogConfig, osiris.Options{RetentionInterval: -1, Replication: &rp})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ls := member(ldir, osiris.Replication{Role: osiris.RoleLeader, Member: "l", Members: 2, Epoch: 1})
	rs := member(rdir, osiris.Replication{Role: osiris.RoleReplica, Member: "r", Members: 2})
	defer rs.Close()
	a, b := net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = osiris.ServeReplica(ctx, ls, a) }()
	go func() { defer wg.Done(); _ = osiris.Follow(ctx, rs, b) }()
	stopLink := func() { cancel(); a.Close(); b.Close(); wg.Wait() }
	defer stopLink()

	q := New(e.env, lsDef(), nil, ls)
	q.Start()
	lsPublish(t, q, "a", "b", "c", "d", "e", "f")
	var got []lsGot
	for range 4 {
		g, ok := lsGet(t, q)
		if !ok {
			t.Fatal("queue empty")
		}
		got = append(got, g)
	}
	q.Ack(got[0].id) // a
	q.Requeue(got[1].id)
	g, ok := lsGet(t, q) // b again
	if !ok || g.body != "b" || g.count != 1 {
		t.Fatalf("requeued b: %+v (%v)", g, ok)
	}
	e.env.Persister.FlushForTest()
	if ok, _ := e.env.Persister.PersistedForTest(q); !ok {
		t.Fatal("state not landed")
	}
	// Landed means committed: the replica holds the chunk with it.
	want := ls.State()
	if want == nil || !bytes.Equal(rs.State(), want) {
		t.Fatalf("replica state %x, leader's %x", rs.State(), want)
	}
	img := copyLogDir(t, rdir) // the replica's copy, as a crash leaves it
	stopLink()
	// The old leader goes with its log: its final state is not written
	// (no error; the state written last stands).
	ls.Close()
	shutdown(t, q)

	re := newLSEnv(t)
	ps, err := osiris.Open(img, osiris.Options{RetentionInterval: -1,
		Replication: &osiris.Replication{Role: osiris.RoleLeader, Member: "r", Members: 1, Epoch: 2}})
	if err != nil {
		t.Fatal(err)
	}
	q2, err := Recover(re.env, lsDef(), ps, NoJournalFloor)
	if err != nil {
		ps.Close()
		t.Fatal(err)
	}
	q2.Start()
	defer shutdown(t, q2)
	back := map[string]lsGot{}
	for {
		g, ok := lsGet(t, q2)
		if !ok {
			break
		}
		back[g.body] = g
	}
	if _, ok := back["a"]; ok || len(back) != 5 {
		t.Fatalf("after promotion: %+v, want b to f", back)
	}
	for body, n := range map[string]uint32{"b": 2, "c": 1, "d": 1} {
		if g := back[body]; !g.redelivered || g.count < n {
			t.Errorf("%s delivered %d times: back as %+v", body, n, g)
		}
	}
	re.noAckKey(t, lsDef().ID)
}
