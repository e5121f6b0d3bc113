#!/usr/bin/env bash
# How fast Ctrl-C stops scripts/cluster, RUNS times in a row: each run starts the cluster (2
# shards x 2 replicas, 2 coordinators, HAProxy, Redis) with SIGINT ignored (as a background job of
# a non-interactive shell starts it), drives open-loop agent episodes through HAProxy for 8 s,
# kills coordinator 2 with SIGKILL 3 s in, then sends SIGINT and times how long until the script
# and every process it started are gone. The servers' drain deadline is 300 s, so a server that
# waited on a connection would show. Results (seconds, and the load's errors) in $out/stops.tsv.
#
# Usage: benchmarks/cluster-stop.sh OUT [RUNS=10]
# Environment: STILLWEB_BIN (binaries to use; default: a debug build here),
# STILLWEB_CLUSTER_MANIFEST (default corpus-manifests/samples.toml, BM25 only: needs ../shared).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$1 runs=${2:-10}
mkdir -p "$out"
if [ -z "${STILLWEB_BIN:-}" ]; then
  cargo build --locked -p stillweb-server -p stillweb-indexer -p stillweb-loadtest
  STILLWEB_BIN=${CARGO_TARGET_DIR:-$PWD/target}/debug
fi
export STILLWEB_BIN STILLWEB_SHUTDOWN_DRAIN_SECS=300
export STILLWEB_CLUSTER_MANIFEST=${STILLWEB_CLUSTER_MANIFEST:-$PWD/corpus-manifests/samples.toml}
[ "$STILLWEB_CLUSTER_MANIFEST" = "$PWD/corpus-manifests/samples.toml" ] && export STILLWEB_CLUSTER_DENSE=0
python3 - ../shared/data/fabricated/items.jsonl "$out/queries.txt" << 'PY'
import json, sys
items = [json.loads(l) for l in open(sys.argv[1])][:25]
open(sys.argv[2], "w").write("\n".join(i["question"].replace('"', "") for i in items) + "\n")
PY

printf 'run\tstop s\tprocesses left\tload errors\tepisodes failed\n' > "$out/stops.tsv"
for run in $(seq "$runs"); do
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  dir=$out/run-$run
  mkdir -p "$dir"
  STILLWEB_PORT=$port STILLWEB_CLUSTER_RUN=$dir/cluster \
    bash -c 'trap "" INT; exec scripts/cluster' > "$dir/cluster.out" 2> "$dir/cluster.log" &
  cluster=$!
  for _ in $(seq 1200); do
    grep -q '^stillweb cluster on' "$dir/cluster.out" 2> /dev/null && break
    kill -0 "$cluster" 2> /dev/null || { tail "$dir/cluster.log" >&2; exit 1; }
    sleep 0.1
  done
  "$STILLWEB_BIN/stillweb-loadtest" --target "http://127.0.0.1:$port" --workload episode --rate 8 \
    --duration 8 --timeout-ms 10000 --queries "$out/queries.txt" --out "$dir/load" > /dev/null &
  load=$!
  sleep 3
  kill -KILL "$(awk '$1 == "coordinator-2" { print $2 }' "$dir/cluster/processes")"
  wait "$load"
  started=$(date +%s.%N)
  kill -INT "$cluster"
  wait "$cluster" 2> /dev/null || true
  stopped=$(date +%s.%N)
  left=0
  for pid in $(awk '{ print $2 }' "$dir/cluster/processes"); do
    [ -d "/proc/$pid" ] && ! grep -q '^State:.*Z' "/proc/$pid/status" 2> /dev/null && left=$((left + 1))
  done
  python3 - "$dir/load/report.json" "$run" "$started" "$stopped" "$left" >> "$out/stops.tsv" << 'PY'
import json, sys
report = json.load(open(sys.argv[1]))
run, started, stopped, left = sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
print(f"{run}\t{stopped - started:.2f}\t{left}\t{report['errors']}\t{report['episodes']['failed']}")
PY
done
column -t -s $'\t' "$out/stops.tsv"
