package queues

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// got is one delivery as a fake sink recorded it.
type got struct {
	tag         string
	id          uint64
	body        string
	exchange    string
	routingKey  string
	redelivered bool
	count       uint32
}

// recorder is the lock and condition shared by a test's fake sinks, so a
// test can wait for a condition over several of them.
type recorder struct {
	mu   sync.Mutex
	cond sync.Cond
}

func newRecorder() *recorder {
	r := &recorder{}
	r.cond.L = &r.mu
	return r
}

// waitFor waits until pred (called with r.mu held) is true.
func (r *recorder) waitFor(t testing.TB, what string, pred func() bool) {
	t.Helper()
	expired := false
	timer := time.AfterFunc(10*time.Second, func() {
		r.mu.Lock()
		expired = true
		r.cond.Broadcast()
		r.mu.Unlock()
	})
	defer timer.Stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	for !pred() {
		if expired {
			t.Fatalf("timed out waiting for %s", what)
		}
		r.cond.Wait()
	}
}

// limitCheck counts outstanding deliveries against a limit (a consumer's
// prefetch or a channel's); guarded by the recorder.
type limitCheck struct {
	limit       int
	outstanding int
	violations  []string
}

func (l *limitCheck) deliver(body string) {
	l.outstanding++
	if l.limit > 0 && l.outstanding > l.limit {
		l.violations = append(l.violations, fmt.Sprintf("%d outstanding, limit %d, at %q", l.outstanding, l.limit, body))
	}
}

// fakeSink records deliveries. It checks that no more than limit are
// outstanding (0: no check), counting out those the test settles through
// ack or settled.
type fakeSink struct {
	r         *recorder
	got       []got
	own       limitCheck
	shared    *limitCheck // a channel limit, shared with other sinks
	cancelled []string
	onDeliver func(d *Delivery) // called without r.mu
}

func newSink(limit int) *fakeSink { return newSinkIn(newRecorder(), limit) }

func newSinkIn(r *recorder, limit int) *fakeSink {
	return &fakeSink{r: r, own: limitCheck{limit: limit}}
}

func (s *fakeSink) Deliver(d *Delivery) {
	s.r.mu.Lock()
	s.got = append(s.got, got{d.ConsumerTag, d.ID, string(d.Body), d.Exchange, d.RoutingKey, d.Redelivered, d.DeliveryCount})
	s.own.deliver(string(d.Body))
	if s.shared != nil {
		s.shared.deliver(string(d.Body))
	}
	s.r.cond.Broadcast()
	fn := s.onDeliver
	s.r.mu.Unlock()
	if fn != nil {
		fn(d)
	}
}

func (s *fakeSink) Cancelled(q *Queue, tag string) {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.cancelled = append(s.cancelled, tag)
	s.r.cond.Broadcast()
}

// n returns the number of deliveries.
func (s *fakeSink) n() int {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	return len(s.got)
}

// deliveries returns a copy of the deliveries.
func (s *fakeSink) deliveries() []got {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	return append([]got(nil), s.got...)
}

// wait waits until the sink has at least n deliveries and returns them.
func (s *fakeSink) wait(t testing.TB, n int) []got {
	t.Helper()
	s.r.waitFor(t, fmt.Sprintf("%d deliveries", n), func() bool { return len(s.got) >= n })
	return s.deliveries()
}

// ack acks deliveries, counting them out first.
func (s *fakeSink) ack(q *Queue, ds ...got) {
	s.settled(len(ds))
	ids := make([]uint64, len(ds))
	for i, d := range ds {
		ids[i] = d.id
	}
	q.Ack(ids...)
}

// settled counts n deliveries out (before the test settles them).
func (s *fakeSink) settled(n int) {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.own.outstanding -= n
	if s.shared != nil {
		s.shared.outstanding -= n
	}
}

func (s *fakeSink) check(t testing.TB) {
	t.Helper()
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	if len(s.own.violations) > 0 {
		t.Fatalf("prefetch exceeded: %v", s.own.violations)
	}
	if s.shared != nil && len(s.shared.violations) > 0 {
		t.Fatalf("channel limit exceeded: %v", s.shared.violations)
	}
}

func bodiesOf(gs []got) []string {
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = g.body
	}
	return out
}

func declareQ(t *testing.T, b *Broker, name string, durable bool) *Queue {
	t.Helper()
	q, _, _, err := b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: name, Durable: durable}})
	if err != nil {
		t.Fatalf("DeclareQueue(%q): %v", name, err)
	}
	return q
}

func testRecord(body string, persistent bool) []byte {
	return EncodeRecord(nil, &Message{Exchange: "ex", RoutingKey: "rk", Props: []byte{0, 0}, Body: []byte(body), Persistent: persistent})
}

// publish publishes the bodies and waits until all are stored.
func publishQ(t testing.TB, q *Queue, persistent bool, bodies ...string) {
	t.Helper()
	errs := make(chan error, len(bodies))
	for _, body := range bodies {
		q.Publish(testRecord(body, persistent), persistent, func(err error) { errs <- err })
	}
	for range bodies {
		if err := <-errs; err != nil {
			t.Fatalf("Publish: %v", err)
		}
	}
}

func seqBodies(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

func consumeQ(t *testing.T, q *Queue, tag string, prefetch int, s *fakeSink) *Consumer {
	t.Helper()
	c, err := q.Consume(ConsumerOptions{Tag: tag, Prefetch: prefetch, Sink: s})
	if err != nil {
		t.Fatalf("Consume: %v", err)
	}
	return c
}

func wantCounts(t *testing.T, q *Queue, ready, consumers int) {
	t.Helper()
	r, c := q.Counts()
	if r != ready || c != consumers {
		t.Fatalf("Counts() = %d ready, %d consumers; want %d, %d", r, c, ready, consumers)
	}
}

func wantQErr(t *testing.T, err error, code int, text string) {
	t.Helper()
	e := AsError(err)
	if e == nil || e.Code != code || e.Text != text {
		t.Fatalf("error %v\nwant %d %q", err, code, text)
	}
}

func segmentCount(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".segment") {
			n++
		}
	}
	return n
}

// testDir returns the directory of q's log.
func (b *Broker) testDir(q *Queue) string { return b.queueDir(q.Def().Durable, q.Def().ID) }

func queueDirs(t *testing.T, b *Broker, sub string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(b.dataDir, sub))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func mkdirAll(dir string) error { return os.MkdirAll(dir, 0o755) }
