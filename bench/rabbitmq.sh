#!/usr/bin/env bash
# rabbitmq.sh runs a private, loopback-only RabbitMQ node with the stream
# plugin, for side-by-side stream benchmarks against Warren
# (see bench/README.md).
#
#   bash bench/rabbitmq.sh start    # install if missing, start, wait for the stream port
#   bash bench/rabbitmq.sh status
#   bash bench/rabbitmq.sh stop     # stop the node and the epmd this script started
#
# The node never uses Warren's default ports (AMQP 5672, stream 5552) nor the
# Erlang defaults (epmd 4369, distribution 25672), so it can run beside Warren
# and beside any system RabbitMQ:
#
#   AMQP 0-9-1        127.0.0.1:15673   WARREN_BENCH_RABBIT_AMQP_PORT
#   stream            127.0.0.1:15552   WARREN_BENCH_RABBIT_STREAM_PORT
#   distribution      127.0.0.1:25999   WARREN_BENCH_RABBIT_DIST_PORT
#   CLI distribution  26000-26010       (dist port + 1 .. + 11)
#   private epmd      127.0.0.1:14369   WARREN_BENCH_RABBIT_EPMD_PORT
#   management HTTP   127.0.0.1:15999   WARREN_BENCH_RABBIT_MGMT_PORT, only with
#                                       WARREN_BENCH_RABBIT_MGMT=1 (the
#                                       management plugin costs CPU: off for
#                                       benchmarks, on for behaviour checks)
#   Prometheus        127.0.0.1:15998   WARREN_BENCH_RABBIT_PROMETHEUS_PORT, only
#                                       with WARREN_BENCH_RABBIT_PROMETHEUS=1
#
# All state (mnesia, logs, config, pid file) lives under
# WARREN_BENCH_RABBIT_DIR (default /tmp/warren-bench-rabbitmq); start wipes
# the node's data there first, so every start is a fresh node (unless
# WARREN_BENCH_RABBIT_KEEP_DATA=1, for restart-time measurements). The node runs
# as the rabbitmq user; the script must run as root or as rabbitmq. It works
# on Debian bookworm (rabbitmq-server 3.10 with its own Erlang).
set -euo pipefail

NODENAME=${WARREN_BENCH_RABBIT_NODENAME:-warrenbench@localhost}
AMQP_PORT=${WARREN_BENCH_RABBIT_AMQP_PORT:-15673}
STREAM_PORT=${WARREN_BENCH_RABBIT_STREAM_PORT:-15552}
DIST_PORT=${WARREN_BENCH_RABBIT_DIST_PORT:-25999}
EPMD_PORT=${WARREN_BENCH_RABBIT_EPMD_PORT:-14369}
MGMT=${WARREN_BENCH_RABBIT_MGMT:-0}
MGMT_PORT=${WARREN_BENCH_RABBIT_MGMT_PORT:-15999}
PROM=${WARREN_BENCH_RABBIT_PROMETHEUS:-0}
PROM_PORT=${WARREN_BENCH_RABBIT_PROMETHEUS_PORT:-15998}
BASE=${WARREN_BENCH_RABBIT_DIR:-/tmp/warren-bench-rabbitmq}
START_TIMEOUT=${WARREN_BENCH_RABBIT_TIMEOUT:-120}
HOST=127.0.0.1

RABBIT_BIN=/usr/lib/rabbitmq/bin
RABBIT_USER=rabbitmq
RABBIT_HOME=/var/lib/rabbitmq

log() { echo "rabbitmq.sh: $*" >&2; }
die() {
	log "$*"
	exit 1
}

# port_open HOST PORT succeeds when something accepts TCP connections there.
port_open() {
	(exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}

# install puts rabbitmq-server (and its Erlang) on the machine if missing. The
# Debian package would start a system node on 5672/25672 in its postinst;
# a policy-rc.d that denies service starts prevents that.
install() {
	if [[ -x $RABBIT_BIN/rabbitmq-server ]]; then
		return
	fi
	[[ $(id -u) -eq 0 ]] || die "rabbitmq-server is not installed and installing needs root"
	local policy=/usr/sbin/policy-rc.d made_policy=0
	if [[ ! -e $policy ]]; then
		printf '#!/bin/sh\nexit 101\n' >"$policy"
		chmod 755 "$policy"
		made_policy=1
	fi
	log "installing rabbitmq-server"
	local rc=0
	{ apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends rabbitmq-server; } || rc=$?
	if [[ $made_policy -eq 1 ]]; then
		rm -f "$policy"
	fi
	[[ $rc -eq 0 ]] || die "apt-get install rabbitmq-server failed ($rc)"
}

# rabbit_cmd sets RABBIT_CMD to the command prefix that runs a program as the
# rabbitmq user with the node's environment and nothing else.
rabbit_cmd() {
	local envs=(
		"HOME=$RABBIT_HOME"
		"PATH=$RABBIT_BIN:/usr/bin:/bin:/usr/sbin:/sbin"
		"LANG=C.UTF-8"
		"LC_ALL=C.UTF-8"
		# A private env file: never read /etc/rabbitmq/rabbitmq-env.conf.
		"RABBITMQ_CONF_ENV_FILE=$BASE/rabbitmq-env.conf"
		"RABBITMQ_CONFIG_FILE=$BASE/rabbitmq.conf"
		"RABBITMQ_ADVANCED_CONFIG_FILE=$BASE/advanced.config"
		"RABBITMQ_ENABLED_PLUGINS_FILE=$BASE/enabled_plugins"
		"RABBITMQ_MNESIA_BASE=$BASE/mnesia"
		"RABBITMQ_LOG_BASE=$BASE/log"
		"RABBITMQ_PID_FILE=$BASE/rabbit.pid"
		"RABBITMQ_PLUGINS_EXPAND_DIR=$BASE/plugins-expand"
		"RABBITMQ_NODENAME=$NODENAME"
		"RABBITMQ_USE_LONGNAME=false"
		"RABBITMQ_NODE_IP_ADDRESS=$HOST"
		"RABBITMQ_NODE_PORT=$AMQP_PORT"
		"RABBITMQ_DIST_PORT=$DIST_PORT"
		"RABBITMQ_CTL_DIST_PORT_MIN=$((DIST_PORT + 1))"
		"RABBITMQ_CTL_DIST_PORT_MAX=$((DIST_PORT + 11))"
		"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-kernel inet_dist_use_interface {127,0,0,1}"
		"ERL_EPMD_PORT=$EPMD_PORT"
		"ERL_EPMD_ADDRESS=$HOST"
	)
	if [[ $(id -u) -eq 0 ]]; then
		RABBIT_CMD=(runuser -u "$RABBIT_USER" -- env -i "${envs[@]}")
	elif [[ $(id -un) == "$RABBIT_USER" ]]; then
		RABBIT_CMD=(env -i "${envs[@]}")
	else
		die "run as root or as $RABBIT_USER"
	fi
}

# as_rabbit runs a command as the rabbitmq user with the node's environment.
as_rabbit() {
	rabbit_cmd
	"${RABBIT_CMD[@]}" "$@"
}

write_config() {
	mkdir -p "$BASE/mnesia" "$BASE/log" "$BASE/plugins-expand"
	: >"$BASE/rabbitmq-env.conf"
	cat >"$BASE/rabbitmq.conf" <<EOF
# Written by bench/rabbitmq.sh; loopback only, no management plugin.
listeners.tcp.1 = $HOST:$AMQP_PORT
stream.listeners.tcp.1 = $HOST:$STREAM_PORT
stream.advertised_host = $HOST
stream.advertised_port = $STREAM_PORT
log.console = false
log.file.level = info
EOF
	# AMQP 1.0 is a plugin in 3.x (core in 4.x), for bench/run.sh's
	# amqp10-classic-1k.
	local plugins=rabbitmq_stream,rabbitmq_amqp1_0
	if [[ $MGMT == 1 ]]; then
		printf 'management.tcp.ip = %s\nmanagement.tcp.port = %s\n' "$HOST" "$MGMT_PORT" >>"$BASE/rabbitmq.conf"
		plugins+=,rabbitmq_stream_management,rabbitmq_management
	fi
	if [[ $PROM == 1 ]]; then
		printf 'prometheus.tcp.ip = %s\nprometheus.tcp.port = %s\n' "$HOST" "$PROM_PORT" >>"$BASE/rabbitmq.conf"
		plugins+=,rabbitmq_prometheus
	fi
	echo "[$plugins]." >"$BASE/enabled_plugins"
	if [[ $(id -u) -eq 0 ]]; then
		chown -R "$RABBIT_USER:$RABBIT_USER" "$BASE"
	fi
}

node_pid() {
	local pid
	[[ -s $BASE/rabbit.pid ]] || return 1
	pid=$(<"$BASE/rabbit.pid")
	[[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

epmd_up() {
	as_rabbit epmd -port "$EPMD_PORT" -names >/dev/null 2>&1
}

start() {
	install
	if node_pid >/dev/null; then
		log "node $NODENAME already running (pid $(node_pid))"
		wait_stream
		return
	fi
	local p
	for p in "$AMQP_PORT" "$STREAM_PORT" "$DIST_PORT"; do
		if port_open "$HOST" "$p"; then
			die "port $p is already in use on $HOST; set the WARREN_BENCH_RABBIT_*_PORT variables"
		fi
	done
	# Every start is a fresh node: no streams left from earlier runs
	# (WARREN_BENCH_RABBIT_KEEP_DATA=1 keeps them: restart measurements).
	if [[ ${WARREN_BENCH_RABBIT_KEEP_DATA:-0} != 1 ]]; then
		rm -rf "$BASE/mnesia"
	fi
	write_config
	if ! epmd_up; then
		as_rabbit epmd -port "$EPMD_PORT" -address "$HOST" -daemon
		touch "$BASE/epmd.started"
	fi
	log "starting $NODENAME (stream $HOST:$STREAM_PORT, amqp $HOST:$AMQP_PORT, dir $BASE)"
	# setsid: the node lives in its own session, so neither this script's
	# exit nor a signal to the caller's process group reaches it. -w keeps
	# the launcher (whose pid wait_stream watches) alive as long as the node.
	rabbit_cmd
	setsid -w "${RABBIT_CMD[@]}" "$RABBIT_BIN/rabbitmq-server" >"$BASE/log/console.out" 2>&1 </dev/null &
	LAUNCHER=$!
	wait_stream
	log "node $NODENAME is up (pid $(node_pid || echo '?'))"
}

# wait_stream waits until the stream port accepts connections, and fails with
# the log tail if the node dies or START_TIMEOUT seconds pass.
wait_stream() {
	local deadline=$((SECONDS + START_TIMEOUT))
	until port_open "$HOST" "$STREAM_PORT"; do
		if ((SECONDS >= deadline)); then
			tail -n 40 "$BASE/log/console.out" "$BASE"/log/*.log >&2 2>/dev/null || true
			die "stream port $HOST:$STREAM_PORT not open after ${START_TIMEOUT}s"
		fi
		if [[ -n ${LAUNCHER:-} ]] && ! kill -0 "$LAUNCHER" 2>/dev/null; then
			tail -n 40 "$BASE/log/console.out" "$BASE"/log/*.log >&2 2>/dev/null || true
			die "node exited during start (logs in $BASE/log)"
		fi
		sleep 0.5
	done
}

stop() {
	local pid
	if pid=$(node_pid); then
		log "stopping $NODENAME (pid $pid)"
		if ! as_rabbit "$RABBIT_BIN/rabbitmqctl" -n "$NODENAME" stop "$BASE/rabbit.pid" >/dev/null 2>&1; then
			log "rabbitmqctl stop failed; sending TERM to $pid"
			kill -TERM "$pid" 2>/dev/null || true
		fi
		local deadline=$((SECONDS + 60))
		while kill -0 "$pid" 2>/dev/null; do
			if ((SECONDS >= deadline)); then
				log "node did not exit in 60s; sending KILL to $pid"
				kill -KILL "$pid" 2>/dev/null || true
				break
			fi
			sleep 0.5
		done
	else
		log "node $NODENAME is not running"
	fi
	rm -f "$BASE/rabbit.pid"
	# Only the epmd on our private port, and only if this script started it.
	if [[ -e $BASE/epmd.started ]]; then
		if epmd_up; then
			as_rabbit epmd -port "$EPMD_PORT" -kill >/dev/null 2>&1 || log "epmd on port $EPMD_PORT did not stop"
		fi
		rm -f "$BASE/epmd.started"
	fi
}

status() {
	local pid rc=0
	if pid=$(node_pid); then
		echo "node:   $NODENAME running, pid $pid"
	else
		echo "node:   $NODENAME not running"
		rc=3
	fi
	if port_open "$HOST" "$STREAM_PORT"; then
		echo "stream: $HOST:$STREAM_PORT open"
	else
		echo "stream: $HOST:$STREAM_PORT closed"
		rc=3
	fi
	if port_open "$HOST" "$AMQP_PORT"; then
		echo "amqp:   $HOST:$AMQP_PORT open"
	else
		echo "amqp:   $HOST:$AMQP_PORT closed"
	fi
	if [[ -x $RABBIT_BIN/rabbitmq-server ]] && epmd_up; then
		echo "epmd:   $HOST:$EPMD_PORT up"
	else
		echo "epmd:   $HOST:$EPMD_PORT down"
	fi
	echo "dir:    $BASE"
	return "$rc"
}

case ${1:-} in
start) start ;;
stop) stop ;;
status) status ;;
*)
	echo "usage: $0 start|stop|status" >&2
	exit 2
	;;
esac
