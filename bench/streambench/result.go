package streambench

import (
	"slices"
	"time"
)

// Result is the outcome of one run.
type Result struct {
	// Mode is "publish" or "replay".
	Mode string `json:"mode"`
	// Addr is the broker the run went to.
	Addr string `json:"addr"`
	// Messages is the number of messages asked for.
	Messages int `json:"messages"`
	// MessageSize is the body size in bytes.
	MessageSize int `json:"message_size"`
	// Count is the number of messages confirmed (publish) or received
	// (replay).
	Count int `json:"count"`
	// Failed is the number of messages the broker or the client reported as
	// not confirmed (publish only).
	Failed int `json:"failed"`
	// Bytes is the number of body bytes confirmed or received.
	Bytes int64 `json:"bytes"`
	// Elapsed is the measured time: first send to last confirm, or subscribe
	// to last message.
	Elapsed time.Duration `json:"elapsed_ns"`
	// MsgsPerSec is Count / Elapsed.
	MsgsPerSec float64 `json:"msgs_per_sec"`
	// MBPerSec is Bytes / Elapsed in units of 10^6 bytes.
	MBPerSec float64 `json:"mb_per_sec"`
	// LatencyP50, LatencyP99 and LatencyMax are publish-to-confirm
	// latencies (publish only).
	LatencyP50 time.Duration `json:"latency_p50_ns,omitempty"`
	LatencyP99 time.Duration `json:"latency_p99_ns,omitempty"`
	LatencyMax time.Duration `json:"latency_max_ns,omitempty"`
}

// finish fills the rates from Count, Bytes and Elapsed.
func (r *Result) finish() {
	if s := r.Elapsed.Seconds(); s > 0 {
		r.MsgsPerSec = float64(r.Count) / s
		r.MBPerSec = float64(r.Bytes) / s / 1e6
	}
}

// setLatencies fills the latency fields from samples, which it sorts.
func (r *Result) setLatencies(samples []time.Duration) {
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	r.LatencyP50 = percentile(samples, 50)
	r.LatencyP99 = percentile(samples, 99)
	r.LatencyMax = samples[len(samples)-1]
}

// percentile returns the p-th percentile (nearest rank) of sorted samples.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 * n)
	if rank < 1 {
		rank = 1
	}
	return sorted[rank-1]
}

// Median returns the median of xs (the mean of the middle two for an even
// count), or 0 for none. It does not modify xs.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
