#!/usr/bin/env bash
# chaos.sh runs the daemon chaos test (tools/warren/chaos_test.go) long:
# the real tools/warren binary under AMQP 0-9-1 (fan-out by reference
# included) and stream-protocol load,
# killed with SIGKILL at random moments and restarted, 150 times by
# default on one data directory.
#
#   bash bench/chaos.sh                  # 150 kills, a fresh seed (printed)
#   bash bench/chaos.sh 300              # 300 kills
#   WARREN_CHAOS_SEED=42 bash bench/chaos.sh   # replay a seed's choices
#
# A kill takes about 5-10 s; the test logs one line per kill and the
# totals at the end. Exit status: the test's.
set -euo pipefail
cd "$(dirname "$0")/.."
kills="${1:-150}"
export WARREN_CHAOS_KILLS="$kills"
exec go test ./tools/warren -run '^TestChaos$' -count=1 -v -timeout "$((kills * 30 + 300))s"
