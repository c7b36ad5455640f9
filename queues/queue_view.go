package queues

import "github.com/warren-mq/warren/queues/classic"

// The classic and quorum queue view lives in package classic, the broker
// side of it here (queue.go, queue_host.go). These are its names for the
// front ends.

// Queue types.
const (
	QueueClassic = classic.TypeClassic
	QueueQuorum  = classic.TypeQuorum
	QueueStream  = "stream"
)

type (
	// QueueDef is a queue as declared.
	QueueDef = classic.Def
	// Queue is an open classic or quorum queue.
	Queue = classic.Queue
	// Message is a message published to queues.
	Message = classic.Message
	// Delivery is a message handed to a consumer or to basic.get.
	Delivery = classic.Delivery
	// Sink receives a consumer's deliveries.
	Sink = classic.Sink
	// ConsumerOptions is a basic.consume.
	ConsumerOptions = classic.ConsumerOptions
	// Consumer is a registered consumer.
	Consumer = classic.Consumer
	// ChannelLimit is a prefetch limit shared by the consumers of one
	// channel across queues.
	ChannelLimit = classic.ChannelLimit
	// Settler is where deliveries are settled: a classic or quorum
	// queue, or a StreamConsumer.
	Settler = classic.Settler
	// HeaderEntry is a 0-9-1 headers-table entry (Annotate).
	HeaderEntry = classic.HeaderEntry
	// HistoryStats describe a queue's history (classic/history.go).
	HistoryStats = classic.HistoryStats
)

// ErrRejectPublish is the refusal of a publish by a queue at its length
// limit with x-overflow reject-publish or reject-publish-dlx.
var ErrRejectPublish = classic.ErrRejectPublish

// EncodeRecord appends m's queue log record to dst (classic.EncodeRecord).
func EncodeRecord(dst []byte, m *Message) []byte { return classic.EncodeRecord(dst, m) }

// DeliveryProps returns the properties to send with d
// (classic.DeliveryProps).
func DeliveryProps(dst []byte, d *Delivery) []byte { return classic.DeliveryProps(dst, d) }

// AnnotatedProps returns d's properties with its annotations merged in
// (classic.AnnotatedProps).
func AnnotatedProps(dst []byte, d *Delivery) []byte { return classic.AnnotatedProps(dst, d) }

func errNoQueue(vhost, name string) *Error { return classic.NoQueueError(vhost, name) }

func errQueueLocked(vhost, name string) *Error { return classic.LockedError(vhost, name) }

// ErrQueueLocked is 405 for another connection's exclusive queue.
func ErrQueueLocked(vhost, name string) *Error { return errQueueLocked(vhost, name) }
