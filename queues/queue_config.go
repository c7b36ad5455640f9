package queues

import (
	"github.com/warren-mq/warren/internal/amqptab"
	"github.com/warren-mq/warren/queues/policy"
)

// A classic queue's effective settings: its declare arguments combined
// with the policy that applies to it (policy.go, package policy), as
// rabbit_amqqueue_process:process_args_policy/1 resolves them: the
// minimum of argument and policy for message-ttl, expires, max-length and
// max-length-bytes; the argument wins for dead-letter-exchange,
// dead-letter-routing-key and overflow. A policy change applies to the
// existing queues at once, without a redeclare (the broker watches the
// policies; see watchQueuePolicies). x-max-priority is an argument only:
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
	// (queue_quorum.go).
	deliveryLimit int64
}

// limited reports whether a length limit applies.
func (c *queueConfig) limited() bool { return c.maxLen >= 0 || c.maxBytes >= 0 }

// config returns the queue's effective settings.
func (q *Queue) config() *queueConfig { return q.cfg.Load() }

// resolveConfig resolves the queue's settings from its arguments and the
// policy that applies to it now. It is the one place the policy lookup
// plugs in.
func (q *Queue) resolveConfig() *queueConfig {
	kind := q.kind()
	pol, _ := q.b.EffectivePolicy(q.def.VHost, q.def.Name, kind)
	get := func(key string) (any, bool) { return policy.EffectiveQueueArg(kind, key, q.def.Args, pol) }
	intOr := func(key string, dflt int64) int64 {
		if v, ok := get(key); ok {
			if n, ok := argInt(v); ok {
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
			if kind == QueueQuorum {
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
	c.deliveryLimit = -1
	if kind == QueueQuorum {
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
	n, ok := argInt(v)
	if !ok {
		return 0
	}
	return int(max(1, min(n, 255)))
}

// applyConfig re-resolves the queue's settings (a policy changed) and
// applies what changed.
func (q *Queue) applyConfig() {
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
	q.dropHeadLocked()
}

// watchQueuePolicies makes policy changes apply to the vhost's classic
// queues. Called once per broker, before the first queue opens.
func (b *Broker) watchQueuePolicies() {
	reg := b.queueReg()
	reg.watchOnce.Do(func() {
		b.WatchPolicies(func(vhost string) {
			for _, q := range b.Queues(vhost) {
				q.applyConfig()
			}
		})
	})
}
