#!/usr/bin/env bash
# Reranked searches/s as callers pile up, for server binaries side by side: for each round, each
# rerank pool and each binary (alternating, a fresh server each time, caches off so every search
# pays for its reranking), a 5 s warm-up, then a closed loop at each concurrency.
#
# Usage: benchmarks/rerank.sh INDEX QUERIES RERANKER OUT [SECONDS=15] [ROUNDS=2] [POOLS="10 30"]
#          [CONCURRENCIES="1 8 32"] [SERVER[::FLAGS]...]
#   QUERIES: one query per line, or a BEIR queries.jsonl (its "text" fields are used).
#   RERANKER: a reranker directory, e.g. the random-weight MiniLM-L6-shape cross-encoder:
#     models/fixtures.py --speed (see BENCHMARKS.md).
#   SERVER: a server binary, optionally with extra flags after `::` (spaces allowed), e.g.
#     "target/release/stillweb-server::--rerank-batch-wait-ms 0". Default: target/release/stillweb-server.
# Prints one line per run (each run's report.json is in OUT/s<server>-p<pool>-<round>-c<C>/), then
# a table of searches/s, the median over rounds with each round's figure.
set -euo pipefail
cd "$(dirname "$0")/.."
index=$1 queries=$2 reranker=$3 out=$4 seconds=${5:-15} rounds=${6:-2} pools=${7:-"10 30"}
concurrencies=${8:-"1 8 32"}
shift $(( $# < 8 ? $# : 8 ))
servers=("$@")
[ ${#servers[@]} -gt 0 ] || servers=(target/release/stillweb-server)
source benchmarks/serve.sh
mkdir -p "$out"
queries=$(plain_queries "$queries" "$out")
loadtest=target/release/stillweb-loadtest
for round in $(seq "$rounds"); do
  for pool in $pools; do
    for i in "${!servers[@]}"; do
      spec=${servers[$i]}
      binary=${spec%%::*}
      flags=()
      [[ $spec == *::* ]] && read -r -a flags <<< "${spec#*::}"
      name=s$i-p$pool-$round
      SERVER_BIN=$binary start_server "$out" "$name" "$index" --reranker "$reranker" \
        --rerank-pool "$pool" --result-cache-entries 0 --embedding-cache-entries 0 \
        --request-timeout-secs 600 "${flags[@]}"
      "$loadtest" --target "$url" --queries "$queries" --out "$out/$name-warm" --workload search \
        --concurrency 8 --duration 5 --seed 9 > /dev/null
      for c in $concurrencies; do
        run=$out/$name-c$c
        # Slow searches at high concurrency: a long client timeout, and a warm-up that fills
        # the server's queue before the measured window.
        "$loadtest" --target "$url" --queries "$queries" --out "$run" --server-pid "$pid" \
          --workload search --concurrency "$c" --warmup $(( seconds / 2 )) --duration "$seconds" \
          --timeout-ms 600000 --seed 1 > /dev/null
        python3 - "$run/report.json" "s$i pool $pool c=$c" "$spec" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); s = d["operations"]["search"]
print(f'{sys.argv[2]:<20} searches/s {s["rate"]:6.2f}  p50 {s["latency_ms"]["p50"]:7.1f} ms  '
      f'p99 {s["latency_ms"]["p99"]:7.1f} ms  errors {s["errors"]}  [{sys.argv[3]}]')
PY
      done
      kill "$pid"; wait "$pid" 2> /dev/null || true
    done
  done
done
# The medians over rounds (each round's figure in brackets), one column per server.
python3 - "$out" "${servers[@]}" <<'PY'
import glob, json, os, re, statistics, sys
out, specs = sys.argv[1], sys.argv[2:]
runs = {}
for path in glob.glob(f"{out}/s*-p*-*-c*/report.json"):
    m = re.match(r"s(\d+)-p(\d+)-(\d+)-c(\d+)$", os.path.basename(os.path.dirname(path)))
    if m:
        s, pool, rnd, c = map(int, m.groups())
        runs.setdefault((pool, c, s), []).append((rnd, json.load(open(path))["operations"]["search"]["rate"]))
servers = range(len(specs))
print("\n| pool | clients | " + " | ".join(f"s{s}" for s in servers) + " |")
print("|---|---|" + "---|" * len(specs))
for pool, c in sorted({(k[0], k[1]) for k in runs}):
    cells = []
    for s in servers:
        rates = [r for _, r in sorted(runs.get((pool, c, s), []))]
        cells.append(f"**{statistics.median(rates):.2f}** ({', '.join(f'{r:.2f}' for r in rates)})" if rates else "—")
    print(f"| {pool} | {c} | " + " | ".join(cells) + " |")
for s, spec in zip(servers, specs):
    print(f"s{s}: {spec}")
PY
