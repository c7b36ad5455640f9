#!/usr/bin/env bash
# capture.sh saves real RabbitMQ management API responses as fixtures for
# main_test.go. It needs a RabbitMQ node with the management and
# stream_management plugins (bench/rabbitmq.sh with WARREN_BENCH_RABBIT_MGMT=1)
# holding the objects README.md lists. Usage: bash capture.sh [BASE_URL]
set -euo pipefail
BASE=${1:-http://127.0.0.1:15999}
OUT=$(dirname "$0")/rabbitmq-3.10.8
mkdir -p "$OUT"

# get FILE METHOD PATH [curl args...] saves the body; the status code goes
# to stderr so a wrong capture is visible.
get() {
	local file=$1 method=$2 path=$3
	shift 3
	local code
	code=$(curl -sS -u "${CTL_AUTH:-guest:guest}" -X "$method" -o "$OUT/$file" -w '%{http_code}' "$@" "$BASE$path")
	echo "$code $method $path -> $file" >&2
}

get overview.json GET /api/overview
node=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["node"])' "$OUT/overview.json")
get node.json GET "/api/nodes/$node"
get users.json GET /api/users
get user-ctl-user.json GET /api/users/ctl-user
get vhosts.json GET /api/vhosts
get vhost-permissions-root.json GET /api/vhosts/%2F/permissions
get user-permissions-ctl-user.json GET /api/users/ctl-user/permissions
get policies-root.json GET /api/policies/%2F
get queues-root.json GET /api/queues/%2F
get queue-ctl-s.json GET /api/queues/%2F/ctl-s
get exchanges-root.json GET /api/exchanges/%2F
get bindings-root.json GET /api/bindings/%2F
get consumers-root.json GET /api/consumers/%2F
get connections.json GET /api/connections
get channels.json GET /api/channels
get stream-connections.json GET /api/stream/connections
get stream-publishers-root.json GET /api/stream/publishers/%2F
get stream-consumers-root.json GET /api/stream/consumers/%2F
get definitions.json GET /api/definitions

# Error bodies.
get not-found.json GET /api/users/ctl-nouser
get vhost-not-found.json PUT /api/policies/ctl-nope/ctl-bad -H 'content-type: application/json' \
	-d '{"pattern":"^x","definition":{"max-length":1},"priority":0,"apply-to":"queues"}'
get policy-invalid.json PUT /api/policies/%2F/ctl-bad -H 'content-type: application/json' \
	-d '{"pattern":"^x","definition":{"max-length":"x"},"priority":0,"apply-to":"queues"}'
get permissions-not-found.json PUT /api/permissions/ctl-nope/ctl-user -H 'content-type: application/json' \
	-d '{"configure":".*","write":".*","read":".*"}'
get queue-not-empty.json DELETE '/api/queues/%2F/ctl-q1?if-empty=true'
get definitions-bad.json POST /api/definitions -H 'content-type: application/json' -d 'garbage'
CTL_AUTH=guest:wrong get login-failed.json GET /api/overview
