// Command warrenctl is a rabbitmqctl-like CLI that manages a Warren (or
// RabbitMQ) broker through the management HTTP API.
//
//	go run ./tools/warrenctl [--url http://localhost:15672] [--user guest] [--password guest]
//	                         [-p VHOST] [--formatter table|json] [-q] [-s] [--no-table-headers]
//	                         [-t SECONDS] VERB [args...]
//
// Options may come before or after the verb, as with rabbitmqctl; "--" ends
// them. WARRENCTL_URL, WARRENCTL_USER and WARRENCTL_PASSWORD are the
// defaults of --url, --user and --password. -t is the deadline of the whole
// command (default 60 seconds). `warrenctl help VERB` prints a verb's usage
// and the columns a list verb accepts.
//
// # Verbs
//
// rabbitmqctl's, with its argument syntax and column names:
//
//	status
//	cluster_status                   (the nodes from /api/nodes: disk, running)
//	forget_cluster_node NODE         (DELETE /api/nodes/NODE, Warren's: NODE stopped, not the one asked; no --offline)
//	add_user USER [PASSWORD]         (no PASSWORD: first line of stdin)
//	delete_user USER
//	change_password USER [PASSWORD]
//	set_user_tags USER [TAG...]
//	list_users
//	add_vhost VHOST [--description D] [--tags a,b] [--default-queue-type quorum|classic|stream]
//	delete_vhost VHOST
//	list_vhosts [COLUMN...]
//	set_permissions [-p VHOST] USER CONF WRITE READ
//	clear_permissions [-p VHOST] USER
//	list_permissions [-p VHOST]
//	list_user_permissions USER
//	set_policy [-p VHOST] [--priority N] [--apply-to queues|exchanges|all|classic_queues|quorum_queues|streams] NAME PATTERN DEFINITION
//	clear_policy [-p VHOST] NAME
//	list_policies [-p VHOST]
//	list_queues [-p VHOST] [COLUMN...]
//	list_exchanges [-p VHOST] [COLUMN...]
//	list_bindings [-p VHOST] [COLUMN...]
//	list_connections [COLUMN...]     (AMQP connections; stream ones are left out)
//	list_channels [COLUMN...]
//	list_consumers [-p VHOST] [COLUMN...]   (stream subscriptions too, as the API lists them)
//	purge_queue [-p VHOST] QUEUE
//	delete_queue [-p VHOST] QUEUE [--if-empty|-e] [--if-unused|-u]
//	close_connection CONNECTION_NAME REASON
//	export_definitions FILE|-
//	import_definitions [FILE|-]
//
// rabbitmq-streams':
//
//	add_super_stream NAME [-p VHOST] [--partitions N | --binding-keys a,b] [--max-length-bytes 20gb]
//	                 [--max-age PT10M|7D] [--stream-max-segment-size-bytes 500mb]
//	                 [--leader-locator client-local|balanced] [--initial-cluster-size N]
//	delete_super_stream NAME [-p VHOST]
//	stream_status [-p VHOST] [--tracking] STREAM [COLUMN...]
//	list_stream_connections [COLUMN...]
//	list_stream_publishers [-p VHOST] [COLUMN...]
//	list_stream_consumers [-p VHOST] [COLUMN...]
//	list_stream_consumer_groups [-p VHOST] [COLUMN...]
//
// Warren's own:
//
//	list_super_streams [-p VHOST] [COLUMN...]
//	list_stream_offsets [-p VHOST] [STREAM]
//	reset_stream_offset [-p VHOST] STREAM CONSUMER OFFSET|first|last|timestamp=MS_OR_RFC3339
//	list_stream_producers [-p VHOST] [STREAM]
//
// Each verb's file lists the endpoints it calls (users.go, vhosts.go,
// queues.go, connections.go, definitions.go, status.go, cluster.go,
// superstream.go, streams.go). Path segments are escaped one by one: the vhost "/" is %2F.
//
// # Output
//
// The table formatter prints what rabbitmqctl 3.10 prints: informational
// lines ("Listing queues for vhost / ..."), then a tab-separated header row
// and rows; an empty result prints no header. -q drops the informational
// lines, -s also the header, --no-table-headers only the header. Values are
// the API's: booleans true/false, numbers as sent, null as nothing, lists
// as [a, b], and objects (arguments, client_properties, properties) as
// rabbitmqctl prints AMQP tables: [{"x-queue-type","stream"},{"x-max-length",1000}].
// A policy definition prints as JSON. The HTTP API has no Erlang pids, so
// pid columns (pid, channel_pid, connection_pid) print the entity's name.
//
// --formatter json prints a JSON array with one object per row, the
// columns in the order asked for, "[\n{...}\n,{...}\n]" as rabbitmqctl
// lays it out; values are the API's JSON ({"x-queue-type":"stream"}, not
// rabbitmqctl's typed [["x-queue-type","longstr","stream"]]). Verbs that
// change something print {"result":"ok"}.
//
// # Errors
//
// Errors go to standard error as "Error:" and a message: the API's reason,
// or the verb's own for a 404 (`User "x" does not exist`), then the status
// and request. Exit codes are rabbitmqctl's:
//
//	0   success
//	64  usage: unknown verb or option, wrong argument count, unknown column, bad option value
//	65  data: 404 (not found), 400 and other 4xx (rejected), unreadable input file, invalid JSON input
//	67  no such user: 404 from delete_user, change_password, set_user_tags, list_user_permissions
//	69  unavailable: server unreachable, 401/403 (login or access refused), 503
//	70  software: other 5xx, a response that is not the expected JSON, add_user of an existing user
//	75  temporary: the -t deadline passed
package main
