package perf

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
)

// ErrConfig marks an invalid Config.
var ErrConfig = errors.New("perf: invalid config")

// Common holds the options every mode shares. The zero value of a field
// means its default (see ensureDefaults).
type Common struct {
	// Producers and Consumers are the number of each, each on its own
	// connection. Zero producers makes a consumer-only run (replay);
	// zero consumers a publish-only run. Defaults: 1 and 1 (the CLI's).
	Producers int `json:"producers"`
	Consumers int `json:"consumers"`
	// Size is the body size in bytes; default 100. Bodies of at least 8
	// bytes carry their send time, of at least 16 a sequence number too.
	Size int `json:"size"`
	// Count is the number of messages each producer publishes, or in a
	// consumer-only run each consumer reads. Zero: no limit (Duration
	// bounds the run).
	Count int `json:"count"`
	// Duration, when positive, stops publishing (or, without producers,
	// consuming) after that long.
	Duration time.Duration `json:"duration_ns,omitempty"`
	// Rate, when positive, paces each producer to that many msgs/s.
	Rate float64 `json:"rate,omitempty"`
	// ConfirmWindow is each producer's limit on unconfirmed messages; for
	// AMQP, 0 publishes without confirms. Default 10,000 for streams (as
	// RabbitMQ's stream-perf-test) and 0 for AMQP in the CLI (set it for
	// confirms).
	ConfirmWindow int `json:"confirm_window"`
	// DrainTimeout bounds the wait for consumers once publishing is done
	// and StallTimeout fails a run in which nothing arrives for that long;
	// defaults 60 s and 30 s.
	DrainTimeout time.Duration `json:"drain_timeout_ns"`
	StallTimeout time.Duration `json:"stall_timeout_ns"`
	// SetupTimeout bounds connecting and declaring; default 30 s. WaitReady,
	// when positive, retries connecting until the broker answers, for that
	// long at most (restart measurements).
	SetupTimeout time.Duration `json:"setup_timeout_ns"`
	WaitReady    time.Duration `json:"wait_ready_ns,omitempty"`
	// T0, when set, is the moment TimeToFirst is measured from (for
	// example just before a broker restart); default the run's start.
	T0 time.Time `json:"t0,omitzero"`
	// BrokerPID, when positive, is the broker's process id on this
	// machine: the summary then has its CPU and disk writes.
	BrokerPID int `json:"broker_pid,omitempty"`
	// Keep leaves the declared streams, queues and exchanges in place.
	Keep bool `json:"keep,omitempty"`
	// Labels are copied into the Summary (scenario, target, ...).
	Labels map[string]string `json:"labels,omitempty"`
}

func (c Common) ensureDefaults() Common {
	if c.Size == 0 {
		c.Size = 100
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 60 * time.Second
	}
	if c.StallTimeout == 0 {
		c.StallTimeout = 30 * time.Second
	}
	if c.SetupTimeout == 0 {
		c.SetupTimeout = 30 * time.Second
	}
	return c
}

func (c Common) validate() error {
	switch {
	case c.Producers < 0 || c.Producers > 1000:
		return fmt.Errorf("%w: producers %d not in [0, 1000]", ErrConfig, c.Producers)
	case c.Consumers < 0 || c.Consumers > 1000:
		return fmt.Errorf("%w: consumers %d not in [0, 1000]", ErrConfig, c.Consumers)
	case c.Producers == 0 && c.Consumers == 0:
		return fmt.Errorf("%w: no producers and no consumers", ErrConfig)
	case c.Size < 0:
		return fmt.Errorf("%w: size %d < 0", ErrConfig, c.Size)
	case c.Count < 0 || c.Duration < 0 || c.Rate < 0:
		return fmt.Errorf("%w: negative count, duration or rate", ErrConfig)
	case c.Count == 0 && c.Duration == 0:
		return fmt.Errorf("%w: unbounded run: give a count or a duration", ErrConfig)
	case c.ConfirmWindow < 0:
		return fmt.Errorf("%w: confirm window %d < 0", ErrConfig, c.ConfirmWindow)
	case c.DrainTimeout < 0 || c.StallTimeout < 0 || c.SetupTimeout < 0 || c.WaitReady < 0:
		return fmt.Errorf("%w: negative timeout", ErrConfig)
	}
	return nil
}

// StreamConfig is a stream-protocol workload.
type StreamConfig struct {
	Common
	// Addr is the broker's host:port. Every connection goes there,
	// whatever host the broker advertises.
	Addr     string `json:"addr"`
	User     string `json:"user"`
	Password string `json:"-"`
	Vhost    string `json:"vhost"`
	// Stream is the stream (or super stream) name; default "perf-stream".
	Stream string `json:"stream"`
	// SuperStream makes Stream a super stream of Partitions partitions;
	// producers route by a hash of the sequence number.
	SuperStream bool `json:"super_stream,omitempty"`
	Partitions  int  `json:"partitions,omitempty"`
	// BatchSize is messages per BatchSend; default 100.
	BatchSize int `json:"batch_size"`
	// SubEntrySize, above 1, packs that many messages per sub-entry, with
	// Compression ("none", "gzip", "snappy", "lz4", "zstd").
	SubEntrySize int    `json:"sub_entry_size"`
	Compression  string `json:"compression,omitempty"`
	// Offset is where consumers start: first, last, next, offset:N or
	// timestamp:UNIXMILLIS; default first.
	Offset string `json:"offset"`
	// FilterValues, when set, tags each message with one of them (round
	// robin, as the "filter" application property); ConsumerFilter makes
	// consumers ask the broker for those values only (and post-filter).
	FilterValues   []string `json:"filter_values,omitempty"`
	ConsumerFilter []string `json:"consumer_filter,omitempty"`
	// ProducerName, when set, names producer i ProducerName-i, which turns
	// on deduplication.
	ProducerName string `json:"producer_name,omitempty"`
	// MaxSegmentSize, when positive, is the declared streams'
	// x-stream-max-segment-size-bytes.
	MaxSegmentSize int64 `json:"max_segment_size,omitempty"`
	// Credits is each consumer's initial credit; default 10.
	Credits int `json:"credits"`
	// TLS connects over TLS (rabbitmq-stream+tls), trusting the system's
	// roots (SSL_CERT_FILE names a CA file to trust instead).
	TLS bool `json:"tls,omitempty"`
	// Recreate deletes and declares the stream before publishing; the CLI
	// sets it for runs with producers (-keep-data turns it off).
	Recreate bool `json:"recreate"`
	// Client is the stream client of producers and consumers: ClientGo
	// (rabbitmq-stream-go-client, the default) or ClientLean
	// (bench/leanstream, one connection per producer and consumer).
	Client string `json:"client"`
}

// Clients of StreamConfig.Client and AMQPConfig.Client: the real Go client
// library of the protocol, or our lean one (bench/leanstream,
// bench/leanamqp), which spends far less CPU per message, so that on a
// small machine the broker rather than the client bounds the rate.
const (
	ClientGo   = "go"
	ClientLean = "lean"
	// ClientAMQP10 (AMQPConfig only) is go-amqp over AMQP 1.0.
	ClientAMQP10 = "amqp10"
)

// DefaultStreamConfirmWindow is the stream producers' default limit on
// unconfirmed messages: stream-perf-test's default. With 1,000 a fast
// broker's rate is bound by the confirm round trip (1,000 messages per
// round trip), which measures latency rather than throughput.
const DefaultStreamConfirmWindow = 10000

// Compressions lists the names StreamConfig.Compression accepts.
var Compressions = []string{"none", "gzip", "snappy", "lz4", "zstd"}

// ParseCompression maps a name to the client's Compression.
func ParseCompression(s string) (stream.Compression, error) {
	c := stream.Compression{}
	switch strings.ToLower(s) {
	case "", "none":
		return c.None(), nil
	case "gzip":
		return c.Gzip(), nil
	case "snappy":
		return c.Snappy(), nil
	case "lz4":
		return c.Lz4(), nil
	case "zstd":
		return c.Zstd(), nil
	}
	return c, fmt.Errorf("%w: compression %q: want one of %v", ErrConfig, s, Compressions)
}

// ParseOffset parses first, last, next, offset:N or timestamp:UNIXMILLIS.
func ParseOffset(s string) (stream.OffsetSpecification, error) {
	o := stream.OffsetSpecification{}
	kind, arg, hasArg := strings.Cut(strings.ToLower(strings.TrimSpace(s)), ":")
	switch {
	case !hasArg && (kind == "" || kind == "first"):
		return o.First(), nil
	case !hasArg && kind == "last":
		return o.Last(), nil
	case !hasArg && kind == "next":
		return o.Next(), nil
	case hasArg && (kind == "offset" || kind == "timestamp"):
		n, err := strconv.ParseInt(arg, 10, 64)
		if err != nil || n < 0 {
			return o, fmt.Errorf("%w: offset %q: bad number", ErrConfig, s)
		}
		if kind == "offset" {
			return o.Offset(n), nil
		}
		return o.Timestamp(n), nil
	}
	return o, fmt.Errorf("%w: offset %q: want first, last, next, offset:N or timestamp:UNIXMILLIS", ErrConfig, s)
}

func (c StreamConfig) ensureDefaults() StreamConfig {
	c.Common = c.Common.ensureDefaults()
	if c.User == "" {
		c.User = "guest"
	}
	if c.Password == "" {
		c.Password = "guest"
	}
	if c.Vhost == "" {
		c.Vhost = "/"
	}
	if c.Stream == "" {
		c.Stream = "perf-stream"
	}
	if c.SuperStream && c.Partitions == 0 {
		c.Partitions = 3
	}
	if c.BatchSize == 0 {
		c.BatchSize = 100
	}
	if c.SubEntrySize == 0 {
		c.SubEntrySize = 1
	}
	if c.ConfirmWindow == 0 {
		c.ConfirmWindow = DefaultStreamConfirmWindow
	}
	c.ConfirmWindow = max(c.ConfirmWindow, c.BatchSize)
	if c.Offset == "" {
		c.Offset = "first"
	}
	if c.Credits == 0 {
		c.Credits = 10
	}
	if c.Client == "" {
		c.Client = ClientGo
	}
	return c
}

func (c StreamConfig) validate() error {
	if err := c.Common.validate(); err != nil {
		return err
	}
	if _, _, err := splitHostPort(c.Addr); err != nil {
		return err
	}
	if _, err := ParseCompression(c.Compression); err != nil {
		return err
	}
	if _, err := ParseOffset(c.Offset); err != nil {
		return err
	}
	switch {
	case c.BatchSize < 1:
		return fmt.Errorf("%w: batch size %d < 1", ErrConfig, c.BatchSize)
	case c.SubEntrySize < 1:
		return fmt.Errorf("%w: sub-entry size %d < 1", ErrConfig, c.SubEntrySize)
	case c.Compression != "" && c.Compression != "none" && c.SubEntrySize < 2:
		return fmt.Errorf("%w: compression %s needs a sub-entry size above 1", ErrConfig, c.Compression)
	case len(c.FilterValues) > 0 && c.SubEntrySize > 1:
		return fmt.Errorf("%w: filter values and sub-entries exclude each other", ErrConfig)
	case len(c.ConsumerFilter) > 0 && len(c.FilterValues) == 0 && c.Producers > 0:
		return fmt.Errorf("%w: a consumer filter needs producer filter values", ErrConfig)
	case c.SuperStream && (c.Partitions < 1 || c.Partitions > 1000):
		return fmt.Errorf("%w: partitions %d not in [1, 1000]", ErrConfig, c.Partitions)
	case c.Producers > 254:
		return fmt.Errorf("%w: producers %d > 254 (one publisher id each)", ErrConfig, c.Producers)
	case c.Credits < 1 || c.Credits > 1<<15-1:
		return fmt.Errorf("%w: credits %d not in [1, 32767]", ErrConfig, c.Credits)
	case c.MaxSegmentSize < 0:
		return fmt.Errorf("%w: max segment size %d < 0", ErrConfig, c.MaxSegmentSize)
	case c.Client != ClientGo && c.Client != ClientLean:
		return fmt.Errorf("%w: client %q: want %s or %s", ErrConfig, c.Client, ClientGo, ClientLean)
	}
	if c.Client == ClientLean {
		return c.validateLean()
	}
	return nil
}

// splitHostPort splits host:port with a numeric port.
func splitHostPort(addr string) (string, int, error) {
	i := strings.LastIndexByte(addr, ':')
	if i <= 0 {
		return "", 0, fmt.Errorf("%w: address %q: want host:port", ErrConfig, addr)
	}
	port, err := strconv.Atoi(addr[i+1:])
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("%w: address %q: bad port", ErrConfig, addr)
	}
	return strings.Trim(addr[:i], "[]"), port, nil
}

// Queue types of AMQPConfig.QueueType.
const (
	QueueClassic = "classic"
	QueueQuorum  = "quorum"
	QueueStream  = "stream"
)

// AMQPConfig is an AMQP 0-9-1 workload.
type AMQPConfig struct {
	Common
	// URL is the broker's amqp:// URL, left out of JSON.
	URL string `json:"-"`
	// QueueType is classic (default), quorum or stream.
	QueueType string `json:"queue_type"`
	// Queues, above 1, binds that many queues to a fanout exchange the
	// producers publish to; default 1 (publish through the default
	// exchange). Consumers are spread round robin over the queues, at
	// least one per queue.
	Queues int `json:"queues"`
	// Queue is the queue name (or prefix with Queues > 1); default a
	// unique "perf-<random>". Exclusive-use names are deleted at the end
	// unless Keep.
	Queue string `json:"queue"`
	// Persistent publishes with delivery mode 2.
	Persistent bool `json:"persistent"`
	// Prefetch is each consumer's basic.qos; default 1000 (0 means
	// unlimited only with AutoAck).
	Prefetch int `json:"prefetch"`
	// MultiAckEvery acks with multiple=true every that many messages;
	// default 1 (one ack per message).
	MultiAckEvery int `json:"multi_ack_every"`
	// AutoAck consumes with no-ack.
	AutoAck bool `json:"auto_ack,omitempty"`
	// Client is the AMQP client of producers and consumers: ClientGo
	// (amqp091-go, the default) or ClientLean (bench/leanamqp, one
	// write per batch of publishes) or ClientAMQP10 (go-amqp over AMQP
	// 1.0). Topology always uses amqp091-go.
	Client string `json:"client"`
	// AMQP10Address is the AMQP 1.0 address format of ClientAMQP10: "v2"
	// (RabbitMQ 4.x and Warren: /queues/q, the default) or "v1"
	// (RabbitMQ 3.x's plugin: /amq/queue/q).
	AMQP10Address string `json:"amqp10_address,omitempty"`
}

func (c AMQPConfig) ensureDefaults() AMQPConfig {
	c.Common = c.Common.ensureDefaults()
	if c.Client == "" {
		c.Client = ClientGo
	}
	if c.QueueType == "" {
		c.QueueType = QueueClassic
	}
	if c.Queues == 0 {
		c.Queues = 1
	}
	if c.Prefetch == 0 && !c.AutoAck {
		c.Prefetch = 1000
	}
	if c.MultiAckEvery == 0 {
		c.MultiAckEvery = 1
	}
	if c.Prefetch > 0 {
		c.MultiAckEvery = min(c.MultiAckEvery, c.Prefetch)
	}
	if c.Consumers > 0 {
		c.Consumers = max(c.Consumers, c.Queues)
	}
	return c
}

func (c AMQPConfig) validate() error {
	if err := c.Common.validate(); err != nil {
		return err
	}
	switch {
	case !strings.HasPrefix(c.URL, "amqp://") && !strings.HasPrefix(c.URL, "amqps://"):
		return fmt.Errorf("%w: URL must start with amqp:// or amqps://", ErrConfig)
	case c.QueueType != QueueClassic && c.QueueType != QueueQuorum && c.QueueType != QueueStream:
		return fmt.Errorf("%w: queue type %q: want classic, quorum or stream", ErrConfig, c.QueueType)
	case c.Queues < 1 || c.Queues > 10000:
		return fmt.Errorf("%w: queues %d not in [1, 10000]", ErrConfig, c.Queues)
	case c.Prefetch < 0 || c.Prefetch > 65535:
		return fmt.Errorf("%w: prefetch %d not in [0, 65535]", ErrConfig, c.Prefetch)
	case c.MultiAckEvery < 1:
		return fmt.Errorf("%w: multi-ack-every %d < 1", ErrConfig, c.MultiAckEvery)
	case c.QueueType == QueueStream && c.AutoAck:
		return fmt.Errorf("%w: stream queues need manual acks", ErrConfig)
	case c.QueueType == QueueStream && c.Prefetch == 0:
		return fmt.Errorf("%w: stream queues need a prefetch", ErrConfig)
	case c.Client != ClientGo && c.Client != ClientLean && c.Client != ClientAMQP10:
		return fmt.Errorf("%w: amqp client %q: want %s, %s or %s", ErrConfig, c.Client, ClientGo, ClientLean, ClientAMQP10)
	case c.AMQP10Address != "" && c.AMQP10Address != "v1" && c.AMQP10Address != "v2":
		return fmt.Errorf("%w: amqp10 address %q: want v1 or v2", ErrConfig, c.AMQP10Address)
	}
	return nil
}

// consumers reports the consumer count of a Summary's Config (tests).
func (c Common) consumers() int { return c.Consumers }
