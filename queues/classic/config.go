package classic

import (
	"time"

	"github.com/warren-mq/warren/internal/amqptab"
	"github.com/warren-mq/warren/queues/internal/fieldval"
)

// A classic queue's effective settings: its declare arguments combined
// with the policy that applies to it (the broker's Args), as
// rabbit_amqqueue_process:process_args_policy/1 resolves them: the
// minimum of argument and policy for message-ttl, expires, max-length and
// max-length-bytes; the argument wins for dead-letter-exchange,
// dead-letter-routing-key and overflow. A policy change applies to the
// existing queues at once, without a redeclare (the broker watches the
// policies and calls ApplyConfig). x-max-priority is an argument only:
// it fixes the queue's priority levels when it is declared.
//
// What a change does, as in RabbitMQ: a new message TTL applies to
// messages enqueued from then on (an expiry is fixed at enqueue); a new
// x-expires restarts the unused timer; lower limits, or overflow back to
// drop-head, drop (and dead-letter) heads at once; a new dead-letter
// exchange applies to the messages dead-lettered from then on.

// overflowMode is x-overflow.
type overflowMode uint8

const (
	overflowDropHead         overflowMode = iota // drop (dead-letter) the head
	overflowRejectPublish                        // refuse the publish (basic.nack)
	overflowRejectPublishDLX                     // refuse and dead-letter the publish
)

// queueConfig is a queue's effective settings. Immutable once published
// in Queue.cfg.
type queueConfig struct {
	ttl      int64 // message TTL, ms; -1: none
	expires  int64 // x-expires, ms; 0: none
	maxLen   int64 // -1: none
	maxBytes int64 // -1: none
	overflow overflowMode
	dlx      string // dead-letter exchange, when hasDLX
	hasDLX   bool
	dlrk     string // dead-letter routing key, when hasDLRK
	hasDLRK  bool
	// deliveryLimit is a quorum queue's delivery limit; -1: unlimited
	// (quorum.go).
	deliveryLimit int64
	// histAge and histBytes are the history limits (history.go):
	// x-history-max-age and x-history-max-length-bytes; 0: not set.
	// With neither set the queue keeps no history.
	histAge   time.Duration
	histBytes int64
}

// history reports whether the queue keeps its settled history.
func (c *queueConfig) history() bool { return c.histAge > 0 || c.histBytes > 0 }

// limited reports whether a length limit applies.
func (c *queueConfig) limited() bool { return c.maxLen >= 0 || c.maxBytes >= 0 }

// config returns the queue's effective settings.
func (q *Queue) config() *queueConfig { return q.cfg.Load() }

// resolveConfig resolves the queue's settings from its arguments and the
// policy that applies to it now (Broker.Args). It is the one place
// the policy lookup plugs in.
func (q *Queue) resolveConfig() *queueConfig {
	kind := q.kind()
	get := q.env.Broker.Args(kind, &q.def)
	intOr := func(key string, dflt int64) int64 {
		if v, ok := get(key); ok {
			if n, ok := amqptab.DecodedInt(v); ok {
				return n
			}
		}
		return dflt
	}
	c := &queueConfig{
		ttl:      intOr("message-ttl", -1),
		expires:  intOr("expires", 0),
		maxLen:   intOr("max-length", -1),
		maxBytes: intOr("max-length-bytes", -1),
	}
	if c.ttl < -1 {
		c.ttl = -1
	}
	if c.expires < 0 {
		c.expires = 0
	}
	if v, ok := get("overflow"); ok {
		switch v {
		case "reject-publish":
			c.overflow = overflowRejectPublish
		case "reject-publish-dlx":
			c.overflow = overflowRejectPublishDLX
			if kind == TypeQuorum {
				c.overflow = overflowRejectPublish // as RabbitMQ's quorum queues (a warning there)
			}
		}
	}
	if v, ok := get("dead-letter-exchange"); ok {
		c.dlx, c.hasDLX = amqptab.DecodedString(v)
	}
	if v, ok := get("dead-letter-routing-key"); ok {
		c.dlrk, c.hasDLRK = amqptab.DecodedString(v)
	}
	c.histBytes = max(intOr("history-max-length-bytes", 0), 0)
	if v, ok := get("history-max-age"); ok {
		if s, ok := amqptab.DecodedString(v); ok {
			c.histAge, _ = fieldval.ParseMaxAge(s)
		}
	}
	c.deliveryLimit = -1
	if kind == TypeQuorum {
		c.deliveryLimit = deliveryLimitOf(get("delivery-limit"))
	}
	return c
}

// maxPriorityOf returns the highest priority level of a queue declared
// with args, as rabbit_priority_queue:priorities/1 computes it
// (x-max-priority clamped to 1..255), or 0 for a queue without priorities.
func maxPriorityOf(args map[string]any) int {
	v, ok := args["x-max-priority"]
	if !ok {
		return 0
	}
	n, ok := amqptab.DecodedInt(v)
	if !ok {
		return 0
	}
	return int(max(1, min(n, 255)))
}

// ApplyConfig re-resolves the queue's settings (a policy changed) and
// applies what changed.
func (q *Queue) ApplyConfig() {
	c := q.resolveConfig()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.closed {
		return
	}
	old := q.cfg.Swap(c)
	if old.expires != c.expires {
		q.touchLocked() // rabbit_amqqueue_process:init_exp restarts the timer
	}
	if old.histAge != c.histAge || old.histBytes != c.histBytes {
		q.scheduleLocked() // the sweep applies the new history limits
	}
	q.dropHeadLocked()
}
