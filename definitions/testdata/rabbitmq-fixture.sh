#!/usr/bin/env bash
# rabbitmq-fixture.sh makes definitions/testdata/rabbitmq-3.10.8.json from a
# running RabbitMQ with the management plugin (README.md says which one):
#
#   bash rabbitmq-fixture.sh create   # the defs-* entities
#   bash rabbitmq-fixture.sh export   # GET /api/definitions, kept to defs-* and guest
#   bash rabbitmq-fixture.sh export-ctl  # rabbitmqctl export_definitions, likewise
#   bash rabbitmq-fixture.sh check-export  # Warren's export into the RabbitMQ and back
#   bash rabbitmq-fixture.sh clean    # delete the defs-* entities again
#
# Only names starting with defs- are created, so a shared node is not
# disturbed. RABBIT_API is the management API (default the bench node of
# bench/rabbitmq.sh with WARREN_BENCH_RABBIT_MGMT=1), RABBIT_AUTH its
# credentials.
set -euo pipefail

API=${RABBIT_API:-http://127.0.0.1:15999/api}
AUTH=${RABBIT_AUTH:-guest:guest}
HERE=$(cd "$(dirname "$0")" && pwd)

# api METHOD PATH [JSON]: one management API call; fails on an HTTP error.
api() {
	local method=$1 path=$2 body=${3:-}
	if [[ -n $body ]]; then
		curl -fsS -u "$AUTH" -X "$method" -H 'content-type: application/json' -d "$body" "$API$path"
	else
		curl -fsS -u "$AUTH" -X "$method" "$API$path"
	fi
}

create() {
	# Virtual hosts with metadata (3.10 stores it, the default queue type
	# under the HTTP API's defaultqueuetype; its HTTP export keeps the name only).
	api PUT /vhosts/defs-a '{"description":"definitions fixture A","tags":"fixture,a","defaultqueuetype":"classic"}'
	api PUT /vhosts/defs-b '{"description":"definitions fixture B","tags":"fixture","defaultqueuetype":"quorum"}'
	# Users: a password (hashed by RabbitMQ, SHA-256), a SHA-512 hash made
	# here (salt 0badf00d, password bob-secret), and no password at all.
	api PUT /users/defs-alice '{"password":"alice-secret","tags":"management,policymaker"}'
	api PUT /users/defs-bob '{"password_hash":"C63wDXjIhQdy5VcmjvQKyM2hSTRIKG0W//FaPmQKylcbPdE4xT/jSKi/u6ZluGfPiHdiMtAAqITuoh7st0lmnUd5ejw=","hashing_algorithm":"rabbit_password_hashing_sha512","tags":"monitoring"}'
	api PUT /users/defs-carol '{"password_hash":"","tags":""}'
	api PUT /user-limits/defs-alice/max-connections '{"value":10}'
	api PUT /user-limits/defs-alice/max-channels '{"value":20}'
	api PUT /vhost-limits/defs-a/max-queues '{"value":50}'
	api PUT /vhost-limits/defs-a/max-connections '{"value":100}'
	api PUT /permissions/defs-a/guest '{"configure":".*","write":".*","read":".*"}'
	api PUT /permissions/defs-a/defs-alice '{"configure":".*","write":".*","read":".*"}'
	api PUT /permissions/defs-b/defs-alice '{"configure":"^defs-","write":"^defs-","read":"^defs-"}'
	api PUT /permissions/defs-a/defs-bob '{"configure":"","write":"","read":".*"}'
	api PUT /permissions/defs-b/guest '{"configure":".*","write":".*","read":".*"}'

	# Exchanges of each built-in type, an internal one, an auto-delete one,
	# one with an alternate exchange, and a super stream's.
	local x
	for x in 'defs-direct direct' 'defs-topic topic' 'defs-fanout fanout' 'defs-headers headers' 'defs-ae fanout' 'defs-dlx direct'; do
		set -- $x
		api PUT "/exchanges/defs-a/$1" "{\"type\":\"$2\",\"durable\":true}"
	done
	api PUT /exchanges/defs-a/defs-internal '{"type":"topic","durable":true,"internal":true}'
	api PUT /exchanges/defs-a/defs-autodelete '{"type":"direct","durable":true,"auto_delete":true}'
	api PUT /exchanges/defs-a/defs-with-ae '{"type":"direct","durable":true,"arguments":{"alternate-exchange":"defs-ae"}}'
	api PUT /exchanges/defs-b/defs-ss '{"type":"direct","durable":true,"arguments":{"x-super-stream":true}}'
	api PUT /exchanges/defs-b/defs-b-topic '{"type":"topic","durable":false}'

	# Queues: classic with arguments, a transient one, quorum, stream.
	api PUT /queues/defs-a/defs-cq '{"durable":true,"arguments":{"x-max-length":500,"x-overflow":"reject-publish","x-dead-letter-exchange":"defs-dlx","x-dead-letter-routing-key":"dead","x-max-priority":10,"x-message-ttl":60000}}'
	api PUT /queues/defs-a/defs-dead '{"durable":true}'
	api PUT /queues/defs-a/defs-transient '{"durable":false,"auto_delete":false,"arguments":{"x-expires":3600000}}'
	api PUT /queues/defs-a/defs-qq '{"durable":true,"arguments":{"x-queue-type":"quorum","x-delivery-limit":3,"x-max-length-bytes":1048576}}'
	api PUT /queues/defs-a/defs-stream '{"durable":true,"arguments":{"x-queue-type":"stream","x-max-length-bytes":100000000,"x-max-age":"7D","x-stream-max-segment-size-bytes":5000000}}'
	api PUT /queues/defs-b/defs-b-qq '{"durable":true,"arguments":{"x-queue-type":"quorum","x-dead-letter-strategy":"at-least-once","x-overflow":"reject-publish"}}'
	api PUT /queues/defs-b/defs-ss-0 '{"durable":true,"arguments":{"x-queue-type":"stream"}}'
	api PUT /queues/defs-b/defs-ss-1 '{"durable":true,"arguments":{"x-queue-type":"stream"}}'
	api PUT /queues/defs-b/defs-ss-2 '{"durable":true,"arguments":{"x-queue-type":"stream"}}'

	# Bindings: to queues, a stream and exchanges, from amq.topic, headers
	# bindings with arguments, the super stream's partitions.
	api POST /bindings/defs-a/e/defs-direct/q/defs-cq '{"routing_key":"k1"}'
	api POST /bindings/defs-a/e/defs-direct/q/defs-qq '{"routing_key":"k1","arguments":{"x-note":"direct binding with an argument"}}'
	api POST /bindings/defs-a/e/defs-topic/q/defs-cq '{"routing_key":"defs.#"}'
	api POST /bindings/defs-a/e/defs-topic/e/defs-fanout '{"routing_key":"audit.*"}'
	api POST /bindings/defs-a/e/defs-fanout/q/defs-stream '{"routing_key":""}'
	api POST /bindings/defs-a/e/defs-fanout/e/defs-internal '{"routing_key":""}'
	api POST /bindings/defs-a/e/defs-headers/q/defs-dead '{"routing_key":"","arguments":{"x-match":"all","format":"pdf","type":"report"}}'
	api POST /bindings/defs-a/e/defs-headers/q/defs-cq '{"routing_key":"","arguments":{"x-match":"any","format":"zip","size":42}}'
	api POST /bindings/defs-a/e/defs-ae/q/defs-dead '{"routing_key":""}'
	api POST /bindings/defs-a/e/defs-dlx/q/defs-dead '{"routing_key":"dead"}'
	api POST /bindings/defs-a/e/amq.topic/q/defs-qq '{"routing_key":"defs.alice.#"}'
	api POST /bindings/defs-a/e/defs-autodelete/q/defs-dead '{"routing_key":"ad"}'
	local i
	for i in 0 1 2; do
		api POST "/bindings/defs-b/e/defs-ss/q/defs-ss-$i" "{\"routing_key\":\"$i\",\"arguments\":{\"x-stream-partition-order\":$i}}"
	done
	api POST /bindings/defs-b/e/defs-b-topic/q/defs-b-qq '{"routing_key":"#"}'

	# Topic permissions (after the exchanges: 4.x requires them to exist).
	api PUT /topic-permissions/defs-a/defs-alice '{"exchange":"amq.topic","write":"^defs\\.alice\\.","read":".*"}'
	api PUT /topic-permissions/defs-a/defs-bob '{"exchange":"defs-topic","write":"^$","read":"^logs\\."}'

	# Policies.
	api PUT /policies/defs-a/defs-cq-policy '{"pattern":"^defs-cq$","apply-to":"queues","definition":{"max-length-bytes":1000000,"expires":86400000},"priority":1}'
	api PUT /policies/defs-a/defs-ae-policy '{"pattern":"^defs-direct$","apply-to":"exchanges","definition":{"alternate-exchange":"defs-ae"},"priority":0}'
	api PUT /policies/defs-a/defs-stream-policy '{"pattern":"^defs-stream","apply-to":"queues","definition":{"max-age":"1D","stream-max-segment-size-bytes":2000000},"priority":2}'
	api PUT /policies/defs-b/defs-b-policy '{"pattern":".*","apply-to":"all","definition":{"dead-letter-exchange":"defs-dlx","delivery-limit":5},"priority":0}'

	# A global parameter of one's own (cluster_name is the node's: left alone).
	api PUT /global-parameters/defs-note '{"value":{"made-by":"definitions/testdata/rabbitmq-fixture.sh"}}'
}

# keep filters a definitions document on stdin down to the defs-* entities
# and guest (the user and its permissions in the defs-* vhosts), and the
# internal cluster id (to test that an import ignores it), sorted.
keep() {
	jq --indent 2 '
		def defs: startswith("defs-");
		.users |= (map(select((.name | defs) or .name == "guest")) | sort_by(.name))
		| .vhosts |= (map(select(.name | defs)) | sort_by(.name))
		| .permissions |= (map(select(.vhost | defs)) | sort_by(.vhost, .user))
		| .topic_permissions |= (map(select(.vhost | defs)) | sort_by(.vhost, .user, .exchange))
		| .parameters |= (map(select(.vhost | defs)) | sort_by(.vhost, .component, .name))
		| .global_parameters |= (map(select((.name | defs) or .name == "internal_cluster_id")) | sort_by(.name))
		| .policies |= (map(select(.vhost | defs)) | sort_by(.vhost, .name))
		| .queues |= (map(select(.vhost | defs)) | sort_by(.vhost, .name))
		| .exchanges |= (map(select(.vhost | defs)) | sort_by(.vhost, .name))
		| .bindings |= (map(select(.vhost | defs)) | sort_by(.vhost, .source, .destination_type, .destination, .routing_key))
	'
}

# export_defs writes the management API's export (GET /api/definitions).
export_defs() {
	api GET /definitions | keep >"$HERE/rabbitmq-3.10.8.json"
}

# export_ctl writes rabbitmqctl export_definitions' export, which has the
# vhosts' metadata and limits; RABBITMQCTL is the command (with -n and
# the node's environment when need be).
export_ctl() {
	${RABBITMQCTL:-rabbitmqctl} export_definitions - --format json | keep >"$HERE/rabbitmq-3.10.8-ctl.json"
}

# defs_only filters a definitions document down to the defs-* users,
# vhosts (with everything in them) and global parameters, sorted, and
# without what RabbitMQ 3.10's HTTP export lacks (the vhosts' metadata,
# the 4.x fields) or what differs between exporters (the version fields).
# With "names", vhosts are kept to their names (as 3.10's HTTP export
# has them), for comparing.
defs_only() {
	jq -S --argjson names "$([[ ${1:-} == names ]] && echo true || echo false)" '
		def defs: startswith("defs-");
		del(.rabbit_version, .rabbitmq_version, .product_name, .product_version,
			.rabbitmq_definition_format, .explanation, .original_cluster_name)
		| .users |= (map(select(.name | defs)) | sort_by(.name))
		| .vhosts |= (map(select(.name | defs) | if $names then {name} else . end) | sort_by(.name))
		| .permissions |= (map(select(.vhost | defs)) | sort_by(.vhost, .user))
		| .topic_permissions |= (map(select(.vhost | defs)) | sort_by(.vhost, .user, .exchange))
		| .parameters |= (map(select(.vhost | defs)) | sort_by(.vhost, .component, .name))
		| .global_parameters |= (map(select(.name | defs)) | sort_by(.name))
		| .policies |= (map(select(.vhost | defs)) | sort_by(.vhost, .name))
		| .queues |= (map(select(.vhost | defs)) | sort_by(.vhost, .name))
		| .exchanges |= (map(select(.vhost | defs)) | sort_by(.vhost, .name))
		| .bindings |= (map(select(.vhost | defs)) | sort_by(.vhost, .source, .destination_type, .destination, .routing_key))
	'
}

# check_export imports an export of Warren (TestWriteExportForRabbitMQ:
# the fixture and what only Warren makes, all named defs-*) into the
# RabbitMQ, compares the RabbitMQ's export of the defs-* entities with it,
# checks that a user Warren hashed logs in, and cleans up. It needs go.
check_export() {
	local tmp rc=0
	tmp=$(mktemp -d)
	(cd "$HERE/.." && WARREN_DEFS_EXPORT="$tmp/warren.json" go test -run TestWriteExportForRabbitMQ -count=1 . >/dev/null)
	defs_only <"$tmp/warren.json" >"$tmp/warren-defs.json"
	clean
	curl -fsS -u "$AUTH" -X POST -H 'content-type: application/json' --data-binary "@$tmp/warren-defs.json" "$API/definitions"
	defs_only names <"$tmp/warren-defs.json" >"$tmp/warren-names.json"
	api GET /definitions | defs_only names >"$tmp/rabbitmq-names.json"
	if diff -u "$tmp/warren-names.json" "$tmp/rabbitmq-names.json"; then
		echo "check-export: RabbitMQ exports what it imported from Warren: $(jq -c 'map_values(if type == "array" then length else . end)' "$tmp/rabbitmq-names.json")"
	else
		echo "check-export: RabbitMQ's export differs (- Warren's, + RabbitMQ's)"
		rc=1
	fi
	echo "check-export: vhost defs-w in RabbitMQ: $(api GET /vhosts/defs-w | jq -c '{description, tags, default_queue_type}')"
	echo "check-export: its limits: $(api GET /vhost-limits/defs-w | jq -c '.[0].value'), defs-lim's: $(api GET /user-limits/defs-lim | jq -c '.[0].value')"
	curl -fsS -u defs-zed:zed-secret "$API/whoami" >/dev/null && echo "check-export: defs-zed (hashed by Warren) logs in" || rc=1
	clean
	rm -r "$tmp"
	return $rc
}

clean() {
	local v u g
	for v in defs-a defs-b defs-w; do
		curl -sS -o /dev/null -u "$AUTH" -X DELETE "$API/vhosts/$v" || true
	done
	for u in defs-alice defs-bob defs-carol defs-zed defs-lim; do
		curl -sS -o /dev/null -u "$AUTH" -X DELETE "$API/users/$u" || true
	done
	for g in defs-note defs-gp; do
		curl -sS -o /dev/null -u "$AUTH" -X DELETE "$API/global-parameters/$g" || true
	done
}

case ${1:-} in
create) create ;;
export) export_defs ;;
export-ctl) export_ctl ;;
check-export) check_export ;;
clean) clean ;;
*)
	echo "usage: $0 create|export|export-ctl|check-export|clean" >&2
	exit 2
	;;
esac
