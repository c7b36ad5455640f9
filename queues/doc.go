// Package queues is the broker's model, shared by the protocol front ends:
// virtual hosts, users and their permissions (topic permissions checked
// in topic_auth.go), streams (queue destinations
// for AMQP too: stream_queue.go), AMQP exchanges and bindings
// (topology*.go: the API with RabbitMQ's checks and reply texts, the
// catalog records and the vhost locks, over package route), the registry
// of classic and quorum
// queues (queue.go: declare, lookup, delete, recovery; queue_args.go and
// queue_quorum.go: the declare rules; queue_host.go: what the queues ask
// of the broker), and policies (policy.go: their catalog, versions and
// watchers; stream_policy.go: stream retention under them), all
// catalogued in pebble; and, in memory, the front ends' open client
// connections (conns.go: what the management API lists and closes).
//
// Every queue type is behind the same interfaces for the front ends:
// Broker.Consume attaches a consumer to a classic, quorum or stream queue
// (a stream's consumer, with credit and offsets, is stream_consume.go),
// deliveries of any type reach a Sink and are settled through a Settler,
// and Publish stores a routed message in Destinations of any type, each
// storage format encoded once (destination.go).
//
// Sub-packages, which do not import queues:
//
//	classic  a classic or quorum queue: the view over its private log, its
//	         ack state and the persister that writes it; queue_view.go
//	         names its types for the front ends (Queue, Delivery, Sink, ...)
//	policy   what a policy is, its validation, which one applies to an
//	         entity and how its values combine with declare arguments; it
//	         holds no state
//	route    the exchange and binding index of a vhost and routing,
//	         without storage or locks; topology_alias.go names its types
//	qerr     the errors that carry an AMQP reply code; errors.go names
//	         them here (Error, Errorf, CodeNotFound, ...)
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
//	qa/<id u64 big-endian>     a queue's ack state (package classic)
//	n/stream-id                the last directory id handed out (streams and queues)
//	n/catalog-applied          in a cluster, the last catalog log index applied (replicate.go)
//	pol/<vhost> 0x00 <name>    policy.Policy (policy.go; definition values as JSON)
//	tp/<vhost> 0x00 <user> 0x00 <exchange>  TopicPermission (access.go)
//	gp/<name>                  GlobalParameter (global_params.go)
//
// In a cluster, the changes of vhosts, users, permissions, topic
// permissions, global parameters, policies, exchanges and bindings between
// exchanges are commands of the cluster's catalog log, applied on every
// node in log order (replicate.go, commands.go); CatalogSnapshot and
// RestoreCatalog carry that part of the catalog whole
// (catalog_snapshot.go). Queues, streams and bindings to them are still
// the declaring node's own.
//
// Definitions are written with pebble.Sync before the call returns, so a
// protocol front end replies -ok only for what is on disk. Ack state
// (settled ranges, the delivered mark, quorum delivery counts) is written
// by one persister for all queues (classic.Persister), in one synced
// batch at most every 100 ms, and exactly on close: after a crash, only
// messages acked in the last ~100 ms are redelivered, every message that
// may have been delivered comes back redelivered, and nothing is lost.
package queues
