// Package queues is the broker's model, shared by the protocol front ends:
// virtual hosts, users and their permissions, streams (queue destinations
// for AMQP too: stream_queue.go),
// AMQP exchanges and bindings (topology*.go: the API with RabbitMQ's
// checks and reply texts, the catalog records and the vhost locks, over
// package route, which indexes them and routes without storage), and
// classic queues as views over private
// logs (queue.go, classic*.go), all catalogued in pebble.
//
// Both this package and package route read AMQP field values as RabbitMQ
// does through package internal/fieldval.
//
// Catalog keys (values are JSON; argument tables inside them are typed,
// see table.go):
//
//	v/<vhost>                  VHost
//	u/<user>                   User (salted SHA-256 password hash)
//	p/<vhost> 0x00 <user>      Permissions (configure, write, read regexps)
//	s/<vhost> 0x00 <stream>    StreamDef (directory id and arguments)
//	x/<vhost> 0x00 <name>      a super stream before it was an exchange (read once, superstream_upgrade.go)
//	e/<vhost> 0x00 <exchange>  a durable exchange
//	b/<vhost> 0x00 <identity>  a binding whose source and destination are durable
//	q/<vhost> 0x00 <queue>     a durable queue (its log is queues/<id>)
//	qa/<id u64 big-endian>     a queue's ack state (queue_recover.go, queue_persist.go)
//	n/stream-id                the last directory id handed out (streams and queues)
//	pol/<vhost> 0x00 <name>    Policy (policy.go; definition values as JSON)
//
// Definitions are written with pebble.Sync before the call returns, so a
// protocol front end replies -ok only for what is on disk. Ack state
// (settled ranges, the delivered mark, quorum delivery counts) is written
// by one persister for all queues, in one synced batch at most every
// 100 ms, and exactly on close (queue_persist.go): after a crash, only
// messages acked in the last ~100 ms are redelivered, every message that
// may have been delivered comes back redelivered, and nothing is lost.
package queues
