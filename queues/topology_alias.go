package queues

import "github.com/warren-mq/warren/queues/route"

// The routing types the broker's API uses, defined by package route (the
// exchange and binding index) and re-exported here so that the front ends
// need only this package.

// Exchange types.
const (
	ExchangeDirect  = route.ExchangeDirect
	ExchangeFanout  = route.ExchangeFanout
	ExchangeTopic   = route.ExchangeTopic
	ExchangeHeaders = route.ExchangeHeaders

	ExchangeConsistentHash = route.ExchangeConsistentHash
	ExchangeModulusHash    = route.ExchangeModulusHash
	ExchangeLocalRandom    = route.ExchangeLocalRandom
)

// DestKind says whether a binding's destination is a queue or an exchange.
type DestKind = route.DestKind

// Destination kinds.
const (
	DestQueue    = route.DestQueue
	DestExchange = route.DestExchange
)

// ExchangeDef is an exchange as declared.
type ExchangeDef = route.ExchangeDef

// BindingDef is one binding from an exchange to a queue or an exchange.
type BindingDef = route.BindingDef

// RoutingMessage is what routing reads of a published message.
type RoutingMessage = route.RoutingMessage

// RoutingProps are the message properties an exchange may route on
// (x-consistent-hash's hash-property). The slices may alias the raw
// content header: routing does not keep them.
type RoutingProps = route.RoutingProps

const argAlternateExchange = route.ArgAlternateExchange
