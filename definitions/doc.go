// Package definitions reads and writes RabbitMQ's definitions documents
// (definitions.json, as GET/POST /api/definitions, rabbitmqctl
// export_definitions/import_definitions and load_definitions use them)
// and applies them to a queues.Broker through its public API.
//
// # The document
//
// One JSON object; every key is optional:
//
//	rabbit_version, rabbitmq_version   the exporter's version ("3.10.8")
//	product_name, product_version      informational
//	rabbitmq_definition_format, original_cluster_name, original_vhost_name,
//	explanation                        4.x: informational
//	users              [{name, password_hash, hashing_algorithm,
//	                     tags: ["a"] or "a,b" (3.8-), limits: {max-connections, max-channels}}]
//	vhosts             [{name, description, tags, default_queue_type,
//	                     metadata: {description, tags, default_queue_type} (3.11+),
//	                     limits: {..} or [[name, value]] (rabbitmqctl)}]
//	permissions        [{user, vhost, configure, write, read}]
//	topic_permissions  [{user, vhost, exchange, write, read}]
//	parameters         [{vhost, component, name, value}]
//	global_parameters  [{name, value}]
//	policies           [{vhost, name, pattern, apply-to, definition, priority}]
//	queues             [{name, vhost, durable, auto_delete, arguments}]
//	exchanges          [{name, vhost, type, durable, auto_delete, internal, arguments}]
//	bindings           [{source, vhost, destination, destination_type, routing_key, arguments}]
//
// A single virtual host's document (GET /api/definitions/{vhost}) has
// parameters, policies, queues, exchanges and bindings without vhost
// fields, and (4.x) the vhost's metadata, description,
// default_queue_type and limits at the top. Arguments are AMQP tables as
// JSON (see Arguments); a stream is a queue with x-queue-type stream; a
// super stream is a direct exchange with x-super-stream true, its
// partition streams and its bindings with x-stream-partition-order.
//
// # Import
//
// Import checks the whole document against the broker and itself before
// it changes anything: user hashes (queues.ValidHash), tag counts,
// limits, regular expressions, policies (queues/policy's validation),
// queue, stream and exchange declarations with their arguments and the
// exchange types (queues.Broker.CheckQueueDeclare and
// CheckExchangeDeclare), bindings (queues.CheckBinding) and that what an
// entity refers to (a user, a vhost, a binding's ends, a topic
// permission's exchange) exists or is in the document. A refused
// document is an *InvalidError listing the reasons; nothing was applied.
// The changes are then made in RabbitMQ's order; one that still fails
// stops the import with an error saying so (ErrPartial).
//
// Where RabbitMQ differs, for the record (3.10.8 checked, 4.x read):
//
//   - RabbitMQ validates each entity as it applies it, so a refused
//     document leaves what came before the refusal applied (the vhosts of
//     a document whose federation parameter is refused, say).
//   - RabbitMQ skips a queue or exchange that exists, whatever the
//     document says of it; Import refuses one that is not equivalent (the
//     redeclare's 406 text), since the document would not be what the
//     broker has.
//   - 3.10 ignores a binding whose source or destination is missing and
//     takes a topic permission on a missing exchange; Import refuses
//     both, as 4.x does.
//   - rabbitmqctl export_definitions leaves internal exchanges out but
//     not the bindings to them; RabbitMQ 3.x drops such a binding on
//     import without a word, Import refuses the document naming it.
//   - An entity defined twice differently is refused (RabbitMQ applies
//     one of them).
//   - A vhost given by name only (3.10's HTTP export) keeps an existing
//     vhost's description, tags and default queue type, which RabbitMQ
//     clears.
//   - Regular expressions are Go's (RE2): PCRE's backreferences and
//     lookaround are refused.
//
// As in RabbitMQ: the default exchange and the amq.* exchanges and
// queues are skipped; a user without a hashing algorithm gets MD5 in
// documents of 3.0 to 3.5 and SHA-256 otherwise, one with a password
// rather than a hash gets it hashed with SHA-256; a queue without
// x-queue-type gets its vhost's default queue type; global parameters
// named internal* (internal_cluster_id) are ignored and the others
// (cluster_name) stored.
//
// Runtime parameters: Warren has no federation, shovel or other plugin
// components, nor operator policies, and refuses their parameters as
// RabbitMQ refuses the parameters of a plugin that is not enabled
// ("component federation-upstream not found"); the vhost-limits
// parameter sets a vhost's limits.
//
// Limits (of users and vhosts) are stored and exported but not enforced
// yet. Topic permissions are enforced, as RabbitMQ does, on publishes to
// and bindings from topic exchanges (queues.Broker.CheckTopicPermission,
// called by the AMQP front end).
//
// # Export
//
// Export writes what RabbitMQ 4.x writes, sorted, without passwords
// (hashes only), exclusive queues, the default and amq.* exchanges nor
// the default exchange's implicit bindings.
//
// LoadFile reads a file or a directory of *.json files, for
// load_definitions at boot.
package definitions
