package queues

// Exchanges, bindings and routing (AMQP 0-9-1 topology).
//
// SKELETON: the signatures below are the contract between the topology
// code, the queue code and the AMQP front end. The bodies are filled in
// by the topology work.

// Exchange types.
const (
	ExchangeDirect  = "direct"
	ExchangeFanout  = "fanout"
	ExchangeTopic   = "topic"
	ExchangeHeaders = "headers"
)

// DestKind says whether a binding's destination is a queue or an exchange.
type DestKind uint8

// Destination kinds.
const (
	DestQueue DestKind = iota
	DestExchange
)

// ExchangeDef is an exchange as declared.
type ExchangeDef struct {
	VHost      string
	Name       string
	Type       string
	Durable    bool
	AutoDelete bool
	Internal   bool
	Args       map[string]any
}

// BindingDef is one binding from an exchange to a queue or an exchange.
type BindingDef struct {
	VHost    string
	Source   string // exchange
	DestKind DestKind
	Dest     string
	Key      string
	Args     map[string]any
}

// DeclareExchange creates an exchange, or checks an existing one for
// equivalence (406 with RabbitMQ's "inequivalent arg" text). Names starting
// "amq." may not be created (403); an unknown type is 406 ("unknown
// exchange type 'foo'"); declaring the default exchange "" is 403.
// Durable exchanges are persisted before it returns.
func (b *Broker) DeclareExchange(def ExchangeDef) error { panic("topology: not implemented") }

// Exchange returns the exchange (the passive declare), or a 404 *Error
// "NOT_FOUND - no exchange 'x' in vhost '/'".
func (b *Broker) Exchange(vhost, name string) (ExchangeDef, error) {
	panic("topology: not implemented")
}

// DeleteExchange deletes an exchange and every binding from or to it. A
// missing exchange is not an error (RabbitMQ replies delete-ok). ifUnused
// refuses (406 "... in use") an exchange that is the source of a binding.
// amq.* and "" are 403.
func (b *Broker) DeleteExchange(vhost, name string, ifUnused bool) error {
	panic("topology: not implemented")
}

// Bind adds a binding (idempotent). The source exchange must exist (404,
// checked first), then the destination (404 for a missing queue or
// exchange). Binding to or from the default exchange is 403.
func (b *Broker) Bind(def BindingDef) error { panic("topology: not implemented") }

// Unbind removes a binding; a missing binding, source or destination is
// not an error.
func (b *Broker) Unbind(def BindingDef) error { panic("topology: not implemented") }

// Route appends to dst the names of the queues a message published to
// exchange in vhost reaches, each once. keys are the routing key followed
// by the CC and BCC keys; headers are the message headers (nil when none),
// used by headers exchanges. Exchange-to-exchange bindings and alternate
// exchanges are followed, each exchange visited once. A missing exchange
// is 404, an internal one 403. It allocates nothing in the steady state
// when dst has room.
func (b *Broker) Route(vhost, exchange string, keys []string, headers map[string]any, dst []string) ([]string, error) {
	panic("topology: not implemented")
}

// topoQueueAdded tells the topology that a queue exists (the default
// exchange routes to it; it may be bound). Called by the queue code after
// a queue is created or recovered.
func (b *Broker) topoQueueAdded(vhost, name string, durable bool) {}

// topoQueueRemoved removes a deleted queue's bindings (and auto-delete
// exchanges left without bindings). Called by the queue code.
func (b *Broker) topoQueueRemoved(vhost, name string) {}

// openTopology loads durable exchanges and bindings from the catalog and
// predeclares each vhost's standard exchanges. Called by Open before the
// queues are opened.
func (b *Broker) openTopology() error { return nil }
