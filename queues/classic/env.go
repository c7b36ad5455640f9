package classic

import (
	"log/slog"
	"time"

	"github.com/warren-mq/warren/internal/amqptab"
	"github.com/warren-mq/warren/osiris"
)

// What a queue needs of the broker that opened it. A queue reaches the
// broker only through its Env: the registry's decisions (deleting an
// unused or expired queue, finding a dead-letter target), the policies
// that make its settings, and the routing of its dead letters. The rest
// of the broker is none of its business.

// Broker is the broker as its queues see it. Its methods are called
// without any queue lock held; they may take the broker's locks and the
// locks of other queues.
type Broker interface {
	// Args returns the lookup of a queue's effective settings: for a
	// policy key ("message-ttl"), the value its declare argument and the
	// policy that applies to it now give, by the broker's precedence
	// rules, or false when neither sets it. kind is TypeClassic or
	// TypeQuorum.
	Args(kind string, def *Def) func(key string) (any, bool)
	// RouteDeadLetter appends to dst the names of the queues dl reaches
	// through exchange in vhost. A missing exchange is an error (the
	// message is dropped).
	RouteDeadLetter(vhost, exchange string, dl *DeadLetter, dst []string) ([]string, error)
	// Queue returns an open queue: a dead-letter target.
	Queue(vhost, name string) (*Queue, error)
	// Unused is called when the last consumer of an auto-delete queue
	// went: the broker deletes the queue unless it got a new one.
	Unused(q *Queue)
	// Expired is called when a queue's x-expires timer fires: the broker
	// deletes the queue if it is still unused (BeginExpiry).
	Expired(q *Queue)
	// BodyLog returns the body log of vhost: the log the queue's
	// reference records (fan-out by reference) point into.
	BodyLog(vhost string) (*osiris.Stream, error)
}

// DeadLetter is what routing reads of a dead-lettered message. Its
// slices alias the message: routing must not keep them.
type DeadLetter struct {
	Keys      []string       // routing keys at the dead-letter exchange
	Headers   map[string]any // the message's headers
	Props     []byte         // its content-header properties
	PropsView amqptab.Props  // Props, scanned
}

// Env is what the queues of one broker share. Static.
type Env struct {
	Broker    Broker
	Persister *Persister // writes the ack state of durable queues (persist.go)
	Logger    *slog.Logger
	Now       func() time.Time // the clock; nil: time.Now
	// DeadLettered counts dead-lettered messages (dlx.go); nil counts
	// nothing.
	DeadLettered *DeadLetterCounters
}
