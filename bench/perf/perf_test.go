package perf

import (
	"bytes"
	"flag"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// Ensure every bucket's bounds contain the values mapped to it, buckets are
// contiguous, and a bucket is at most 1/32 of its lower bound wide.
func TestHistogramBuckets(t *testing.T) {
	prevHi := int64(-1)
	for b := range numBuckets - 1 {
		lo, hi := bucketBounds(b)
		if lo != prevHi+1 {
			t.Fatalf("bucket %d starts at %d, previous ended at %d", b, lo, prevHi)
		}
		if bucketOf(lo) != b || bucketOf(hi) != b {
			t.Fatalf("bucket %d [%d, %d]: bucketOf(lo) %d, bucketOf(hi) %d", b, lo, hi, bucketOf(lo), bucketOf(hi))
		}
		if lo >= subBuckets && float64(hi-lo+1)/float64(lo) > 1.0/subBuckets {
			t.Fatalf("bucket %d [%d, %d] is too wide", b, lo, hi)
		}
		prevHi = hi
		if hi > 1<<62 {
			break
		}
	}
	if got := bucketOf(-5); got != 0 {
		t.Errorf("bucketOf(-5) = %d, want 0", got)
	}
}

// Ensure quantiles are within the bucket precision of the exact ones.
// Ensure latencyRun records the same counts as Record, per bucket.
func TestLatencyRun(t *testing.T) {
	var want, got Histogram
	run := latencyRun{h: &got}
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 10_000 {
		d := time.Duration(r.IntN(5)) * time.Millisecond // runs of equal buckets, and changes
		if i%100 < 50 {
			d = 3 * time.Millisecond
		}
		want.Record(d)
		run.record(int64(d))
		if i%333 == 0 {
			run.flush()
		}
	}
	// Values at and around bucket bounds, rising slowly as a replay's
	// latencies do, and negative ones (a clock step), which count as 0.
	for b := 0; b < 40*subBuckets; b += 7 {
		lo, hi := bucketBounds(b)
		for _, ns := range []int64{lo - 1, lo, lo, hi, hi, hi + 1, -lo - 1} {
			want.Record(time.Duration(ns))
			run.record(ns)
		}
	}
	run.flush()
	if w, g := want.Snapshot(), got.Snapshot(); *w != *g {
		t.Errorf("latencyRun counts %d in all, Record %d; the buckets differ", g.Count(), w.Count())
	}
}

func TestHistogramQuantiles(t *testing.T) {
	var h Histogram
	r := rand.New(rand.NewPCG(1, 2))
	var xs []time.Duration
	for range 100_000 {
		d := time.Duration(r.ExpFloat64() * float64(2*time.Millisecond))
		xs = append(xs, d)
		h.Record(d)
	}
	slices.Sort(xs)
	s := h.Snapshot()
	if s.Count() != uint64(len(xs)) {
		t.Fatalf("count %d, want %d", s.Count(), len(xs))
	}
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		exact := xs[int(q*float64(len(xs)))-1]
		got := s.Quantile(q)
		if rel := float64(got-exact) / float64(exact); rel > 0.02 || rel < -0.02 {
			t.Errorf("q%v: got %v, exact %v (%.1f%%)", q, got, exact, rel*100)
		}
	}
	if got := s.Quantile(1); got < xs[len(xs)-1] {
		t.Errorf("max: got %v < %v", got, xs[len(xs)-1])
	}
	// Sub gives what was recorded in between.
	h.Record(time.Second)
	d := h.Snapshot().Sub(s)
	if d.Count() != 1 || d.Quantile(0.5) < 990*time.Millisecond || d.Quantile(0.5) > 1010*time.Millisecond {
		t.Errorf("interval: count %d p50 %v, want 1 and about 1s", d.Count(), d.Quantile(0.5))
	}
	if (&HistogramSnapshot{}).Quantile(0.5) != 0 {
		t.Error("empty histogram: want 0")
	}
}

// Ensure the limiter holds the rate, batches what is due, forgets a long
// stall instead of bursting, and never waits when unlimited.
func TestLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimiter(1000) // 1 ms apart
		start := time.Now()
		got := 0
		for got < 500 {
			n, err := l.Acquire(t.Context(), 1)
			if err != nil {
				t.Fatal(err)
			}
			got += n
		}
		if el := time.Since(start); el < 499*time.Millisecond || el > 501*time.Millisecond {
			t.Errorf("500 messages at 1000/s took %v, want 499-501ms", el)
		}
		// After 10 ms idle, 10 messages are due at once (up to max).
		time.Sleep(10 * time.Millisecond)
		if n, _ := l.Acquire(t.Context(), 100); n != 10 && n != 11 {
			t.Errorf("after 10ms: %d due, want 10 or 11", n)
		}
		if n, _ := l.Acquire(t.Context(), 3); n != 1 {
			t.Errorf("right after: %d due, want 1", n)
		}
		// After a stall longer than maxDebt, no burst.
		time.Sleep(5 * time.Second)
		if n, _ := l.Acquire(t.Context(), 10_000); n > 1 {
			t.Errorf("after a 5s stall: %d due at once, want 1", n)
		}
	})
	var none *Limiter
	if n, err := none.Acquire(t.Context(), 7); n != 7 || err != nil || NewLimiter(0) != nil {
		t.Errorf("unlimited: got %d, %v", n, err)
	}
}

// Ensure the stream and AMQP flags parse into the configs, with defaults,
// and that invalid combinations are refused.
func TestFlagsAndValidation(t *testing.T) {
	var sc StreamConfig
	fs := flag.NewFlagSet("stream", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	BindStreamFlags(fs, &sc)
	err := fs.Parse(strings.Fields("-addr 127.0.0.1:15552 -producers 2 -consumers 0 -count 500 -rate 100 " +
		"-sub-entry 10 -compression zstd -offset offset:42 -producer-name p -label scenario=x,target=warren -t0 1000"))
	if err != nil {
		t.Fatal(err)
	}
	FinishStreamFlags(&sc)
	c := sc.ensureDefaults()
	if err := c.validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	if c.Producers != 2 || c.Consumers != 0 || c.Count != 500 || c.Rate != 100 || c.SubEntrySize != 10 ||
		c.Compression != "zstd" || c.ProducerName != "p" || !c.Recreate || !c.Keep || c.BatchSize != 100 ||
		c.ConfirmWindow != DefaultStreamConfirmWindow || c.Labels["target"] != "warren" || c.T0.UnixNano() != 1000 {
		t.Errorf("parsed %+v", c)
	}
	bad := []func(*StreamConfig){
		func(c *StreamConfig) { c.Addr = "nohost" },
		func(c *StreamConfig) { c.Compression = "gzip"; c.SubEntrySize = 1 },
		func(c *StreamConfig) { c.FilterValues = []string{"a"}; c.SubEntrySize = 5 },
		func(c *StreamConfig) { c.Offset = "middle" },
		func(c *StreamConfig) { c.Count, c.Duration = 0, 0 },
		func(c *StreamConfig) { c.Producers, c.Consumers = 0, 0 },
	}
	for i, f := range bad {
		b := c
		f(&b)
		if err := b.ensureDefaults().validate(); err == nil {
			t.Errorf("bad config %d accepted", i)
		}
	}
	for _, s := range []string{"first", "last", "next", "offset:0", "timestamp:1700000000000"} {
		if _, err := ParseOffset(s); err != nil {
			t.Errorf("ParseOffset(%q): %v", s, err)
		}
	}
	for _, s := range Compressions {
		if _, err := ParseCompression(s); err != nil {
			t.Errorf("ParseCompression(%q): %v", s, err)
		}
	}

	var ac AMQPConfig
	fs = flag.NewFlagSet("amqp", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	BindAMQPFlags(fs, &ac)
	if err := fs.Parse(strings.Fields("-queues 10 -consumers 1 -confirm 500 -persistent -multi-ack-every 5000 -prefetch 100 -duration 2s")); err != nil {
		t.Fatal(err)
	}
	a := ac.ensureDefaults()
	if err := a.validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	if a.Consumers != 10 || a.MultiAckEvery != 100 || !a.Persistent || a.ConfirmWindow != 500 || a.QueueType != QueueClassic {
		t.Errorf("parsed %+v", a)
	}
	a.QueueType, a.AutoAck = QueueStream, true
	if err := a.validate(); err == nil {
		t.Error("stream queue with autoack accepted")
	}
	if _, err := ParseLabels("novalue"); err == nil {
		t.Error("label without = accepted")
	}
}

// Ensure Report prints medians per target and baseline/other ratios.
func TestReport(t *testing.T) {
	in := `{"labels":{"scenario":"pub","target":"warren"},"metrics":{"publish_rate":300}}
{"labels":{"scenario":"pub","target":"rabbitmq"},"metrics":{"publish_rate":100}}
not json is skipped only when it does not start with a brace
{"labels":{"scenario":"pub","target":"warren"},"metrics":{"publish_rate":100}}
{"labels":{"scenario":"pub","target":"rabbitmq"},"metrics":{"publish_rate":50}}
{"labels":{"scenario":"pub","target":"warren"},"metrics":{"publish_rate":200}}
{"labels":{"scenario":"pub","target":"rabbitmq"},"metrics":{"publish_rate":150}}
`
	recs, err := ReadRecords(strings.NewReader(in))
	if err != nil || len(recs) != 6 {
		t.Fatalf("ReadRecords: %d records, %v", len(recs), err)
	}
	var out bytes.Buffer
	if err := Report(&out, recs, "warren"); err != nil {
		t.Fatal(err)
	}
	want := "| publish_rate | 200.0 (n=3) | 100.0 (n=3) | 2.00x |"
	if !strings.Contains(out.String(), want) {
		t.Errorf("report:\n%s\nwant a line %q", out.String(), want)
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{3, 1}, 2},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		in := slices.Clone(tc.in)
		if got := median(in); got != tc.want {
			t.Errorf("median(%v): got %v, want %v", tc.in, got, tc.want)
		}
		if !slices.Equal(in, tc.in) {
			t.Errorf("median(%v) reordered its input to %v", tc.in, in)
		}
	}
}
