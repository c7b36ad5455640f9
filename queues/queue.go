package queues

// Classic queues as views over a private log (AMQP 0-9-1 queues).
//
// SKELETON: the signatures below are the contract between the queue code,
// the topology code and the AMQP front end. The bodies are filled in by
// the queue work.

// Queue types.
const (
	QueueClassic = "classic"
	QueueQuorum  = "quorum"
	QueueStream  = "stream"
)

// QueueDef is a queue as declared.
type QueueDef struct {
	VHost      string
	Name       string
	ID         uint64 // the log's directory id
	Type       string // QueueClassic for now
	Durable    bool
	Exclusive  bool
	AutoDelete bool
	Args       map[string]any
}

// DeclareOptions is a queue.declare.
type DeclareOptions struct {
	Def     QueueDef // Name "" asks for a server-named queue (amq.gen-...)
	Passive bool
	// Owner identifies the declaring connection; exclusive queues belong
	// to it and are refused to other owners (405).
	Owner any
}

// Message is a message published to queues.
type Message struct {
	Exchange   string
	RoutingKey string
	// Props are the AMQP 0-9-1 content-header properties exactly as they
	// go to consumers: property flags (u16) followed by the values.
	Props      []byte
	Body       []byte
	Persistent bool // delivery-mode 2
}

// EncodeRecord appends m's log record (a segment simple entry) to dst.
// One record is shared by every queue the message is routed to.
func EncodeRecord(dst []byte, m *Message) []byte { panic("queue: not implemented") }

// Delivery is a message handed to a consumer or to basic.get. Its slices
// are valid only during the call that receives it.
type Delivery struct {
	Queue         *Queue
	ConsumerTag   string
	ID            uint64 // the message's id in the queue, for Ack/Requeue/Discard
	Redelivered   bool
	DeliveryCount uint32 // times delivered before
	Exchange      string
	RoutingKey    string
	Props         []byte
	Body          []byte
	MessageCount  uint32 // basic.get: ready messages left after this one
}

// Sink receives a consumer's deliveries.
type Sink interface {
	// Deliver is called by the queue (never with a queue lock held) for
	// each message given to the consumer, in queue order.
	Deliver(d *Delivery)
	// Cancelled is called when the queue ends the consumer itself (the
	// queue was deleted).
	Cancelled(q *Queue, tag string)
}

// ChannelLimit is a prefetch limit shared by the consumers of one channel
// (basic.qos global=true). Limit 0 means unlimited.
type ChannelLimit struct {
	Limit int
}

// ConsumerOptions is a basic.consume.
type ConsumerOptions struct {
	Tag       string
	NoAck     bool
	Exclusive bool
	Prefetch  int           // unacked deliveries allowed to this consumer; 0: unlimited
	Channel   *ChannelLimit // optional shared channel limit
	Owner     any           // the connection, for exclusive queues
	Sink      Sink
}

// Consumer is a registered consumer.
type Consumer struct{}

// Queue is an open queue.
type Queue struct{}

// DeclareQueue creates a queue or checks an existing one (equivalence 406,
// exclusivity 405, reserved amq. prefix 403). It returns the queue, its
// ready message count and consumer count.
func (b *Broker) DeclareQueue(o DeclareOptions) (q *Queue, messages, consumers int, err error) {
	panic("queue: not implemented")
}

// Queue returns an open queue, or a 404 *Error.
func (b *Broker) Queue(vhost, name string) (*Queue, error) { panic("queue: not implemented") }

// DeleteQueue deletes a queue (a missing one is not an error: count 0),
// cancelling its consumers. ifUnused / ifEmpty refuse with 406.
func (b *Broker) DeleteQueue(vhost, name string, owner any, ifUnused, ifEmpty bool) (messages int, err error) {
	panic("queue: not implemented")
}

// OwnerClosed deletes the exclusive queues of a closed connection.
func (b *Broker) OwnerClosed(owner any) {}

// openQueues recovers the queues in the catalog. Called by Open after
// openTopology.
func (b *Broker) openQueues() error { return nil }

// closeQueues closes every queue (persisting its state). Called by Close.
func (b *Broker) closeQueues() error { return nil }
