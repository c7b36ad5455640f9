// Package route is the exchange and binding index of one vhost and the
// routing over it, as RabbitMQ 4.3 routes (rabbit_exchange:route/3 and
// the exchange type modules): a function from an exchange, a message's
// routing keys, headers and properties to the set of queues it reaches.
// It holds no storage, does no I/O and takes no locks; the broker model
// (package queues) checks declarations with RabbitMQ's reply texts,
// persists the durable part of each change, and guards each Index with
// its vhost's locks.
//
// An Index holds the vhost's exchanges (the standard ones from the
// start), its queues as routing destinations, and its bindings, each
// binding resolved to its source and destination and registered in its
// source's routing index:
//
//	direct             keys → bindings (a map)
//	fanout             every binding
//	topic              a trie over the words of the binding keys, matched
//	                   as an NFA ("*" one word, "#" any number; topic.go)
//	headers            bindings tried in turn against the message headers,
//	                   whose keys are interned per exchange (headers.go)
//	x-consistent-hash  a hash ring of 100 points per unit of binding
//	                   weight, independent of binding order (hash.go)
//	x-modulus-hash     bindings in a fixed order, hash mod count
//	x-local-random     a random binding (hash_pick.go)
//
// Route is a worklist traversal from the exchange published to, over
// exchange-to-exchange bindings and alternate exchanges, that visits each
// exchange once and adds each queue once (route.go). Exchanges and queues
// have small dense ids so that the visited sets are generation-stamped
// slices in pooled scratch state: routing allocates nothing once that
// scratch has grown to the vhost's size and dst has room. The default
// exchange "" routes to the queue named by each key.
//
// Changes are Change values: an exchange and bindings to add, or bindings
// and exchanges to delete, with what a deletion implies (the bindings of
// a deleted exchange, auto-delete exchanges left unused). The writer
// builds one reading the index, stores what is durable, then applies it
// (Index.Apply) with exclusive access. A binding's identity
// (BindingDef.Ident) is its source, destination, key and typed
// arguments, as RabbitMQ compares bindings; the broker's catalog keys
// bindings by it.
package route
