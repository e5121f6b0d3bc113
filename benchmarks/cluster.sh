#!/usr/bin/env bash
# Sessions in memory vs in Redis through a whole cluster, side by side in one run: scripts/cluster
# (2 shards x 2 replicas of the demo corpus, hybrid, two coordinators, HAProxy) started twice on
# the same build, once with Redis sessions (the shipped HAProxy configuration, least connections)
# and once with each coordinator keeping its own sessions (HAProxy then hashes every request of a
# session to the same coordinator, as it must), each loaded by stillweb-loadtest with agent
# episodes (search, visits of shown pages, end) from 8 closed-loop clients through HAProxy after a
# warm-up; caches off. Queries: demo article titles. Results in $out/results.tsv.
#
# Usage: benchmarks/cluster.sh OUT [SECONDS=30] [RUNS=2]   (RUNS alternate memory and redis)
set -euo pipefail
cd "$(dirname "$0")/.."
out=$1 seconds=${2:-30} runs=${3:-2}
mkdir -p "$out"
cargo build --release --locked -p stillweb-server -p stillweb-indexer -p stillweb-loadtest
export STILLWEB_BIN=$PWD/target/release
source scripts/demo-prepare.sh
prepare_demo
python3 - "$corpus" "$out/queries.txt" << 'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
titles = [json.loads(l)["title"] for l in lines[::20]]
open(sys.argv[2], "w").write("\n".join(titles[:500]) + "\n")
PY

printf 'run\tsessions\tsearches/s\tsearch p50 ms\tsearch p99 ms\tvisits/s\tvisit p99 ms\terrors\tepisodes failed\n' > "$out/results.tsv"
for run in $(seq "$runs"); do
  for store in memory redis; do
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    STILLWEB_PORT=$port STILLWEB_CLUSTER_SESSIONS=$store STILLWEB_CLUSTER_RUN=$out/$store-$run/cluster \
      STILLWEB_CLUSTER_FLAGS="--result-cache-entries 0 --embedding-cache-entries 0" \
      scripts/cluster > "$out/$store-$run.cluster.out" 2> "$out/$store-$run.cluster.log" &
    cluster=$!
    for _ in $(seq 1200); do
      grep -q '^stillweb cluster on' "$out/$store-$run.cluster.out" 2> /dev/null && break
      kill -0 "$cluster" 2> /dev/null || { tail "$out/$store-$run.cluster.log" >&2; exit 1; }
      sleep 0.5
    done
    target/release/stillweb-loadtest --target "http://127.0.0.1:$port" --queries "$out/queries.txt" \
      --out "$out/$store-$run" --workload episode --concurrency 8 --warmup 10 --duration "$seconds" \
      --seed "$run" > /dev/null
    kill -TERM "$cluster"
    wait "$cluster" 2> /dev/null || true
    python3 - "$out/$store-$run/report.json" "$run" "$store" >> "$out/results.tsv" << 'PY'
import json, sys
report = json.load(open(sys.argv[1]))
ops = report["operations"]
def op(name, fields):
    o = ops.get(name, {"rate": 0, "latency_ms": {"p50": 0, "p99": 0}})
    return [f"{o['rate']:.1f}" if f == "rate" else f"{o['latency_ms'][f]:.1f}" for f in fields]
print("\t".join([sys.argv[2], sys.argv[3], *op("search", ["rate", "p50", "p99"]),
                 *op("visit", ["rate", "p99"]), str(report["errors"]),
                 str(report["episodes"]["failed"])]))
PY
  done
done
column -t -s $'\t' "$out/results.tsv"
