#!/usr/bin/env bash
# Searches/s and latency as callers pile up: for each round and each server binary (alternating,
# a fresh server each time; caches off so every search pays its full cost), a 5 s warm-up, then a
# closed loop at each concurrency. With PERF_STAT=1, `perf stat` (task clock, context switches,
# CPU migrations) of the server for 10 s in the middle of the last concurrency's run.
#
# Usage: benchmarks/concurrency.sh INDEX QUERIES OUT [SECONDS=15] [ROUNDS=3] [CONCURRENCIES="1 8 32"] [SERVER...]
#   QUERIES: one query per line, or a BEIR queries.jsonl (its "text" fields are used).
#   SERVER: server binaries to compare (default target/release/stillweb-server).
#   SERVER_FLAGS: more flags for every server (e.g. "--preset quality").
# Prints one line per run; each run's report.json is in OUT/<binary>-<round>-c<C>/.
set -euo pipefail
cd "$(dirname "$0")/.."
index=$1 queries=$2 out=$3 seconds=${4:-15} rounds=${5:-3} concurrencies=${6:-"1 8 32"}
shift $(( $# < 6 ? $# : 6 ))
servers=("$@")
[ ${#servers[@]} -gt 0 ] || servers=(target/release/stillweb-server)
source benchmarks/serve.sh
mkdir -p "$out"
queries=$(plain_queries "$queries" "$out")
loadtest=target/release/stillweb-loadtest
for round in $(seq "$rounds"); do
  for server in "${servers[@]}"; do
    name=$(basename "$(dirname "$(readlink -f "$server")")")-$round
    SERVER_BIN=$server start_server "$out" "$name" "$index" \
      --result-cache-entries 0 --embedding-cache-entries 0 ${SERVER_FLAGS:-}
    "$loadtest" --target "$url" --queries "$queries" --out "$out/$name-warm" --workload search \
      --concurrency 8 --duration 5 --seed 9 > /dev/null
    last=${concurrencies##* }
    for c in $concurrencies; do
      run=$out/$name-c$c
      perf_pid=
      if [ "${PERF_STAT:-0}" = 1 ] && [ "$c" = "$last" ]; then
        (sleep $(( seconds / 2 - 5 > 0 ? seconds / 2 - 5 : 0 )); perf stat -e task-clock,context-switches,cpu-migrations \
          -p "$pid" -- sleep 10 2> "$run.perfstat") &
        perf_pid=$!
      fi
      "$loadtest" --target "$url" --queries "$queries" --out "$run" --server-pid "$pid" --workload search \
        --concurrency "$c" --duration "$seconds" --seed 1 > /dev/null
      [ -n "$perf_pid" ] && wait "$perf_pid"
      python3 - "$run/report.json" "$name c=$c" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); s = d["operations"]["search"]; v = d["server"]
print(f'{sys.argv[2]:<24} searches/s {s["rate"]:7.1f}  p50 {s["latency_ms"]["p50"]:6.1f} ms  '
      f'p99 {s["latency_ms"]["p99"]:6.1f} ms  server CPU/search {1000 * v["cpu_seconds_per_search"]:5.2f} ms  errors {s["errors"]}')
PY
      [ -f "$run.perfstat" ] && grep -E "task-clock|context-switches|cpu-migrations" "$run.perfstat"
    done
    kill "$pid"; wait "$pid" 2> /dev/null || true
  done
done
