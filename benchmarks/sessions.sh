#!/usr/bin/env bash
# Sessions in memory vs in Redis, side by side in one run: the same index served twice (caches
# off), each loaded by stillweb-loadtest with agent episodes (search, visits of shown pages, end)
# from 8 closed-loop clients after a warm-up; then searches/s, visits/s and p50/p99 per operation.
# Redis is a real redis-server on a free loopback port with its append-only file on (fsync every
# second, Redis's default). Results in $out/results.tsv.
#
# Usage: benchmarks/sessions.sh INDEX QUERIES.txt OUT [SECONDS=30]
set -euo pipefail
cd "$(dirname "$0")/.."
index=$1 queries=$2 out=$3 seconds=${4:-30}
source benchmarks/serve.sh
bin=target/release
scripts/system-packages
mkdir -p "$out/redis-data"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --bind 127.0.0.1 --port "$port" --dir "$out/redis-data" --appendonly yes --save "" \
  > "$out/redis.log" 2>&1 &
redis_pid=$!
trap 'kill $redis_pid 2> /dev/null || true' EXIT
for _ in $(seq 100); do
  python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 0.2)" 2> /dev/null && break
  sleep 0.1
done

printf 'sessions\tsearches/s\tsearch p50 ms\tsearch p99 ms\tvisits/s\tvisit p50 ms\tvisit p99 ms\terrors\n' > "$out/results.tsv"
for store in memory redis; do
  flags=()
  [ "$store" = redis ] && flags=(--sessions "redis://127.0.0.1:$port/0")
  start_server "$out" "$store" "$index" --result-cache-entries 0 --embedding-cache-entries 0 "${flags[@]}"
  "$bin/stillweb-loadtest" --target "$url" --queries "$queries" --out "$out/$store" --server-pid "$pid" \
    --workload episode --concurrency 8 --warmup 10 --duration "$seconds" --seed 1 > /dev/null
  kill "$pid"
  wait "$pid" 2> /dev/null || true
  python3 - "$out/$store/report.json" "$store" >> "$out/results.tsv" << 'PY'
import json, sys
report = json.load(open(sys.argv[1]))
ops = report["operations"]
def op(name):
    o = ops.get(name, {"rate": 0, "latency_ms": {"p50": 0, "p99": 0}})
    return [f"{o['rate']:.1f}", f"{o['latency_ms']['p50']:.1f}", f"{o['latency_ms']['p99']:.1f}"]
print("\t".join([sys.argv[2], *op("search"), *op("visit"), str(report["errors"])]))
PY
done
column -t -s $'\t' "$out/results.tsv"
