// Package superstream is super streams over the broker's model, between
// the protocol front ends and package queues.
//
// A super stream is what RabbitMQ makes of it: a durable direct exchange
// with the argument x-super-stream=true, bound to one stream per
// partition with the partition's binding key and the argument
// x-stream-partition-order (its index). It is stored as that exchange and
// those bindings, nothing else, so AMQP 0-9-1 clients see the exchange
// and publish to it, and topology declared over AMQP is a super stream to
// the stream protocol. Manager creates and deletes super streams and
// answers the stream protocol's Partitions and Route queries, with the
// stream plugin's permission checks.
//
// The single-active-consumer Coordinator (sac.go) groups stream
// subscriptions by consumer name and picks the active member, by
// partition index on the partitions of a super stream.
package superstream
