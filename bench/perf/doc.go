// Package perf is the library behind tools/warren-perf, a load generator in
// the spirit of RabbitMQ's PerfTest and stream-perf-test that works against
// Warren and RabbitMQ alike (and, for a JetStream anchor, NATS).
//
// A workload is a Config plus a Run function: RunStream (the stream
// protocol: producers, consumers, sub-entries and compression, super
// streams, filters, named producers), RunAMQP (AMQP 0-9-1: classic, quorum
// and stream queues, confirms, prefetch, multi-ack, auto-ack, fan-out) and
// RunNATS (JetStream publish with acks and replay). Every run:
//
//   - is bounded by a message count per producer (Count), a publishing time
//     (Duration), or both, whichever comes first; consumers then drain what
//     was published and the run checks that every confirmed message arrived;
//   - can pace each producer to Rate messages per second (Limiter);
//   - stamps each body with its send time (8 bytes, big endian Unix
//     nanoseconds) followed by a sequence number, so consumers measure
//     end-to-end latency and producers measure confirm latency into a
//     Histogram;
//   - reports a Progress line every second through a callback and a
//     Summary at the end, whose Record form (labels and numeric metrics)
//     Report turns into medians and ratios.
//
// Nothing here keeps mutable package state; tests run workloads in
// parallel against brokers started in-process.
package perf
