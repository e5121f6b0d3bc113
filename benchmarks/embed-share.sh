#!/usr/bin/env bash
# Where a search's time goes as callers pile up, with queries gathered into embedding batches
# (the default) and with each search embedding its own (`--embed-batch-queries 0`): for each
# round and each setting a fresh server (caches off), a closed loop of CLIENTS clients on
# /v1/search, and the server's own `Server-Timing` by stage (means) from the loadtest's report.
# Prints one line per run (with the queries per embedding call) and the medians of the embed
# share and searches/s.
#
# Usage: benchmarks/embed-share.sh INDEX QUERIES OUT [CLIENTS=8] [SECONDS=10] [ROUNDS=3]
#   QUERIES: one query per line, or a BEIR queries.jsonl (its "text" fields are used).
set -euo pipefail
cd "$(dirname "$0")/.."
index=$1 queries=$2 out=$3 clients=${4:-8} seconds=${5:-10} rounds=${6:-3}
source benchmarks/serve.sh
mkdir -p "$out"
queries=$(plain_queries "$queries" "$out")
for round in $(seq "$rounds"); do
  for setting in gathered alone; do
    flags=(--result-cache-entries 0 --embedding-cache-entries 0)
    [ "$setting" = alone ] && flags+=(--embed-batch-queries 0)
    start_server "$out" "$setting-$round" "$index" "${flags[@]}"
    target/release/stillweb-loadtest --target "$url" --queries "$queries" --out "$out/$setting-$round" \
      --server-pid "$pid" --workload search --concurrency "$clients" --warmup 2 \
      --duration "$seconds" --seed 1 > /dev/null
    curl -s "$url/metrics" > "$out/$setting-$round/metrics.txt"
    kill "$pid"; wait "$pid" 2> /dev/null || true
    python3 - "$out/$setting-$round" "$setting-$round" <<'PY'
import json, re, sys
d = json.load(open(f"{sys.argv[1]}/report.json")); st = d["server_stages_ms"]; s = d["operations"]["search"]
embed, total = st["embed"]["mean"], st["total"]["mean"]
# Queries per embedding call, from the server's batcher counters (none when not gathering).
counts = dict(re.findall(r'^stillweb_model_(batched_requests|batches)_total\{model="query_embedder"\} (\S+)$',
                         open(f"{sys.argv[1]}/metrics.txt").read(), re.M))
batch = f'{float(counts["batched_requests"]) / float(counts["batches"]):4.2f}' if counts.get("batches") else "   -"
print(f'{sys.argv[2]:<12} searches/s {s["rate"]:6.1f}  embed {embed:5.2f} of {total:5.2f} ms '
      f'({100 * embed / total:4.1f}%)  queries per call {batch}  p99 {s["latency_ms"]["p99"]:6.1f} ms  errors {s["errors"]}')
PY
  done
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
for setting in ["gathered", "alone"]:
    runs = [json.load(open(f"{out}/{setting}-{r}/report.json")) for r in range(1, rounds + 1)]
    share = statistics.median(r["server_stages_ms"]["embed"]["mean"] / r["server_stages_ms"]["total"]["mean"] for r in runs)
    rate = statistics.median(r["operations"]["search"]["rate"] for r in runs)
    print(f"median {setting:<9} searches/s {rate:6.1f}  embed share {100 * share:4.1f}%")
PY
