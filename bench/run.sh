#!/usr/bin/env bash
# run.sh benchmarks Warren against RabbitMQ (and NATS JetStream as an
# anchor for the stream scenarios) on this machine, with tools/warren-perf.
#
#   bash bench/run.sh                 # every scenario, 3 pairs A B A B ...
#   bash bench/run.sh -short          # a smoke of the harness: Warren only, seconds
#   bash bench/run.sh -pairs 5 -targets warren,rabbitmq -scenarios stream-publish,stream-replay
#   bash bench/run.sh -clients lean   # throughput scenarios with the lean clients only
#   bash bench/run.sh -baseline main~3 -targets warren -scenarios amqp-classic-16
#                                     # this tree against Warren built at another revision
#
# The throughput scenarios run once per client: "lean" (bench/leanstream,
# bench/leanamqp: little CPU per message, so the broker bounds the rate
# on a small machine) and "go" (rabbitmq-stream-go-client, amqp091-go:
# what a Go application sees). The scenario label says which, e.g.
# "stream-publish/lean". NATS runs with its own client in the "/go" rows.
#
# It installs what is missing (rabbitmq-server through bench/rabbitmq.sh,
# nats-server with apt-get), starts each broker on loopback on its own
# ports, runs each scenario against each target alternately, writes every
# run as a JSON line to OUT/results.jsonl and prints the medians and the
# ratios Warren/other (warren-perf report). Every broker it started is
# stopped on exit. Ratios mean something only within one invocation.
#
# -baseline REV adds the target "warren-base": Warren built from git
# revision REV (a detached worktree under OUT, removed after the build),
# run beside this tree's Warren, so a change is measured against what it
# changes in the same invocation (before/after ratios in the report).
#
# Ports: Warren AMQP 127.0.0.1:17672, stream 127.0.0.1:17552 (override
# with WARREN_BENCH_AMQP and WARREN_BENCH_STREAM); warren-base AMQP
# 127.0.0.1:17772, stream 127.0.0.1:17652 (WARREN_BENCH_BASE_AMQP,
# WARREN_BENCH_BASE_STREAM); RabbitMQ
# AMQP 15673, stream 15552 (bench/rabbitmq.sh); NATS 127.0.0.1:14222.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PAIRS=3
SHORT=0
TARGETS=""
CLIENTS=lean,go
BASELINE=""
SCENARIOS="idle-rss,stream-publish,stream-replay,stream-latency,amqp-classic-16,amqp-classic-1k,amqp-quorum-16,amqp-quorum-1k,fanout-10,amqp10-classic-1k,backlog-drain,restart"
OUT=${WARREN_BENCH_OUT:-/tmp/warren-bench-run}
while [[ $# -gt 0 ]]; do
	case $1 in
	-short) SHORT=1 ;;
	-pairs) PAIRS=$2; shift ;;
	-targets) TARGETS=$2; shift ;;
	-scenarios) SCENARIOS=$2; shift ;;
	-clients) CLIENTS=$2; shift ;;
	-out) OUT=$2; shift ;;
	-baseline) BASELINE=$2; shift ;;
	*) echo "usage: $0 [-short] [-pairs N] [-targets warren,rabbitmq,nats] [-scenarios a,b] [-clients lean,go] [-baseline REV] [-out DIR]" >&2; exit 2 ;;
	esac
	shift
done

# Workload sizes: full, and -short (a smoke of the harness, seconds).
if [[ $SHORT -eq 1 ]]; then
	PAIRS=1
	TARGETS=${TARGETS:-warren}
	STREAM_N=20000 LEAN_STREAM_N=20000 AMQP_N=2000 FANOUT_N=500 LAT_DUR=1s LAT_RATE=2000
	REPLAY_N=20000 LEAN_REPLAY_N=20000
	IDLE_QUEUES="100 500" BACKLOG_N=5000 BIG_N=20000 SEGMENT=100000
else
	TARGETS=${TARGETS:-warren,rabbitmq,nats}
	# The lean stream client publishes and replays several million msgs/s:
	# 5x the messages keep its runs over a second, not a scheduler tick.
	STREAM_N=1000000 LEAN_STREAM_N=5000000 AMQP_N=100000 FANOUT_N=10000 LAT_DUR=15s LAT_RATE=10000
	# Replays read a stream filled once per target (see stream-replay):
	# a few seconds each, so that what the broker spends is well above
	# the noise of a shared machine.
	REPLAY_N=3000000 LEAN_REPLAY_N=20000000
	IDLE_QUEUES="1000 10000" BACKLOG_N=${WARREN_BENCH_BACKLOG:-1000000} BIG_N=3000000 SEGMENT=5000000
fi

W_AMQP=${WARREN_BENCH_AMQP:-127.0.0.1:17672} W_STREAM=${WARREN_BENCH_STREAM:-127.0.0.1:17552}
B_AMQP=${WARREN_BENCH_BASE_AMQP:-127.0.0.1:17772} B_STREAM=${WARREN_BENCH_BASE_STREAM:-127.0.0.1:17652}
[[ -z $BASELINE ]] || TARGETS="$TARGETS,warren-base"
R_AMQP=127.0.0.1:15673 R_STREAM=127.0.0.1:15552
N_ADDR=127.0.0.1:14222
RABBIT_DIR=${WARREN_BENCH_RABBIT_DIR:-/tmp/warren-bench-rabbitmq}

log() { echo "run.sh: $*" >&2; }
has() { [[ ,$TARGETS, == *,$1,* ]]; }
want() { [[ ,$SCENARIOS, == *,$1,* ]]; }
port_open() { (exec 3<>"/dev/tcp/${1%:*}/${1#*:}") 2>/dev/null; }
wait_port() {
	local i
	for ((i = 0; i < 600; i++)); do
		port_open "$1" && return 0
		sleep 0.1
	done
	return 1
}

mkdir -p "$OUT/bin"
RESULTS=$OUT/results.jsonl
: >"$RESULTS"
export PATH=$PATH:/usr/local/go/bin
log "building warren and warren-perf into $OUT/bin"
(cd "$ROOT" && go build -o "$OUT/bin/warren" ./tools/warren && go build -o "$OUT/bin/warren-perf" ./tools/warren-perf &&
	go build -o "$OUT/bin/loopceiling" ./bench/cmd/loopceiling)
PERF=$OUT/bin/warren-perf
if [[ -n $BASELINE ]]; then
	BASE_REV=$(cd "$ROOT" && git rev-parse --short "$BASELINE")
	log "building warren at $BASELINE ($BASE_REV) into $OUT/bin/warren-base"
	rm -rf "$OUT/base-src"
	(cd "$ROOT" && git worktree add -q --detach "$OUT/base-src" "$BASE_REV")
	(cd "$OUT/base-src" && go build -o "$OUT/bin/warren-base" ./tools/warren)
	(cd "$ROOT" && git worktree remove --force "$OUT/base-src")
fi

# ---- brokers -------------------------------------------------------------

declare -A WARREN_PID=()
NATS_PID="" RABBIT_STARTED=0
warren_ports() { # warren_ports TARGET: its AMQP and stream addresses
	case $1 in
	warren) echo "$W_AMQP $W_STREAM" ;;
	warren-base) echo "$B_AMQP $B_STREAM" ;;
	esac
}
start_warren() { # start_warren TARGET [keep]: a fresh data dir unless keep
	local t=$1 a amqp stream
	read -r amqp stream <<<"$(warren_ports "$t")"
	[[ ${2:-} == keep ]] || { rm -rf "$OUT/$t-data"; mkdir -p "$OUT/$t-data"; }
	for a in $amqp $stream; do
		! port_open "$a" || { log "$a is already in use (another broker?): set WARREN_BENCH_AMQP/WARREN_BENCH_STREAM"; exit 1; }
	done
	# The management API and the metrics stay off: two Warrens run side by
	# side, and a baseline from before them has no -http-listen or
	# -prometheus-listen flag.
	local http=() help
	help=$("$OUT/bin/$t" -h 2>&1 || true)
	if grep -q -- -http-listen <<<"$help"; then http=(-http-listen ""); fi
	if grep -q -- -prometheus-listen <<<"$help"; then http+=(-prometheus-listen ""); fi
	"$OUT/bin/$t" -data-dir "$OUT/$t-data" -amqp-listen $amqp -stream-listen $stream \
		-stream-advertise $stream -log-level warn "${http[@]}" >>"$OUT/$t.log" 2>&1 &
	WARREN_PID[$t]=$!
	wait_port $stream && kill -0 ${WARREN_PID[$t]} 2>/dev/null || { tail "$OUT/$t.log" >&2; log "$t did not start"; exit 1; }
}
stop_warren() { # stop_warren TARGET [KILL]
	local pid=${WARREN_PID[$1]:-}
	[[ -n $pid ]] || return 0
	kill -"${2:-TERM}" "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	WARREN_PID[$1]=""
}
start_rabbit() { # start_rabbit [keep]
	if [[ ${1:-} == keep ]]; then
		WARREN_BENCH_RABBIT_KEEP_DATA=1 bash "$ROOT/bench/rabbitmq.sh" start
	else
		bash "$ROOT/bench/rabbitmq.sh" start
	fi
	RABBIT_STARTED=1
}
rabbit_pid() { cat "$RABBIT_DIR/rabbit.pid"; }
stop_rabbit() { # stop_rabbit [KILL]
	[[ $RABBIT_STARTED -eq 1 ]] || return 0
	if [[ ${1:-} == KILL ]]; then
		kill -KILL "$(rabbit_pid)" 2>/dev/null || true
		while kill -0 "$(rabbit_pid)" 2>/dev/null; do sleep 0.1; done
	else
		bash "$ROOT/bench/rabbitmq.sh" stop
	fi
	RABBIT_STARTED=0
}
install_nats() {
	command -v nats-server >/dev/null && return 0
	[[ $(id -u) -eq 0 ]] || return 1
	local policy=/usr/sbin/policy-rc.d made=0
	if [[ ! -e $policy ]]; then printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod 755 "$policy"; made=1; fi
	local rc=0
	{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nats-server; } >&2 || rc=$?
	[[ $made -eq 0 ]] || rm -f "$policy"
	return $rc
}
start_nats() { # start_nats [keep]
	[[ ${1:-} == keep ]] || rm -rf "$OUT/nats-data"
	nats-server -a 127.0.0.1 -p ${N_ADDR#*:} -js -sd "$OUT/nats-data" >>"$OUT/nats.log" 2>&1 &
	NATS_PID=$!
	wait_port $N_ADDR || { tail "$OUT/nats.log" >&2; log "nats-server did not start"; exit 1; }
}
stop_nats() {
	[[ -n $NATS_PID ]] || return 0
	kill -"${1:-TERM}" "$NATS_PID" 2>/dev/null || true
	wait "$NATS_PID" 2>/dev/null || true
	NATS_PID=""
}
cleanup() {
	rm -f "$OUT/loopceiling.data"
	stop_warren warren
	stop_warren warren-base
	stop_nats
	stop_rabbit
}
trap cleanup EXIT

pid_of() {
	case $1 in
	warren | warren-base) echo "${WARREN_PID[$1]}" ;;
	rabbitmq) rabbit_pid ;;
	nats) echo "$NATS_PID" ;;
	esac
}
rss_mib() { awk '/^VmRSS:/ {printf "%.1f", $2/1024}' "/proc/$1/status"; }
# record SCENARIO TARGET METRIC VALUE: a result the harness measured itself.
record() {
	[[ -n $4 ]] || { log "no value for $3 of $1 on $2"; return 0; }
	printf '{"labels":{"scenario":"%s","target":"%s"},"metrics":{"%s":%s}}\n' "$1" "$2" "$3" "$4" >>"$RESULTS"
}

if has warren; then start_warren warren; fi
if has warren-base; then start_warren warren-base; fi
if has rabbitmq; then start_rabbit; fi
if has nats; then
	if install_nats && (cd "$ROOT" && go list -m github.com/nats-io/nats.go >/dev/null 2>&1); then
		start_nats
	else
		log "nats-server could not be installed (or the nats.go client is missing): skipping NATS"
		TARGETS=${TARGETS//nats/}
	fi
fi

REV=$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo '?')
if [[ -n $(cd "$ROOT" && git status --porcelain --untracked-files=no 2>/dev/null) ]]; then
	REV="$REV + uncommitted changes"
fi

cat <<EOF2 | tee "$OUT/setup.txt" >&2
machine:  $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr), load $(cut -d' ' -f1-3 /proc/loadavg)
warren:   $REV, $(go version | cut -d' ' -f3)${BASELINE:+; warren-base: $BASE_REV}
          durability: streams fsync policy none (confirm once written to the OS);
          durable classic and quorum queues fsync before confirming persistent messages (group commit)
rabbitmq: $(dpkg-query -W -f='${Version}' rabbitmq-server 2>/dev/null || echo 'not installed'); streams: no fsync;
          classic and quorum queues: fsync before confirm
nats:     $(nats-server --version 2>/dev/null || echo 'not used'); JetStream file storage, 1 replica:
          writes reach the OS before the ack, fsync every 2 minutes (sync_interval default)
targets:  $TARGETS   pairs: $PAIRS   clients: $CLIENTS   short: $SHORT
EOF2

stream_addr() { case $1 in warren) echo $W_STREAM ;; warren-base) echo $B_STREAM ;; rabbitmq) echo $R_STREAM ;; esac; }
amqp_url() { case $1 in warren) echo "amqp://guest:guest@$W_AMQP/" ;; warren-base) echo "amqp://guest:guest@$B_AMQP/" ;; rabbitmq) echo "amqp://guest:guest@$R_AMQP/" ;; esac; }

# perf SCENARIO TARGET MODE ARGS...: one warren-perf run, appended to results.
perf() {
	local scenario=$1 target=$2 mode=$3
	shift 3
	local addr
	case $mode in
	stream) addr=(-addr "$(stream_addr "$target")") ;;
	amqp) addr=(-url "$(amqp_url "$target")") ;;
	nats) addr=(-url "nats://$N_ADDR") ;;
	esac
	log "$scenario on $target: warren-perf $mode $*"
	if ! "$PERF" "$mode" "${addr[@]}" -json -quiet -label "scenario=$scenario,target=$target" \
		-broker-pid "$(pid_of "$target")" "$@" >>"$RESULTS"; then
		log "$scenario on $target FAILED (see the error field in $RESULTS)"
	fi
}

# each TARGETS... runs "$@" once per target per pair, alternating.
targets_for() { # targets_for MODES: the targets that speak one of them
	local t out=()
	for t in ${TARGETS//,/ }; do
		case $t in
		nats) [[ $1 == *nats* ]] && out+=("$t") ;;
		*) [[ $1 == *amqp* || $1 == *stream* ]] && out+=("$t") ;;
		esac
	done
	echo "${out[@]}"
}

# ---- scenarios -------------------------------------------------------------

if want idle-rss; then
	# Idle RSS right after start and with N declared durable classic queues.
	for t in $(targets_for amqp); do
		record idle-rss-0 "$t" rss_mib "$(rss_mib "$(pid_of "$t")")"
		prev=0
		for n in $IDLE_QUEUES; do
			"$PERF" declare -url "$(amqp_url "$t")" -queues "$n" -prefix idle
			sleep 2
			record "idle-rss-$n" "$t" rss_mib "$(rss_mib "$(pid_of "$t")")"
			prev=$n
		done
		"$PERF" declare -url "$(amqp_url "$t")" -queues "$prev" -prefix idle -delete
	done
fi

# stream_client TARGET CLIENT: sets mode and cl (warren-perf's mode and
# client flags) for a stream scenario, or fails for a pair that does not
# run (NATS runs only with its own client, in the "/go" rows).
stream_client() {
	mode=stream cl=(-client "$2")
	if [[ $1 == nats ]]; then
		[[ $2 == go ]] || return 1
		mode=nats cl=()
	fi
}

if want stream-replay; then
	# The streams the replays read, filled once per target and client
	# (labelled stream-replay-fill/CLIENT): the Go client's producer with
	# one batch of 100 messages of 100 bytes in flight, so every chunk is
	# one batch, about 10 KB (what a Go application publishing batches
	# of 100 makes; with many batches in flight the brokers merge them
	# into larger chunks); the lean client's with its default window, so
	# large chunks (the sendfile path).
	for client in ${CLIENTS//,/ }; do
		for t in $(targets_for "stream nats"); do
			stream_client "$t" "$client" || continue
			fill=(-count $LEAN_REPLAY_N)
			[[ $client == lean ]] || fill=(-count $REPLAY_N)
			[[ $client == go && $mode == stream ]] && fill+=(-batch 100 -confirm 100)
			perf "stream-replay-fill/$client" "$t" $mode "${cl[@]}" -producers 1 -consumers 0 -size 100 "${fill[@]}" \
				-stream "perf-replay-$client" -keep
		done
	done
	# The loopback ceiling's file (see the pairs), written once here as
	# the streams are: written (and deleted) in every pair, its 2 GB of
	# writeback and unlink slowed the replay that followed by 10-15%.
	if [[ ,$CLIENTS, == *,lean,* ]]; then
		head -c $((LEAN_REPLAY_N * 109)) /dev/urandom >"$OUT/loopceiling.data"
	fi
fi

for ((pair = 1; pair <= PAIRS; pair++)); do
	log "pair $pair of $PAIRS"
	for client in ${CLIENTS//,/ }; do
		for t in $(targets_for "stream nats"); do
			stream_client "$t" "$client" || continue
			batch=(-batch 10) n=$STREAM_N
			[[ $client == lean ]] && n=$LEAN_STREAM_N
			[[ $mode == nats ]] && batch=()
			if want stream-publish; then
				perf "stream-publish/$client" "$t" $mode "${cl[@]}" -producers 1 -consumers 0 -size 100 -count $n -stream perf-pub -keep
			fi
			if want stream-replay; then
				n=$REPLAY_N
				[[ $client == lean ]] && n=$LEAN_REPLAY_N
				perf "stream-replay/$client" "$t" $mode "${cl[@]}" -producers 0 -consumers 1 -count $n \
					-stream "perf-replay-$client" -recreate=false
			fi
			if want stream-latency; then
				perf "stream-latency/$client" "$t" $mode "${cl[@]}" -producers 1 -consumers 1 -size 100 -rate $LAT_RATE -duration $LAT_DUR "${batch[@]}" -stream perf-lat
			fi
		done
		if [[ $client == lean ]] && want stream-replay; then
			# The machine's ceiling for that replay: the same bytes (about
			# 109 per 100 B message on disk) by sendfile over loopback to a
			# reader that only counts them, as the target "loopback".
			log "stream-replay/$client on loopback: loopceiling -messages $LEAN_REPLAY_N"
			"$OUT/bin/loopceiling" -json -runs 1 -messages $LEAN_REPLAY_N -file "$OUT/loopceiling.data" \
				-label "scenario=stream-replay/$client" >>"$RESULTS" || log "loopceiling FAILED"
		fi
		for t in $(targets_for amqp); do
			common=(-client "$client" -producers 1 -consumers 1 -confirm 1000 -persistent -prefetch 1000 -multi-ack-every 100)
			want amqp-classic-16 && perf "amqp-classic-16/$client" "$t" amqp "${common[@]}" -size 16 -count $AMQP_N
			want amqp-classic-1k && perf "amqp-classic-1k/$client" "$t" amqp "${common[@]}" -size 1024 -count $AMQP_N
			want amqp-quorum-16 && perf "amqp-quorum-16/$client" "$t" amqp "${common[@]}" -queue-type quorum -size 16 -count $AMQP_N
			want amqp-quorum-1k && perf "amqp-quorum-1k/$client" "$t" amqp "${common[@]}" -queue-type quorum -size 1024 -count $AMQP_N
			want fanout-10 && perf "fanout-10/$client" "$t" amqp "${common[@]}" -queues 10 -consumers 10 -size 1024 -count $FANOUT_N
		done
	done
	if want amqp10-classic-1k; then
		# AMQP 1.0 (go-amqp: unsettled sends, one accept per message) next
		# to 0-9-1 (amqp091-go: confirms, one ack per message) with the
		# same window, credit and messages. RabbitMQ 3.10 has only its 1.0
		# plugin (address v1), not 4.x's core AMQP 1.0.
		for t in $(targets_for amqp); do
			addr=(-amqp10-address v2)
			[[ $t == rabbitmq ]] && addr=(-amqp10-address v1)
			for client in amqp10 go; do
				perf "amqp10-classic-1k/$client" "$t" amqp -client $client "${addr[@]}" -producers 1 -consumers 1 -confirm 1000 \
					-persistent -prefetch 1000 -multi-ack-every 1 -size 1024 -count $AMQP_N
			done
		done
	fi
done

if want backlog-drain; then
	# RSS while a consumer drains a backlog of BACKLOG_N 16-byte persistent
	# messages from one classic queue (sampled every 0.5 s; the peak).
	for t in $(targets_for amqp); do
		perf backlog-fill "$t" amqp -producers 1 -consumers 0 -confirm 1000 -persistent -size 16 -count $BACKLOG_N -queue backlog -keep
		record backlog-filled "$t" rss_mib "$(rss_mib "$(pid_of "$t")")"
		pid=$(pid_of "$t")
		rss_mib "$pid" >"$OUT/peak"
		(peak=$(cat "$OUT/peak"); while kill -0 "$pid" 2>/dev/null; do
			r=$(rss_mib "$pid"); awk -v a="$r" -v b="$peak" 'BEGIN{exit !(a>b)}' && peak=$r
			echo "$peak" >"$OUT/peak"; sleep 0.5
		done) &
		sampler=$!
		perf backlog-drain "$t" amqp -producers 0 -consumers 1 -prefetch 1000 -multi-ack-every 100 -count $BACKLOG_N -queue backlog \
			-drain-timeout 60m -stall-timeout 5m
		kill "$sampler" 2>/dev/null || true
		wait "$sampler" 2>/dev/null || true
		record backlog-drain "$t" rss_mib "$(cat "$OUT/peak")"
	done
fi

if want restart; then
	# A large stream over many segments; kill -9 the broker, start it again
	# and time until a consumer from "first" gets a message.
	for t in $(targets_for stream); do
		perf restart-fill "$t" stream -producers 1 -consumers 0 -size 100 -count $BIG_N -batch 500 \
			-sub-entry 1 -max-segment-size $SEGMENT -stream perf-big -keep
		for ((pair = 1; pair <= PAIRS; pair++)); do
			t0=$(date +%s%N)
			case $t in
			warren | warren-base) stop_warren "$t" KILL; t0=$(date +%s%N); start_warren "$t" keep ;;
			rabbitmq) stop_rabbit KILL; t0=$(date +%s%N); start_rabbit keep ;;
			esac
			perf restart "$t" stream -producers 0 -consumers 1 -count 1 -offset first -stream perf-big \
				-recreate=false -wait-ready 300s -t0 "$t0"
		done
	done
fi

log "results in $RESULTS"
"$PERF" report -baseline warren "$RESULTS" | tee "$OUT/report.md"
