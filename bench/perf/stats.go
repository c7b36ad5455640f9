package perf

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
)

// stampSize is the header of every body: send time (Unix nanoseconds) and
// a sequence number, both big endian. Bodies shorter than stampSize carry
// only as much of it as fits; under 8 bytes there is no latency.
const stampSize = 16

// stamp writes the send time and sequence number into the start of body.
func stamp(body []byte, now time.Time, seq uint64) {
	var hdr [stampSize]byte
	binary.BigEndian.PutUint64(hdr[0:8], uint64(now.UnixNano()))
	binary.BigEndian.PutUint64(hdr[8:16], seq)
	copy(body, hdr[:])
}

// stampTime reads the send time from a body written by stamp.
func stampTime(body []byte) (time.Time, bool) {
	ns, ok := stampNanos(body)
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}

// stampNanos is stampTime in Unix nanoseconds.
func stampNanos(body []byte) (int64, bool) {
	if len(body) < 8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(body[0:8])), true
}

// Stats are the live counters of a run, shared by its producers and
// consumers. All fields are safe for concurrent use.
type Stats struct {
	Published atomic.Int64 // messages handed to the client
	Confirmed atomic.Int64 // positive confirms
	Nacked    atomic.Int64 // negative confirms and client-side failures
	Consumed  atomic.Int64 // deliveries, all consumers together
	Bytes     atomic.Int64 // consumed body bytes

	ConfirmLatency Histogram // publish to confirm
	Latency        Histogram // publish to delivery, from the body's stamp

	firstConsume atomic.Int64 // Unix nanoseconds of the first delivery
	lastConsume  atomic.Int64 // Unix nanoseconds of the latest delivery
	lastConfirm  atomic.Int64 // Unix nanoseconds of the latest confirm
}

// consumed records one delivery of a body at now.
func (s *Stats) consumed(body []byte, size int, now time.Time) {
	s.consumedBatch(1, size, now)
	s.deliveryLatency(body, now)
}

// deliveryLatency records the latency of a body delivered at now, from
// its send stamp, if it has one.
func (s *Stats) deliveryLatency(body []byte, now time.Time) {
	if sent, ok := stampTime(body); ok {
		s.Latency.Record(now.Sub(sent))
	}
}

// consumedBatch records n deliveries of bytes body bytes in all, received
// at now, whose latencies the caller recorded (deliveryLatency): one set of counter updates
// per chunk instead of per message, so that at millions of msgs/s the tool
// spends its time on the messages, not on its own counters.
func (s *Stats) consumedBatch(n, bytes int, now time.Time) {
	if n == 0 {
		return
	}
	s.Consumed.Add(int64(n))
	s.Bytes.Add(int64(bytes))
	ns := now.UnixNano()
	s.firstConsume.CompareAndSwap(0, ns)
	s.lastConsume.Store(ns)
}

// confirmed records n positive confirms at now; sent is the send time of
// one of them, when known.
func (s *Stats) confirmed(n int, sent time.Time, now time.Time) {
	s.Confirmed.Add(int64(n))
	s.lastConfirm.Store(now.UnixNano())
	if !sent.IsZero() {
		s.ConfirmLatency.Record(now.Sub(sent))
	}
}

// Progress is one second (or so) of a run, for the live line.
type Progress struct {
	Elapsed     time.Duration // since the run started
	Published   float64       // msgs/s in the interval
	Confirmed   float64       // msgs/s
	Consumed    float64       // msgs/s
	LatencyP50  time.Duration // end-to-end, of deliveries in the interval
	LatencyP99  time.Duration
	TotalSent   int64
	TotalRecved int64
}

// String formats p as the live progress line.
func (p Progress) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%6.1fs  published %9.0f msg/s  confirmed %9.0f msg/s  consumed %9.0f msg/s",
		p.Elapsed.Seconds(), p.Published, p.Confirmed, p.Consumed)
	if p.LatencyP50 > 0 {
		fmt.Fprintf(&b, "  latency p50 %s p99 %s", fmtDur(p.LatencyP50), fmtDur(p.LatencyP99))
	}
	fmt.Fprintf(&b, "  (total %d sent, %d received)", p.TotalSent, p.TotalRecved)
	return b.String()
}

// fmtDur prints a duration with three significant digits.
func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.0fµs", float64(d)/1e3)
	}
}

// report calls fn with a Progress every interval until ctx ends.
func (s *Stats) report(ctx context.Context, start time.Time, interval time.Duration, fn func(Progress)) {
	if fn == nil || interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	prevT := start
	var prevPub, prevConf, prevCons int64
	prevLat := s.Latency.Snapshot()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			pub, conf, cons := s.Published.Load(), s.Confirmed.Load(), s.Consumed.Load()
			lat := s.Latency.Snapshot()
			iv := lat.Sub(prevLat)
			secs := now.Sub(prevT).Seconds()
			fn(Progress{
				Elapsed:     now.Sub(start),
				Published:   float64(pub-prevPub) / secs,
				Confirmed:   float64(conf-prevConf) / secs,
				Consumed:    float64(cons-prevCons) / secs,
				LatencyP50:  iv.Quantile(0.5),
				LatencyP99:  iv.Quantile(0.99),
				TotalSent:   pub,
				TotalRecved: cons,
			})
			prevT, prevPub, prevConf, prevCons, prevLat = now, pub, conf, cons, lat
		}
	}
}

// Summary is the outcome of a run.
type Summary struct {
	Mode   string            `json:"mode"` // "stream", "amqp" or "nats"
	Target string            `json:"target"`
	Labels map[string]string `json:"labels,omitempty"`
	Config any               `json:"config"`

	Start          time.Time     `json:"start"`
	PublishElapsed time.Duration `json:"publish_elapsed_ns"` // start to last confirm (or last send without confirms)
	Elapsed        time.Duration `json:"elapsed_ns"`         // start to the end of the run

	Published     int64 `json:"published"`
	Confirmed     int64 `json:"confirmed"`
	Nacked        int64 `json:"nacked"`
	Consumed      int64 `json:"consumed"`
	ConsumedBytes int64 `json:"consumed_bytes"`
	// ExpectedConsumed is the number of deliveries the consumers had to
	// get (every confirmed message once per queue or per stream consumer),
	// or -1 when a consumer-only run had no count.
	ExpectedConsumed int64 `json:"expected_consumed"`

	PublishRate float64 `json:"publish_msgs_per_sec"` // confirmed (or published) / PublishElapsed
	ConsumeRate float64 `json:"consume_msgs_per_sec"` // consumed / (start to last delivery)

	ConfirmLatency Latency `json:"confirm_latency"`
	Latency        Latency `json:"latency"` // end to end

	// FirstConsume is the wall-clock time of the first delivery, and
	// TimeToFirst its distance from Config's T0 (or from Start).
	FirstConsume time.Time     `json:"first_consume"`
	TimeToFirst  time.Duration `json:"time_to_first_ns,omitempty"`

	// Broker is filled in when a broker pid was given.
	Broker *BrokerUsage `json:"broker,omitempty"`

	// Metrics is Record().Metrics, so that the JSON form is a Record too.
	Metrics map[string]float64 `json:"metrics"`
}

// summarize fills the counters, rates and latencies of sum from s.
func (s *Stats) summarize(sum *Summary, end time.Time) {
	sum.Published = s.Published.Load()
	sum.Confirmed = s.Confirmed.Load()
	sum.Nacked = s.Nacked.Load()
	sum.Consumed = s.Consumed.Load()
	sum.ConsumedBytes = s.Bytes.Load()
	sum.Elapsed = end.Sub(sum.Start)
	if lc := s.lastConfirm.Load(); lc > 0 {
		sum.PublishElapsed = time.Unix(0, lc).Sub(sum.Start)
		sum.PublishRate = rate(sum.Confirmed, sum.PublishElapsed)
	}
	if fc := s.firstConsume.Load(); fc > 0 {
		sum.FirstConsume = time.Unix(0, fc)
		sum.ConsumeRate = rate(sum.Consumed, time.Unix(0, s.lastConsume.Load()).Sub(sum.Start))
	}
	sum.ConfirmLatency = s.ConfirmLatency.Snapshot().Summary()
	sum.Latency = s.Latency.Snapshot().Summary()
}

func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Record returns the summary as labels and numeric metrics, the form
// Report reads. Latencies are in milliseconds.
func (s Summary) Record() Record {
	m := map[string]float64{
		"published": float64(s.Published),
		"confirmed": float64(s.Confirmed),
		"consumed":  float64(s.Consumed),
		"elapsed_s": s.Elapsed.Seconds(),
	}
	if s.Published > 0 {
		m["publish_rate"] = s.PublishRate
	}
	if s.Consumed > 0 {
		m["consume_rate"] = s.ConsumeRate
	}
	if s.ConfirmLatency.Count > 0 {
		m["confirm_p50_ms"] = ms(s.ConfirmLatency.P50)
		m["confirm_p99_ms"] = ms(s.ConfirmLatency.P99)
	}
	if s.Latency.Count > 0 {
		m["latency_p50_ms"] = ms(s.Latency.P50)
		m["latency_p99_ms"] = ms(s.Latency.P99)
	}
	if s.TimeToFirst > 0 {
		m["time_to_first_ms"] = ms(s.TimeToFirst)
	}
	if b := s.Broker; b != nil && (s.Published > 0 || s.Consumed > 0) {
		m["broker_cpu_us_per_msg"] = b.CPUPerMessage.Seconds() * 1e6
	}
	if b := s.Broker; b != nil && s.Published > 0 {
		if b.HaveIO {
			m["disk_bytes_per_byte"] = b.WriteBytesPerByte
		}
	}
	return Record{Labels: s.Labels, Metrics: m}
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }
