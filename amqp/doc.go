// Package amqp serves AMQP 0-9-1 (port 5672) on top of package queues:
// connections, channels and the methods of RabbitMQ's dialect, with
// RabbitMQ 4.x's reply codes and texts.
//
// # Goroutines
//
// Each connection has a reader goroutine (conn.serve) that owns the
// handshake, the channel table, content assembly and every method, and a
// writer goroutine (outQueue.writeLoop) that owns the socket's write side
// and coalesces queued frames into single writes. Queue dispatchers call
// a consumer's Deliver from their own goroutines; log writers confirm
// publishes from theirs. Both reach a channel only through channel.mu
// (deliveries and unacked tags) and channel.conf (confirms). A consumer of
// a stream has a goroutine of its own that reads the stream and delivers
// through channel.mu (stream_consume.go).
//
// Once open, a connection is in the broker's list (queues.Conn, info.go):
// the management API's goroutines call Info, which reads the channel table
// under conn.chmu and each channel under channel.mu and confirms.mu, one
// lock at a time, and CloseForced, which leaves the close to the reader
// goroutine and wakes it with a past read deadline.
//
// # Streams
//
// A stream (x-queue-type=stream, or one the stream protocol created) is
// a queue to this front end: published messages are converted to AMQP
// 1.0 and appended (internal/msgconv, stream_publish.go); consumers read
// from an x-stream-offset with their prefetch count as credit, and
// deliveries are converted back, with an x-stream-offset header.
//
// # Lock order
//
//	channel.mu → queue locks (inside package queues) → outQueue.mu
//	confirms.mu → outQueue.mu
//	conn.chmu (the channel table; nothing is taken under it)
//
// Queues call Sink methods without their locks held, so a delivery may
// take channel.mu.
//
// # Errors
//
// A channel error (soft code) sends channel.close and ignores the channel
// until the close handshake ends; its consumers are cancelled and its
// unacked messages requeued at once, as RabbitMQ's channel process exits.
// A connection error (hard code) sends connection.close and waits, bounded,
// for close-ok.
package amqp
