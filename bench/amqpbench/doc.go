// Package amqpbench is an AMQP 0-9-1 workload for comparing Warren with
// RabbitMQ on the same machine, in the same run, through the same real
// client (github.com/rabbitmq/amqp091-go). It mirrors bench/streambench.
//
// A workload is a Config; RunScenario runs it once against Config.URL and
// returns a Result. The package owns no mutable globals.
//
// # Scenarios
//
//   - classic-1p1c: a fresh durable classic queue (a unique name per run,
//     deleted afterwards), one publisher connection and one consumer
//     connection.
//   - quorum-1p1c: the same with x-queue-type=quorum. A broker that refuses
//     the declare fails the run with an error wrapping ErrDeclare.
//   - fanout: a fresh fanout exchange bound to Config.Queues fresh durable
//     queues (classic unless Config.QueueType says otherwise), one publisher
//     connection and one consumer per queue, each on its own channel, spread
//     over Config.ConsumerConnections connections.
//
// In every scenario the publisher puts its channel in confirm mode and
// publishes persistent messages (delivery mode 2, unless Config.Transient)
// of Config.MessageSize bytes, to the default exchange with the queue's name
// as routing key (1p1c) or to the fanout exchange, keeping at most
// Config.MaxInFlight messages unconfirmed. Confirms are counted from a
// Channel.NotifyPublish listener: the client turns an ack with multiple=true
// into one Confirmation per delivery tag, in tag order, so every message is
// counted once. A nack fails the run (ErrNacked).
//
// Every consumer sets Qos(Config.Prefetch) and consumes with manual acks,
// acking with multiple=true every Config.AckEvery messages and the rest when
// its last message has arrived.
//
// The run is bounded by Config.Count messages, by Config.Duration of
// publishing, or by whichever comes first when both are set. Consumers are
// subscribed before the first publish; the clock starts at the first publish.
//
// # What is measured
//
//   - publish: confirmed messages / (first publish to last confirm).
//   - end to end: published messages / (first publish to the moment the last
//     consumer got its last message); for fanout, delivered is the same
//     over all deliveries (messages × queues).
//   - consume: deliveries / (first delivery to last delivery).
//   - latency: each body starts with its send time (unix nanoseconds, big
//     endian, when Config.MessageSize ≥ 8; the rest is 0x5A filler); every
//     delivery yields publish-to-delivery latency (p50/p99/max). Each confirm
//     yields publish-to-confirm latency too.
//   - broker CPU (utime+stime from /proc/PID/stat) and bytes written to the
//     storage layer (write_bytes from /proc/PID/io, which needs root or the
//     broker's user) over the measured part of the run, when
//     Config.BrokerPID is set; WritePerPublishedByte divides the latter by
//     the published body bytes.
package amqpbench
