package queues

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warren-mq/warren/queues/policy"
)

// Queue history at the model's level (classic/history.go,
// history_consume.go); end to end in amqp/e2e_history_test.go.

// Ensure bad history arguments are refused at declare with
// RabbitMQ-style 406 texts (those of x-max-age and x-max-length-bytes),
// good ones are taken by classic and quorum queues, refused by streams,
// and part of redeclare equivalence.
func TestHistoryArgsValidation(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	res := "queue 'q' in vhost '/'"
	for _, tc := range []struct {
		args map[string]any
		text string
	}{
		{map[string]any{"x-history-max-age": "7 days"}, "invalid arg 'x-history-max-age' for " + res + ": invalid_max_age"},
		{map[string]any{"x-history-max-age": "0D"}, "invalid arg 'x-history-max-age' for " + res + ": invalid_max_age"},
		{map[string]any{"x-history-max-age": "-1h"}, "invalid arg 'x-history-max-age' for " + res + ": invalid_max_age"},
		{map[string]any{"x-history-max-age": "10x"}, "invalid arg 'x-history-max-age' for " + res + ": invalid_max_age"},
		{map[string]any{"x-history-max-age": int64(60)}, "invalid arg 'x-history-max-age' for " + res + ": {unacceptable_type,long}"},
		{map[string]any{"x-history-max-length-bytes": int64(-1)}, "invalid arg 'x-history-max-length-bytes' for " + res + ": {value_negative,-1}"},
		{map[string]any{"x-history-max-length-bytes": "big"}, "invalid arg 'x-history-max-length-bytes' for " + res + ": \"expected integer, got longstr\""},
		{map[string]any{"x-queue-type": "stream", "x-history-max-length-bytes": int64(1)}, "invalid arg 'x-history-max-length-bytes' for " + res + " of queue type rabbit_stream_queue"},
	} {
		_, _, _, err := b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "q", Durable: true, Args: tc.args}})
		wantQErr(t, err, CodePreconditionFailed, "PRECONDITION_FAILED - "+tc.text)
	}
	for _, age := range []string{"1Y", "1M", "7D", "1h", "30m", "10s"} {
		q := declareWith(t, b, "ok-"+age, true, map[string]any{"x-history-max-age": age})
		if !q.HistoryEnabled() {
			t.Fatalf("x-history-max-age %s: no history", age)
		}
	}
	q := declareWith(t, b, "qq", true, quorumArgs("x-history-max-length-bytes", int64(1<<20)))
	if h, ok := q.History(); !ok || h.MaxBytes != 1<<20 {
		t.Fatalf("quorum history %+v %v", h, ok)
	}
	if q := declareWith(t, b, "plain", true, nil); q.HistoryEnabled() {
		t.Fatal("history without arguments")
	}
	_, _, _, err := b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "qq", Durable: true, Args: quorumArgs("x-history-max-length-bytes", int64(2))}})
	wantQErr(t, err, CodePreconditionFailed, "PRECONDITION_FAILED - inequivalent arg 'x-history-max-length-bytes' for queue 'qq' in vhost '/': received '2' but current is '1048576'")
}

// Ensure the history limits resolve with a policy as documented: the
// smaller byte limit, the shorter age.
func TestHistoryPolicyPrecedence(t *testing.T) {
	pol := policy.Policy{Definition: map[string]any{"history-max-age": "30m", "history-max-length-bytes": int64(500)}}
	for _, tc := range []struct {
		key  string
		args map[string]any
		want any
	}{
		{"history-max-age", map[string]any{"x-history-max-age": "1h"}, "30m"},
		{"history-max-age", map[string]any{"x-history-max-age": "10m"}, "10m"},
		{"history-max-age", map[string]any{"x-history-max-age": "1D"}, "30m"},
		{"history-max-age", nil, "30m"},
		{"history-max-length-bytes", map[string]any{"x-history-max-length-bytes": int64(100)}, int64(100)},
		{"history-max-length-bytes", map[string]any{"x-history-max-length-bytes": int64(1000)}, int64(500)},
	} {
		for _, typ := range []string{policy.KindClassic, policy.KindQuorum} {
			if got, ok := policy.EffectiveQueueArg(typ, tc.key, tc.args, pol); !ok || got != tc.want {
				t.Errorf("%s %s %v: got %v, want %v", typ, tc.key, tc.args, got, tc.want)
			}
		}
	}
}

// waitSegments waits until the queue's log has n segment files.
func waitSegments(t *testing.T, b *Broker, q *Queue, pred func(n int) bool, what string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := segmentCount(t, b.testDir(q))
		if pred(n) {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d segments", what, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// drainQ consumes and acks every ready message of q.
func drainQ(t *testing.T, q *Queue, n int) {
	t.Helper()
	s := newSink(0)
	c := consumeQ(t, q, "drain", 0, s)
	s.ack(q, s.wait(t, n)...)
	c.Stop()
}

// historyBodies reads the history of q from first with a history reader
// until it has n records.
func historyBodies(t *testing.T, b *Broker, q *Queue, n int) []got {
	t.Helper()
	s := newSink(0)
	sub, err := b.Consume("/", q.Def().Name, ConsumerOptions{Tag: "h", Prefetch: n, Sink: s}, map[string]any{"x-stream-offset": "first"})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop()
	return s.wait(t, n)
}

// Ensure a history policy applies to an existing queue at once: with
// it, settled segments stay; without it, they go at the next sweep.
func TestHistoryPolicyOnExistingQueue(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	b.queueReg().segmentSize = 4096
	q := declareQ(t, b, "p.q", true)
	must(t, b.SetPolicy(policy.Policy{VHost: "/", Name: "h", Pattern: "^p\\.", ApplyTo: "queues", Definition: map[string]any{"history-max-length-bytes": 1 << 20}}))
	deadline := time.Now().Add(10 * time.Second)
	for !q.HistoryEnabled() {
		if time.Now().After(deadline) {
			t.Fatal("policy did not enable history")
		}
		time.Sleep(10 * time.Millisecond)
	}
	body := string(make([]byte, 300))
	var bodies []string
	for i := range 60 {
		bodies = append(bodies, string(rune('a'+i%26))+body)
	}
	publishQ(t, q, true, bodies...)
	drainQ(t, q, 60)
	segs := segmentCount(t, b.testDir(q))
	if segs < 3 {
		t.Fatalf("%d segments", segs)
	}
	time.Sleep(300 * time.Millisecond) // sweeps run
	if n := segmentCount(t, b.testDir(q)); n != segs {
		t.Fatalf("history segments went %d -> %d", segs, n)
	}
	gs := historyBodies(t, b, q, 60)
	if !slices.Equal(bodiesOf(gs), bodies) {
		t.Fatal("history differs from what was published")
	}
	must(t, b.ClearPolicy("/", "h"))
	waitSegments(t, b, q, func(n int) bool { return n == 1 }, "after the policy went")
	if q.HistoryEnabled() {
		t.Fatal("history after the policy went")
	}
	_, err := b.Consume("/", "p.q", ConsumerOptions{Tag: "h", Prefetch: 1, Sink: newSink(0)}, map[string]any{"x-stream-offset": "first"})
	wantQErr(t, err, CodePreconditionFailed, "PRECONDITION_FAILED - queue 'p.q' in vhost '/' keeps no history: x-stream-offset needs x-history-max-age or x-history-max-length-bytes (or a policy with history-max-age or history-max-length-bytes)")
}

// Ensure a crash (the data directory as a SIGKILL leaves it) keeps the
// history the limits keep: after recovery the history starts no later
// than before and reads on to the last message, and the queue is
// empty.
func TestHistoryCrash(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	b.queueReg().segmentSize = 4096
	q := declareWith(t, b, "q", true, map[string]any{"x-history-max-length-bytes": int64(12 << 10)})
	body := string(make([]byte, 300))
	var bodies []string
	for i := range 100 {
		bodies = append(bodies, seqBodies("m", i, i+1)[0]+body)
	}
	publishQ(t, q, true, bodies...)
	drainQ(t, q, 100)
	waitPersisted(t, b, q)
	waitSegments(t, b, q, func(n int) bool { return n <= 5 }, "history within 12 KiB")
	h, _ := q.History()
	time.Sleep(300 * time.Millisecond) // quiet: nothing more to truncate
	if h2, _ := q.History(); h2.FirstOffset != h.FirstOffset {
		h = h2
	}

	img := crashImage(t, b)
	b2 := openBroker(t, img)
	defer b2.Close()
	q2, err := b2.Queue("/", "q")
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := q2.Counts(); r != 0 {
		t.Fatalf("%d ready after the crash", r)
	}
	h2, ok := q2.History()
	if !ok || h2.FirstOffset > h.FirstOffset || h2.LastOffset != 99 {
		t.Fatalf("history after the crash %+v, before %+v", h2, h)
	}
	gs := historyBodies(t, b2, q2, int(h2.Messages))
	if want := bodies[h2.FirstOffset:]; !slices.Equal(bodiesOf(gs), want) {
		t.Fatalf("history after the crash: %d messages, want the last %d", len(gs), len(want))
	}
}

// historyBenchSink acks (gives credit back) every 100 deliveries and
// signals when it has seen want.
type historyBenchSink struct {
	ids  []uint64
	n    int
	want int
	done chan struct{}
}

func (s *historyBenchSink) Deliver(d *Delivery) {
	s.ids = append(s.ids, d.ID)
	s.n++
	if len(s.ids) == 100 || s.n == s.want {
		d.Settler().Ack(s.ids...)
		s.ids = s.ids[:0]
	}
	if s.n == s.want {
		close(s.done)
	}
}

func (s *historyBenchSink) Cancelled(*Queue, string) {}

// BenchmarkHistoryRead measures a history reader (prefetch 1000, acking
// every 100) replaying a durable queue's settled history from first.
func BenchmarkHistoryRead(b *testing.B) {
	for _, size := range []int{16, 1024} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			br, err := Open(b.TempDir(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer br.Close()
			q, _, _, err := br.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "bench", Durable: true,
				Args: map[string]any{"x-history-max-age": "1D"}}})
			if err != nil {
				b.Fatal(err)
			}
			rec := EncodeRecord(nil, &Message{Exchange: "", RoutingKey: "bench", Props: []byte{0x10, 0x00, 0x02},
				Body: []byte(strings.Repeat("x", size)), Persistent: true})
			errs := make(chan error, 10_000)
			for i := 0; i < b.N; i++ {
				q.Publish(rec, true, func(err error) { errs <- err })
				if i >= 9_999 {
					if err := <-errs; err != nil {
						b.Fatal(err)
					}
				}
			}
			for i := 0; i < min(b.N, 9_999); i++ {
				if err := <-errs; err != nil {
					b.Fatal(err)
				}
			}
			if n, err := q.Purge(); err != nil || n != b.N { // settled: history only
				b.Fatalf("purge %d, %v", n, err)
			}
			sink := &historyBenchSink{want: b.N, done: make(chan struct{})}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			sub, err := br.Consume("/", "bench", ConsumerOptions{Tag: "h", Prefetch: 1000, Sink: sink}, map[string]any{"x-stream-offset": "first"})
			if err != nil {
				b.Fatal(err)
			}
			<-sink.done
			elapsed := time.Since(start)
			b.StopTimer()
			sub.Stop()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
		})
	}
}
