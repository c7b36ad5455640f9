// Package policy is RabbitMQ's policies without their storage: what a
// policy is, how it is validated, which policy applies to a queue or an
// exchange, and how a policy value combines with a declare argument. It
// holds no state and does no I/O; the queues package keeps the policies of
// each vhost in its catalog, hands out versions, tells watchers, and calls
// this package to validate and resolve them.
//
// Policies are as RabbitMQ 4.3 has them (rabbit_policy, rabbit_policies
// and the queue types' capabilities): named, pattern-matched definitions
// that apply to existing and future queues and exchanges without
// redeclaring them. At most one policy applies to an entity: among the
// policies of its vhost whose pattern matches its name and whose apply-to
// fits it, the one with the highest priority (Set.Match). Operator
// policies are not modelled.
//
// Validation (Compile, validate.go) gives RabbitMQ's texts, byte for
// byte, since its HTTP API and CLI print them. The precedence of a policy
// value over a declare argument is in args.go (EffectiveQueueArg).
//
// An entity's kind is KindExchange or its queue type: KindClassic,
// KindQuorum or KindStream ("queue" is taken as classic). The queue type
// names are those of x-queue-type and of the queues package.
package policy
