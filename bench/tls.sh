#!/usr/bin/env bash
# tls.sh: Warren's throughput over TLS next to plain TCP, in the same run:
# one Warren listening on both, the same workloads as run.sh's
# stream-publish, stream-replay and amqp-classic-* rows, with the lean
# and the Go clients (-clients lean,go), alternating
# tcp, tls, tcp, tls, ...; warren-perf report prints the medians and the
# TLS/TCP ratios.
#
#   bash bench/tls.sh [-pairs N] [-clients lean,go] [-only stream|amqp] [-out results.jsonl] [-short]
#
# Certificates: a throw-away CA and server certificate (openssl), trusted
# by the clients through SSL_CERT_FILE.
set -euo pipefail
PAIRS=3 STREAM_N=1000000 LEAN_STREAM_N=5000000 AMQP_N=100000 CLIENTS=lean,go ONLY="" OUT=""
while [[ $# -gt 0 ]]; do
	case $1 in
	-pairs) PAIRS=$2; shift ;;
	-clients) CLIENTS=$2; shift ;;
	-only) ONLY=$2; shift ;;
	-out) OUT=$2; shift ;;
	-short) PAIRS=1 STREAM_N=20000 LEAN_STREAM_N=20000 AMQP_N=2000 ;;
	*) echo "usage: $0 [-pairs N] [-clients lean,go] [-only stream|amqp] [-out results.jsonl] [-short]" >&2; exit 2 ;;
	esac
	shift
done
cd "$(dirname "$0")/.."
DIR=$(mktemp -d /tmp/warren-bench-tls.XXXXXX)
trap 'kill "${WARREN_PID:-0}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$DIR"' EXIT
go build -o "$DIR/warren" ./tools/warren
go build -o "$DIR/warren-perf" ./tools/warren-perf

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=bench CA" \
	-keyout "$DIR/ca.key" -out "$DIR/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
	-keyout "$DIR/server.key" -out "$DIR/server.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$DIR/ext.cnf"
openssl x509 -req -in "$DIR/server.csr" -CA "$DIR/ca.pem" -CAkey "$DIR/ca.key" -CAcreateserial -days 2 \
	-extfile "$DIR/ext.cnf" -out "$DIR/server.pem" 2>/dev/null
printf 'ssl_options.certfile = %s\nssl_options.keyfile = %s\n' "$DIR/server.pem" "$DIR/server.key" >"$DIR/warren.conf"
export SSL_CERT_FILE=$DIR/ca.pem

"$DIR/warren" -config "$DIR/warren.conf" -data-dir "$DIR/data" -log-level warning \
	-amqp-listen 127.0.0.1:25672 -amqps-listen 127.0.0.1:25671 \
	-stream-listen 127.0.0.1:25552 -stream-tls-listen 127.0.0.1:25551 \
	-http-listen "" -prometheus-listen "" &
WARREN_PID=$!
for _ in $(seq 100); do
	(exec 3<>/dev/tcp/127.0.0.1/25671) 2>/dev/null && break
	sleep 0.1
done

RESULTS=${OUT:-$DIR/results.jsonl}
perf() { # scenario target mode args...
	local scenario=$1 target=$2 mode=$3
	shift 3
	"$DIR/warren-perf" "$mode" "$@" -json -quiet -broker-pid "$WARREN_PID" -label "scenario=$scenario,target=$target" >>"$RESULTS" ||
		echo "$scenario on $target FAILED" >&2
}
for ((pair = 1; pair <= PAIRS; pair++)); do
	echo "pair $pair of $PAIRS" >&2
	for client in ${CLIENTS//,/ }; do
		n=$STREAM_N
		[[ $client == lean ]] && n=$LEAN_STREAM_N
		for t in tcp tls; do
			addr=(-addr 127.0.0.1:25552) url=amqp://guest:guest@127.0.0.1:25672/
			[[ $t == tls ]] && addr=(-addr 127.0.0.1:25551 -tls) url=amqps://guest:guest@127.0.0.1:25671/
			s=(-client "$client" "${addr[@]}")
			if [[ $ONLY != amqp ]]; then
				perf "stream-publish/$client" "$t" stream "${s[@]}" -producers 1 -consumers 0 -size 100 -count $n -stream "perf-pub-$t" -keep
				perf "stream-replay/$client" "$t" stream "${s[@]}" -producers 0 -consumers 1 -count $n -stream "perf-pub-$t" -recreate=false
			fi
			[[ $ONLY == stream ]] && continue
			common=(-client "$client" -url "$url" -producers 1 -consumers 1 -confirm 1000 -persistent -prefetch 1000 -multi-ack-every 100 -count $AMQP_N)
			perf "amqp-classic-16/$client" "$t" amqp "${common[@]}" -size 16
			perf "amqp-classic-1k/$client" "$t" amqp "${common[@]}" -size 1024
		done
	done
done
"$DIR/warren-perf" report -baseline tcp "$RESULTS"
