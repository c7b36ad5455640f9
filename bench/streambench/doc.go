// Package streambench is a stream-protocol workload for comparing Warren
// with RabbitMQ on the same machine, in the same run, through the same real
// client (github.com/rabbitmq/rabbitmq-stream-go-client).
//
// A workload is a Config plus Run* functions; the package owns no mutable
// globals (the stream client itself logs through a package-level logger,
// which only cmd/streambench touches).
//
//   - RunPublish deletes and re-declares Config.Stream, then publishes
//     Config.Messages messages of Config.MessageSize bytes from
//     Config.Producers producers with BatchSend, Config.BatchSize messages per
//     call, and waits until every message is confirmed. Its clock runs from
//     the first send to the last confirm.
//   - RunReplay subscribes one consumer at offset "first" and counts
//     messages until Config.Messages have arrived. Its clock runs from the
//     subscribe call to the last message.
//
// # Message body
//
//	+------------------+------------------+---------------------+
//	| send time u64 BE | sequence u64 BE  | filler (0x5A bytes) |
//	| (unix nanos)     | (per producer)   |                     |
//	+------------------+------------------+---------------------+
//
// The body is exactly Config.MessageSize bytes (at least 16), wrapped in an
// AMQP 1.0 data section by the client (a few bytes more on the wire). The
// send time gives the publish-to-confirm latency reported in Result.
//
// # Client behaviour this package works around
//
//   - Address resolution. Producers and consumers connect to the stream
//     leader named in the broker's metadata. The environment is given an
//     AddressResolver equal to Config.Addr, so every connection goes to
//     Config.Addr whatever host the broker advertises. The client then
//     still compares the advertised_host/advertised_port of the broker's
//     open response with the leader host/port of its metadata and, while
//     they differ, reconnects forever with a 0.5–1.5 s sleep; Config.SetupTimeout
//     bounds producer and consumer creation so that such a broker fails the
//     run instead of hanging it.
//   - Back-pressure. BatchSend blocks once more than ProducerOptions.QueueSize
//     messages are unconfirmed, on a condition variable whose wake-up can be
//     missed (it then waits for the confirmation-timeout tick, 10 s). Each
//     producer here keeps its own window of Config.MaxInFlight unconfirmed
//     messages, below QueueSize, so that path is never taken.
//   - Socket buffers. The client sets SO_SNDBUF/SO_RCVBUF to 8 KiB by
//     default; Config.SocketBuffer overrides that (see its comment).
package streambench
