package amqpbench

import (
	"slices"
	"time"
)

// Result is the outcome of one run.
type Result struct {
	// Scenario, QueueType, MessageSize and Queues echo the Config.
	Scenario    string `json:"scenario"`
	QueueType   string `json:"queue_type"`
	MessageSize int    `json:"message_size"`
	Queues      int    `json:"queues"`
	// URL is Config.URL without its password.
	URL string `json:"url"`

	// Published is the number of messages sent, Confirmed and Nacked the
	// number the broker acked and nacked.
	Published int `json:"published"`
	Confirmed int `json:"confirmed"`
	Nacked    int `json:"nacked"`
	// Delivered is the number of deliveries over all consumers (Published
	// × Queues in a complete run), Redelivered how many of them had the
	// redelivered flag.
	Delivered   int `json:"delivered"`
	Redelivered int `json:"redelivered"`

	// PublishElapsed runs from the first publish to the last confirm,
	// DeliverElapsed from the first publish to the last delivery, and
	// ConsumeElapsed from the first delivery to the last.
	PublishElapsed time.Duration `json:"publish_elapsed_ns"`
	DeliverElapsed time.Duration `json:"deliver_elapsed_ns"`
	ConsumeElapsed time.Duration `json:"consume_elapsed_ns"`

	// PublishMsgsPerSec is Confirmed / PublishElapsed, PublishMBPerSec the
	// same in body bytes (10^6 bytes).
	PublishMsgsPerSec float64 `json:"publish_msgs_per_sec"`
	PublishMBPerSec   float64 `json:"publish_mb_per_sec"`
	// EndToEndMsgsPerSec is Published / DeliverElapsed: messages through
	// the broker per second, until the last consumer had everything.
	EndToEndMsgsPerSec float64 `json:"end_to_end_msgs_per_sec"`
	// DeliveredMsgsPerSec is Delivered / DeliverElapsed (EndToEnd × Queues
	// in a complete run).
	DeliveredMsgsPerSec float64 `json:"delivered_msgs_per_sec"`
	// ConsumeMsgsPerSec is Delivered / ConsumeElapsed.
	ConsumeMsgsPerSec float64 `json:"consume_msgs_per_sec"`

	// LatencyP50/P99/Max are publish-to-delivery latencies over all
	// deliveries (zero when MessageSize < 8).
	LatencyP50 time.Duration `json:"latency_p50_ns,omitempty"`
	LatencyP99 time.Duration `json:"latency_p99_ns,omitempty"`
	LatencyMax time.Duration `json:"latency_max_ns,omitempty"`
	// ConfirmP50/P99 are publish-to-confirm latencies.
	ConfirmP50 time.Duration `json:"confirm_p50_ns,omitempty"`
	ConfirmP99 time.Duration `json:"confirm_p99_ns,omitempty"`

	// BrokerStats tells whether the Broker* fields were measured
	// (Config.BrokerPID set); BrokerIO whether write_bytes could be read.
	BrokerStats bool `json:"broker_stats"`
	BrokerIO    bool `json:"broker_io"`
	// BrokerCPU is the broker's utime+stime over the measured part.
	BrokerCPU time.Duration `json:"broker_cpu_ns,omitempty"`
	// BrokerCPUPerMsg is BrokerCPU / Published.
	BrokerCPUPerMsg time.Duration `json:"broker_cpu_per_msg_ns,omitempty"`
	// BrokerWriteBytes is the growth of the broker's write_bytes.
	BrokerWriteBytes int64 `json:"broker_write_bytes,omitempty"`
	// WritePerPublishedByte is BrokerWriteBytes / (Published × MessageSize).
	WritePerPublishedByte float64 `json:"write_per_published_byte,omitempty"`
}

// rate returns n / d per second, or 0.
func rate(n float64, d time.Duration) float64 {
	if s := d.Seconds(); s > 0 {
		return n / s
	}
	return 0
}

// finish fills the rates from the counts and durations.
func (r *Result) finish() {
	r.PublishMsgsPerSec = rate(float64(r.Confirmed), r.PublishElapsed)
	r.PublishMBPerSec = rate(float64(r.Confirmed)*float64(r.MessageSize), r.PublishElapsed) / 1e6
	r.EndToEndMsgsPerSec = rate(float64(r.Published), r.DeliverElapsed)
	r.DeliveredMsgsPerSec = rate(float64(r.Delivered), r.DeliverElapsed)
	r.ConsumeMsgsPerSec = rate(float64(r.Delivered), r.ConsumeElapsed)
	if r.BrokerStats && r.Published > 0 {
		r.BrokerCPUPerMsg = r.BrokerCPU / time.Duration(r.Published)
	}
	if r.BrokerIO && r.Published > 0 && r.MessageSize > 0 {
		r.WritePerPublishedByte = float64(r.BrokerWriteBytes) / (float64(r.Published) * float64(r.MessageSize))
	}
}

// percentiles returns the p50, p99 and maximum of samples, which it sorts.
func percentiles(samples []time.Duration) (p50, p99, maxv time.Duration) {
	if len(samples) == 0 {
		return 0, 0, 0
	}
	slices.Sort(samples)
	return percentile(samples, 50), percentile(samples, 99), samples[len(samples)-1]
}

// percentile returns the p-th percentile (nearest rank) of sorted samples.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 * n)
	rank = max(rank, 1)
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
