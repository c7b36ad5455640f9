package queues

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/queues/policy"
	"github.com/warren-mq/warren/queues/qerr"
)

// ErrInvalidArgument is a declare argument RabbitMQ would refuse
// (PRECONDITION_FAILED; qerr.ErrInvalidArgument).
var ErrInvalidArgument = qerr.ErrInvalidArgument

// ErrQueueLimit and ErrTypeProperty tell apart declare refusals of the
// same code (qerr's).
var (
	ErrQueueLimit   = qerr.ErrQueueLimit
	ErrTypeProperty = qerr.ErrTypeProperty
)

// StreamConfig maps RabbitMQ stream arguments, as the stream protocol's
// Create sends them, to an osiris.Config.
func StreamConfig(args map[string]string) (osiris.Config, error) {
	var cfg osiris.Config
	for k, v := range args {
		switch k {
		case "max-length-bytes":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return cfg, fmt.Errorf("max-length-bytes %q: %w", v, ErrInvalidArgument)
			}
			cfg.MaxLengthBytes = n
		case "max-age":
			d, err := ParseMaxAge(v)
			if err != nil {
				return cfg, err
			}
			cfg.MaxAge = d
		case "stream-max-segment-size-bytes":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 || n > osiris.MaxSegmentSizeLimit {
				return cfg, fmt.Errorf("stream-max-segment-size-bytes %q: %w", v, ErrInvalidArgument)
			}
			cfg.MaxSegmentSize = max(n, 4096)
		case "stream-filter-size-bytes":
			n, err := strconv.Atoi(v)
			if err != nil || n < 16 || n > 255 {
				return cfg, fmt.Errorf("stream-filter-size-bytes %q: %w", v, ErrInvalidArgument)
			}
			cfg.FilterSize = n
		case "initial-cluster-size":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return cfg, fmt.Errorf("initial-cluster-size %q: %w", v, ErrInvalidArgument)
			}
		case "queue-leader-locator":
			switch v {
			case "client-local", "balanced", "random", "least-leaders", "min-masters":
			default:
				return cfg, fmt.Errorf("queue-leader-locator %q: %w", v, ErrInvalidArgument)
			}
		}
	}
	return cfg, nil
}

// ParseMaxAge parses RabbitMQ's x-max-age form (see policy.ParseMaxAge):
// a positive integer and a unit, Y (365 days), M (30 days), D, h, m or s.
func ParseMaxAge(s string) (time.Duration, error) {
	d, ok := policy.ParseMaxAge(s)
	if !ok {
		return 0, fmt.Errorf("max-age %q: %w", s, ErrInvalidArgument)
	}
	return d, nil
}

func unmarshal(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("queues: catalog value: %w", err)
	}
	return nil
}
