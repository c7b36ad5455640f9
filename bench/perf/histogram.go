package perf

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// Histogram layout: values below 2^subBits nanoseconds get a bucket each;
// above, every power of two is split into 2^subBits equal buckets, so a
// bucket's width is at most 1/2^subBits of its lower bound (3.1%).
const (
	subBits    = 5
	subBuckets = 1 << subBits
	numBuckets = (64 - subBits + 1) * subBuckets
)

// Histogram counts durations in log-linear buckets. Record is safe for
// concurrent use and does not allocate; Snapshot copies the counts.
type Histogram struct {
	counts [numBuckets]atomic.Uint64
}

// bucketOf returns the bucket of a duration in nanoseconds (negative
// values count as zero).
func bucketOf(ns int64) int {
	if ns < subBuckets {
		return int(max(ns, 0))
	}
	e := bits.Len64(uint64(ns)) - 1 - subBits // ns >> e is in [32, 64)
	return (e+1)<<subBits + int(ns>>e) - subBuckets
}

// bucketBounds returns the smallest and largest value of bucket b.
func bucketBounds(b int) (lo, hi int64) {
	if b < subBuckets {
		return int64(b), int64(b)
	}
	e := b>>subBits - 1
	m := int64(b&(subBuckets-1) + subBuckets)
	lo = m << e
	return lo, lo + 1<<e - 1
}

// Record counts one duration.
func (h *Histogram) Record(d time.Duration) {
	h.counts[bucketOf(int64(d))].Add(1)
}

// latencyRun records latencies measured against one time with one
// atomic add per run of them in the same bucket rather than one per
// message: a chunk's messages were sent close together, so a chunk is
// a run or two. Used by one goroutine; flush before reading h.
type latencyRun struct {
	h      *Histogram
	bucket int
	n      uint64
	lo, hi int64 // bucket's bounds while n > 0
}

// record adds a latency of ns nanoseconds. A value in the run's bucket
// costs two comparisons.
func (r *latencyRun) record(ns int64) {
	if r.n > 0 && ns >= r.lo && ns <= r.hi {
		r.n++
		return
	}
	r.start(ns)
}

// start ends the run and starts one with ns.
func (r *latencyRun) start(ns int64) {
	r.flush()
	r.bucket = bucketOf(ns)
	r.lo, r.hi = bucketBounds(r.bucket)
	r.n = 1
}

// flush adds the run so far to the histogram.
func (r *latencyRun) flush() {
	if r.n > 0 {
		r.h.counts[r.bucket].Add(r.n)
		r.n = 0
	}
}

// Snapshot returns a copy of the counts so far.
func (h *Histogram) Snapshot() *HistogramSnapshot {
	s := &HistogramSnapshot{}
	for i := range h.counts {
		c := h.counts[i].Load()
		s.counts[i] = c
		s.total += c
	}
	return s
}

// HistogramSnapshot is a copy of a Histogram's counts.
type HistogramSnapshot struct {
	counts [numBuckets]uint64
	total  uint64
}

// Count returns the number of durations recorded.
func (s *HistogramSnapshot) Count() uint64 { return s.total }

// Sub returns the durations recorded in s but not in older, an earlier
// snapshot of the same Histogram: what arrived in between.
func (s *HistogramSnapshot) Sub(older *HistogramSnapshot) *HistogramSnapshot {
	d := &HistogramSnapshot{}
	for i := range s.counts {
		d.counts[i] = s.counts[i] - older.counts[i]
		d.total += d.counts[i]
	}
	return d
}

// Quantile returns the q-quantile (0 < q <= 1) by nearest rank, as the
// midpoint of its bucket (within 1.6% of the exact value), or 0 when
// nothing was recorded. Quantile(1) is the upper bound of the largest
// value's bucket.
func (s *HistogramSnapshot) Quantile(q float64) time.Duration {
	if s.total == 0 {
		return 0
	}
	rank := uint64(q*float64(s.total) + 0.999999)
	rank = min(max(rank, 1), s.total)
	var seen uint64
	for b, c := range s.counts {
		seen += c
		if seen >= rank {
			lo, hi := bucketBounds(b)
			if q >= 1 {
				return time.Duration(hi)
			}
			return time.Duration(lo + (hi-lo)/2)
		}
	}
	return 0 // not reached: the counts add up to total
}

// Latency is the summary of a snapshot, for reports.
type Latency struct {
	Count uint64        `json:"count"`
	P50   time.Duration `json:"p50_ns"`
	P99   time.Duration `json:"p99_ns"`
	P999  time.Duration `json:"p999_ns"`
	Max   time.Duration `json:"max_ns"`
}

// Summary returns the count and the usual quantiles.
func (s *HistogramSnapshot) Summary() Latency {
	return Latency{Count: s.total, P50: s.Quantile(0.5), P99: s.Quantile(0.99), P999: s.Quantile(0.999), Max: s.Quantile(1)}
}
