// Package classic is a classic or quorum queue (AMQP 0-9-1 queues): a
// view over the queue's private log (package osiris), with the rules
// RabbitMQ's classic and quorum queues apply to it: prefetch and
// channel-wide limits, consumer priorities and single active consumer,
// requeues, TTL and x-expires, length limits, priorities, dead-lettering
// with the x-death history, quorum delivery counting, and queue history
// (settled messages kept in the log within x-history-max-age and
// x-history-max-length-bytes, readable like a stream). A durable
// queue's ack state is kept in memory and persisted in batches by the
// broker's Persister (in the catalog, or, for a replicated quorum queue,
// in the queue's own log); after a crash, what was delivered but not
// acked is redelivered, never lost.
//
// The broker (package queues) owns the registry: it creates a queue's
// log and calls New, or reopens it and calls Recover, registers the
// queue, then calls Start; it ends a queue with BeginShutdown (or
// BeginExpiry) and FinishShutdown. The front ends publish, consume, get,
// ack, requeue and discard through the exported methods of Queue. A
// queue sees the broker only through its Env: the Broker interface (its
// settings under the policies, dead-letter routing and targets, the
// deletion of an unused or expired queue), the Persister, the logger and
// the clock (env.go). This package does not import queues.
//
// # Files
//
//	queue.go    the Queue, publishing (group commit per queue), basic.get,
//	            ack, requeue, purge, shutdown
//	consume.go  consumers, the dispatcher, channel-wide limits
//	sac.go      consumer priorities and single active consumer
//	ready.go    the ready messages by priority level
//	read.go     reading records back from the log
//	ttl.go      message TTL and x-expires
//	limits.go   x-max-length, x-max-length-bytes, x-overflow
//	dlx.go      dead-lettering; death.go: the dead-lettered record and x-death
//	quorum.go   what a quorum queue does differently
//	history.go  queue history: keeping settled segments within the
//	            history limits, and what history readers need
//	refs.go     fan-out by reference: how low a queue's references go
//	config.go   the effective settings: arguments and policy
//	record.go   the log record codec
//	persist.go  the Persister: writing the ack state
//	recover.go  the ack state codec and recovery
//
// The settled and claimed offsets are range sets (internal/rangeset).
//
// # Locking
//
// Lock order:
//
//	Queue.persistMu → Persister.flushMu → Queue.mu → Persister.mu
//	Queue.get → Queue.mu → ChannelLimit.mu
//	Queue.pub is a leaf.
//
// The broker's registry locks come before all of these; a queue calls
// its Broker with none of its locks held. No Queue.mu, get or pub is
// held while calling a Sink or anything that waits for a log's writer
// (whose callbacks take Queue.mu); persistMu, which only serialises
// sweeps with close, is, and get is held while basic.get waits for the
// Persister. So is Persister.flushMu while a flush or a final write
// waits for a LogState queue's log to take its state (persist.go): those
// callbacks take Queue.mu, never flushMu. Fields guarded by Queue.mu are
// in Queue.mu; functions that need it end in Locked.
//
// # Log records
//
// A queue's log holds one segment simple entry per message (u32 size,
// then the record); the record is AMQP 0-9-1 native, so that a delivery
// re-encodes nothing:
//
//	+----------+---------+----------+---------+-------------+----------+------------+------+
//	| flags u8 | xlen u8 | exchange | klen u8 | routing key | plen u32 | properties | body |
//	+----------+---------+----------+---------+-------------+----------+------------+------+
//
// flags bit 0 (recPersistent) is persistent (delivery-mode 2). Bit 1
// (recDeadLettered) marks a record the broker wrote when it dead-lettered
// a message: its x-death header is the broker's death history (death.go);
// a client's x-death header is not. Bit 2 (recKeysOnly) says the
// message's routing keys are its routing key alone, not also its CC
// header (it was dead-lettered with x-dead-letter-routing-key). Bit 3
// (recAMQP10) says a u32 length and an AMQP 1.0 properties section
// follow the properties: the section a message published over AMQP 1.0
// came with, which AMQP 1.0 consumers get back as sent (0-9-1 properties
// have no place for to, subject, absolute-expiry-time, group-sequence,
// reply-to-group-id, and keep creation-time in seconds); 0-9-1 consumers
// never see it. Bit 4 (recRef) makes the record a reference (below). The
// other bits are zero; bits 1 to 4 came later (a reader that predates one
// drops such records as malformed). exchange
// and routing key are AMQP shortstrs. properties are the content header's
// property flags (u16) and values exactly as consumers get them. The body
// is the rest of the record. Integers are big-endian. EncodeRecord writes the
// entry, so one encoded message is appended as is to every queue it is
// routed to.
//
// A reference record stands for a message stored once for several
// durable queues, in its vhost's body log (fan-out by reference: refs.go
// here, bodies.go in package queues); the body record there is the
// record above, byte for byte:
//
//	+------------------------+----------------+----------+-------------+-------------------+
//	| flags u8 (0x10 | 0x01) | body offset u64 | size u32 | priority u8 | expiration ms i64 |
//	+------------------------+----------------+----------+-------------+-------------------+
//
// Only recPersistent may go with recRef. size is the body's length,
// priority the message's priority property (0 when none; clamped to the
// queue's levels when read), expiration its expiration property in ms
// (-1 when none): what a queue needs at enqueue and recovery without
// reading the body. A taker, the dead-letter worker and a history reader
// read the body at the offset (bodyReader, read.go). A queue writes a
// reference only once its body is durable (BodyGate), and takes its
// references in body order. Every reference has a chunk filter value
// ('r' unless it has 't' or 'e' below).
//
// A durable queue's log also marks transient messages in the chunk Bloom
// filter (filter value "t"), and persistent messages with an expiration
// property (filter value "e"): a chunk without a Bloom filter holds only
// persistent messages without a per-message TTL, which lets recovery
// count them from the chunk headers alone (recover.go).
//
// # Ack state
//
// A durable queue's persisted state, besides its log, is its ack state,
// in the broker's catalog (pebble) under qa/<id u64 big-endian> (AckKey;
// id is the directory id of the queue's log), written with sync by the
// Persister at most persistInterval (100 ms) after a change and exactly
// when the queue closes, deleted with the queue:
//
//	+------------+------------------------+----------------+--------------------+
//	| version u8 | delivered mark uvarint | settled ranges | counts (version 2) |
//	+------------+------------------------+----------------+--------------------+
//
//	settled ranges  uvarint count, then per range (ascending) the uvarint
//	                gap from the previous range's end (from 0) and the
//	                uvarint length (rangeset.Set.AppendTo)
//	counts          uvarint count, then per entry (ids ascending) the
//	                uvarint distance from the previous id (from 0) and the
//	                uvarint delivery count (at least 1)
//
// The version is ackStateVersion, 2; version 1, without counts, is still
// read. The delivered mark is a reservation: every message below it may
// have been delivered (persist.go). The counts are a quorum queue's
// delivery counts, an empty list for a classic queue. What recovery makes
// of the ack state and the log is in recover.go.
//
// A queue whose Def has LogState (a replicated quorum queue) keeps the
// same ack state, byte for byte, in its own log instead, as the log's
// state blob (osiris.Stream.StoreState: a tracking-delta chunk, and the
// tracking snapshot that starts each segment; package osiris documents
// the record). Its members replicate the log, so a replica promoted to
// leader recovers the queue from its own copy (Recover reads
// osiris.Stream.State). The persister writes it at the same moments as
// a catalog state, and counts it on disk once the log has committed it
// (persist.go); nothing is under qa/<id> for such a queue, and deleting
// it deletes only its log. The state's chunks take log offsets between
// the messages; a queue settles the offsets that hold no message as it
// stores the batch after them (queue.go), and recovery does the same,
// so the head passes them and old segments are deleted as usual. Its
// records are never references (fan-out by reference): the body log is
// the node's own, and a promoted member would not have it.
//
// # History
//
// A queue with history limits (history.go) keeps its settled messages
// in its log: the sweep deletes a sealed segment only when it is wholly
// below the head and outside the limits (osiris.Stream.RetentionFloor).
// Nothing about the history is stored anywhere but in the log: its range
// and size are the log's, the limits are arguments or policy, so the
// formats above are unchanged and recovery is the same. A history
// reader (package queues) reads the log records with its own osiris
// reader and never touches the queue's state; HistoryDecoder turns a
// record into a Delivery (Delivery.History) whose properties carry the
// record's offset as the x-stream-offset header.
package classic
