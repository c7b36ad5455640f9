package route

import "github.com/warren-mq/warren/queues/internal/fieldval"

// Exchange types.
const (
	ExchangeDirect  = "direct"
	ExchangeFanout  = "fanout"
	ExchangeTopic   = "topic"
	ExchangeHeaders = "headers"

	// Beyond AMQP 0-9-1 (hash*.go).
	ExchangeConsistentHash = "x-consistent-hash"
	ExchangeModulusHash    = "x-modulus-hash"
	ExchangeLocalRandom    = "x-local-random"
)

// KnownType reports whether typ is an exchange type this package routes.
func KnownType(typ string) bool {
	_, ok := newRouter(typ)
	return ok
}

// ArgAlternateExchange is the exchange argument naming the exchange that
// gets what an exchange does not route.
const ArgAlternateExchange = "alternate-exchange"

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

// Ident is the binding's identity within its vhost: source, destination
// kind and name, key and arguments (typed, sorted by key), as RabbitMQ
// compares bindings. Two definitions with one identity are one binding.
// The broker's catalog keys bindings by it, so its encoding is frozen:
//
//	string(Source) | DestKind u8 | string(Dest) | string(Key) | table(Args)
//
// in package fieldval's canonical encoding.
func (d BindingDef) Ident() string {
	b := make([]byte, 0, 16+len(d.Source)+len(d.Dest)+len(d.Key))
	b = fieldval.AppendString(b, d.Source)
	b = append(b, byte(d.DestKind))
	b = fieldval.AppendString(b, d.Dest)
	b = fieldval.AppendString(b, d.Key)
	b = fieldval.AppendTable(b, d.Args)
	return string(b)
}

// RoutingMessage is what routing reads of a published message.
type RoutingMessage struct {
	Keys    []string       // the routing key, then the CC and BCC keys
	Headers map[string]any // the message headers, nil when none
	Props   RoutingProps
}

// RoutingProps are the message properties an exchange may route on
// (x-consistent-hash's hash-property). The slices may alias the raw
// content header: routing does not keep them.
type RoutingProps struct {
	MessageID     []byte // message-id, nil when absent
	CorrelationID []byte // correlation-id, nil when absent
	Timestamp     uint64 // timestamp in seconds, when HasTimestamp
	HasTimestamp  bool
}
