package amqpbench

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// ErrConfig marks an invalid Config.
var ErrConfig = errors.New("amqpbench: invalid config")

// Scenario names.
const (
	ScenarioClassic1p1c = "classic-1p1c"
	ScenarioQuorum1p1c  = "quorum-1p1c"
	ScenarioFanout      = "fanout"
)

// Scenarios lists the scenario names in the order the CLI documents them.
var Scenarios = []string{ScenarioClassic1p1c, ScenarioQuorum1p1c, ScenarioFanout}

// Queue types.
const (
	QueueTypeClassic = "classic"
	QueueTypeQuorum  = "quorum"
)

// timestampSize is the send-time prefix of a body; smaller bodies carry none.
const timestampSize = 8

// Config describes one run against one broker. The zero value of every field
// but URL and Scenario means "the default" (see ensureDefaults).
type Config struct {
	// URL is the broker's amqp:// URL, credentials and vhost included. It
	// is left out of JSON (it may hold a password); see RedactURL.
	URL string `json:"-"`
	// Scenario is one of Scenarios.
	Scenario string `json:"scenario"`
	// MessageSize is the body size in bytes; default DefaultMessageSize.
	// Bodies of at least 8 bytes carry their send time.
	MessageSize int `json:"message_size"`
	// Count is the number of messages to publish. Zero means
	// DefaultCount when Duration is zero too, and "no limit" otherwise.
	Count int `json:"count"`
	// Duration, when positive, stops publishing after that long (the
	// consumers then drain what was published).
	Duration time.Duration `json:"duration_ns,omitempty"`
	// MaxInFlight is the publisher's limit on unconfirmed messages;
	// default DefaultMaxInFlight.
	MaxInFlight int `json:"max_in_flight"`
	// Prefetch is every consumer's Qos prefetch count; default
	// DefaultPrefetch.
	Prefetch int `json:"prefetch"`
	// AckEvery makes consumers ack with multiple=true once that many
	// messages are unacked; default DefaultAckEvery. It is lowered to
	// Prefetch if larger (the broker would stop delivering first).
	AckEvery int `json:"ack_every"`
	// Queues is the number of queues bound to the fanout exchange; default
	// DefaultQueues. 1p1c scenarios always use one queue.
	Queues int `json:"queues"`
	// ConsumerConnections spreads the fanout consumers (one channel each)
	// round robin over that many connections; default 1.
	ConsumerConnections int `json:"consumer_connections"`
	// QueueType is the x-queue-type of the fanout queues: "" or "classic"
	// (no argument is sent) or "quorum". The 1p1c scenarios fix it: an
	// explicit contrary value is an error.
	QueueType string `json:"queue_type"`
	// Transient publishes with delivery mode 1 instead of 2 (persistent).
	Transient bool `json:"transient,omitempty"`
	// Prefix starts the names of the queues and exchanges a run declares;
	// a random suffix makes them unique. Default "amqpbench".
	Prefix string `json:"prefix"`
	// BrokerPID, when positive, is the broker's process id on this
	// machine: the run then reports its CPU time and write_bytes.
	BrokerPID int `json:"broker_pid,omitempty"`
	// SetupTimeout bounds dialing, declaring and subscribing; default 30 s.
	SetupTimeout time.Duration `json:"setup_timeout_ns"`
	// StallTimeout fails a run when no confirm (while some are awaited) or
	// no delivery (while some are expected) arrives for that long; default
	// 30 s.
	StallTimeout time.Duration `json:"stall_timeout_ns"`
}

// Defaults for the zero Config fields: the workload.
const (
	DefaultCount        = 200_000
	DefaultMessageSize  = 16
	DefaultMaxInFlight  = 1_000
	DefaultPrefetch     = 1_000
	DefaultAckEvery     = 100
	DefaultQueues       = 10
	defaultSetupTimeout = 30 * time.Second
	defaultStallTimeout = 30 * time.Second
)

// ensureDefaults returns a copy of c with zero fields filled in.
func (c Config) ensureDefaults() Config {
	if c.MessageSize == 0 {
		c.MessageSize = DefaultMessageSize
	}
	if c.Count == 0 && c.Duration == 0 {
		c.Count = DefaultCount
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.Prefetch == 0 {
		c.Prefetch = DefaultPrefetch
	}
	if c.AckEvery == 0 {
		c.AckEvery = DefaultAckEvery
	}
	if c.AckEvery > c.Prefetch && c.Prefetch > 0 {
		c.AckEvery = c.Prefetch
	}
	switch c.Scenario {
	case ScenarioClassic1p1c, ScenarioQuorum1p1c:
		if c.Queues == 0 {
			c.Queues = 1
		}
	default:
		if c.Queues == 0 {
			c.Queues = DefaultQueues
		}
	}
	if c.ConsumerConnections == 0 {
		c.ConsumerConnections = 1
	}
	if c.ConsumerConnections > c.Queues && c.Queues > 0 {
		c.ConsumerConnections = c.Queues
	}
	switch {
	case c.Scenario == ScenarioClassic1p1c && c.QueueType == "":
		c.QueueType = QueueTypeClassic
	case c.Scenario == ScenarioQuorum1p1c && c.QueueType == "":
		c.QueueType = QueueTypeQuorum
	case c.QueueType == "":
		c.QueueType = QueueTypeClassic
	}
	if c.Prefix == "" {
		c.Prefix = "amqpbench"
	}
	if c.SetupTimeout == 0 {
		c.SetupTimeout = defaultSetupTimeout
	}
	if c.StallTimeout == 0 {
		c.StallTimeout = defaultStallTimeout
	}
	return c
}

// validate checks a defaulted Config.
func (c Config) validate() error {
	if _, err := amqp.ParseURI(c.URL); err != nil {
		return fmt.Errorf("%w: URL %q: %v", ErrConfig, RedactURL(c.URL), err)
	}
	switch {
	case !slices.Contains(Scenarios, c.Scenario):
		return fmt.Errorf("%w: Scenario %q: want one of %v", ErrConfig, c.Scenario, Scenarios)
	case c.Scenario == ScenarioClassic1p1c && c.QueueType != QueueTypeClassic,
		c.Scenario == ScenarioQuorum1p1c && c.QueueType != QueueTypeQuorum:
		return fmt.Errorf("%w: QueueType %q contradicts Scenario %q", ErrConfig, c.QueueType, c.Scenario)
	case c.QueueType != QueueTypeClassic && c.QueueType != QueueTypeQuorum:
		return fmt.Errorf("%w: QueueType %q: want classic or quorum", ErrConfig, c.QueueType)
	case c.Scenario != ScenarioFanout && c.Queues != 1:
		return fmt.Errorf("%w: Queues %d: scenario %q has one queue", ErrConfig, c.Queues, c.Scenario)
	case c.Queues < 1 || c.Queues > 1000:
		return fmt.Errorf("%w: Queues %d not in [1, 1000]", ErrConfig, c.Queues)
	case c.ConsumerConnections < 1:
		return fmt.Errorf("%w: ConsumerConnections %d < 1", ErrConfig, c.ConsumerConnections)
	case c.MessageSize < 0:
		return fmt.Errorf("%w: MessageSize %d < 0", ErrConfig, c.MessageSize)
	case c.Count < 0:
		return fmt.Errorf("%w: Count %d < 0", ErrConfig, c.Count)
	case c.Duration < 0:
		return fmt.Errorf("%w: Duration %v < 0", ErrConfig, c.Duration)
	case c.MaxInFlight < 1:
		return fmt.Errorf("%w: MaxInFlight %d < 1", ErrConfig, c.MaxInFlight)
	case c.Prefetch < 1 || c.Prefetch > 65535:
		return fmt.Errorf("%w: Prefetch %d not in [1, 65535]", ErrConfig, c.Prefetch)
	case c.AckEvery < 1:
		return fmt.Errorf("%w: AckEvery %d < 1", ErrConfig, c.AckEvery)
	case c.BrokerPID < 0:
		return fmt.Errorf("%w: BrokerPID %d < 0", ErrConfig, c.BrokerPID)
	case c.SetupTimeout < 0 || c.StallTimeout < 0:
		return fmt.Errorf("%w: negative timeout", ErrConfig)
	}
	return nil
}

// limited reports whether the run stops after Count messages.
func (c Config) limited() bool { return c.Count > 0 }

// RedactURL returns u with its password replaced by "xxxxx", for logs and
// JSON. A string that does not parse is returned as "<unparsable URL>".
func RedactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "<unparsable URL>"
	}
	return p.Redacted()
}
