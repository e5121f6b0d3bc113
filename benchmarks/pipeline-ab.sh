#!/usr/bin/env bash
# Server binaries side by side (alternating, a fresh server each time, caches off) on one index
# and on a shard set of it behind a coordinator: a 5 s warm-up, then a closed loop of CLIENTS for
# SECONDS. CPU per search is that of every process that served (the server; or the coordinator
# and its shard servers together), from /proc.
#
# Usage: benchmarks/pipeline-ab.sh INDEX SET QUERIES OUT [SECONDS=15] [ROUNDS=3] [CLIENTS=8] SERVER...
#   INDEX: an index directory; SET: the same corpus built with --shards N (SET/shard-*);
#   QUERIES: one query per line, or a BEIR queries.jsonl. SERVER: the binaries to compare.
# Prints one line per run; each run's loadtest report is in OUT/<binary>-<round>-<single|shards>/.
set -euo pipefail
cd "$(dirname "$0")/.."
index=$1 set=$2 queries=$3 out=$4 seconds=${5:-15} rounds=${6:-3} clients=${7:-8}
shift 7
servers=("$@")
[ ${#servers[@]} -gt 0 ] || { echo "give the server binaries to compare" >&2; exit 2; }
source benchmarks/serve.sh
mkdir -p "$out"
queries=$(plain_queries "$queries" "$out")
loadtest=target/release/stillweb-loadtest
caches=(--result-cache-entries 0 --embedding-cache-entries 0)

# cpu PIDS...: their user + system seconds so far.
cpu() {
  python3 - "$@" <<'PY'
import os, sys
tick = os.sysconf("SC_CLK_TCK")
total = 0
for pid in sys.argv[1:]:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    total += int(fields[11]) + int(fields[12])
print(total / tick)
PY
}

# measure NAME URL PIDS...: warm-up, the closed loop, one line of results.
measure() {
  local name=$1 target=$2
  shift 2
  "$loadtest" --target "$target" --queries "$queries" --out "$out/$name-warm" --workload search \
    --concurrency "$clients" --duration 5 --seed 9 > /dev/null
  local before after
  before=$(cpu "$@")
  "$loadtest" --target "$target" --queries "$queries" --out "$out/$name" --workload search \
    --concurrency "$clients" --duration "$seconds" --seed 1 > /dev/null
  after=$(cpu "$@")
  python3 - "$out/$name/report.json" "$name" "$before" "$after" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); s = d["operations"]["search"]
cpu = float(sys.argv[4]) - float(sys.argv[3])
ms = 1000 * cpu / max(1, s["requests"])
print(f'{sys.argv[2]:<28} searches/s {s["rate"]:7.1f}  p50 {s["latency_ms"]["p50"]:6.1f} ms  '
      f'p99 {s["latency_ms"]["p99"]:6.1f} ms  CPU/search {ms:5.2f} ms  errors {s["errors"]}')
PY
}

for round in $(seq "$rounds"); do
  for server in "${servers[@]}"; do
    export SERVER_BIN=$server
    name=$(basename "$(dirname "$(readlink -f "$server")")")-$round
    start_server "$out" "$name-single" "$index" "${caches[@]}"
    measure "$name-single" "$url" "$pid"
    kill "$pid"; wait "$pid" 2> /dev/null || true

    shard_urls=() shard_pids=()
    for dir in "$set"/shard-*; do
      start_server "$out" "$name-$(basename "$dir")" "$dir" --mode bm25 "${caches[@]}"
      shard_urls+=(--shard "$url") shard_pids+=("$pid")
    done
    start_with "$out" "$name-coordinator" "${shard_urls[@]}" "${caches[@]}"
    measure "$name-shards" "$url" "$pid" "${shard_pids[@]}"
    kill "$pid" "${shard_pids[@]}"; wait 2> /dev/null || true
  done
done
