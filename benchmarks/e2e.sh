#!/usr/bin/env bash
# End to end: stillweb-server on an index, loaded by stillweb-loadtest on the same machine.
# 1. closed loop (8 clients, 40 s): the sustained search rate R;
# 2. open loop at 70% of R and at 100/s (60 s each): latency percentiles and errors;
# 3. with the CPU reranker (the MiniLM-L6-shape fixture) at pools 10 and 30: closed loop, 4 clients.
# Each run's report.json / report.html lands in $out/<run>/; a summary in $out/results.json.
# The server's result and query-embedding caches are off (every search pays its full cost, though
# runs reuse queries); E2E_CACHES=on keeps the defaults.
#
# Usage: benchmarks/e2e.sh INDEX QUERIES.txt OUT
set -euo pipefail
cd "$(dirname "$0")/.."
index=$1 queries=$2 out=$3
source benchmarks/serve.sh
bin=target/release
mkdir -p "$out"

caches=(--result-cache-entries 0 --embedding-cache-entries 0)
[ "${E2E_CACHES:-off}" = on ] && caches=()

serve() {  # serve NAME ARGS...: starts the server, sets $url and $pid
  local name=$1; shift
  start_server "$out" "$name" "$index" "${caches[@]}" "$@"
}
load() {  # load RUN ARGS...
  local run=$1; shift
  "$bin/stillweb-loadtest" --target "$url" --queries "$queries" --out "$out/$run" --server-pid "$pid" "$@"
}
rate_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["operations"]["search"]["rate"])' "$1"; }

serve plain
load warmup --workload search --concurrency 8 --duration 10 --seed 99 > /dev/null
load closed-8 --workload search --concurrency 8 --duration 40 --seed 1
r=$(rate_of "$out/closed-8/report.json")
r70=$(python3 -c "print(round(0.7 * $r, 1))")
load open-70pct --workload search --rate "$r70" --duration 60 --seed 2
load open-100 --workload search --rate 100 --duration 60 --seed 3
load episode-20 --workload episode --rate 20 --duration 60 --seed 4
kill "$pid"; wait "$pid" 2>/dev/null || true

# The MiniLM-L6-shape random reranker (cached; also builds the small fixtures).
STILLWEB_MODELS=$models models/make-fixtures --speed > /dev/null
reranker=$models/fixtures/cross-encoder-minilm-l6-shape
if [ -d "$reranker" ]; then
  serve rerank --reranker "$reranker" --model-threads 2
  for pool in 10 30; do
    load "rerank-$pool" --workload search --concurrency 4 --duration 40 --rerank true --rerank-pool "$pool" --seed 5
  done
  kill "$pid"; wait "$pid" 2>/dev/null || true
fi

python3 - "$out" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
summary = {}
for report in sorted(out.glob("*/report.json")):
    r = json.loads(report.read_text())
    if report.parent.name == "warmup":
        continue
    s = r["operations"].get("search", {})
    summary[report.parent.name] = {
        "arrival": r["arrival"], "requests": r["requests"], "errors": r["errors"],
        "search_rate": round(s.get("rate", 0), 1),
        "search_ms": {k: s.get("latency_ms", {}).get(k) for k in ("p50", "p95", "p99")},
        "cache_hit_ratio": r.get("cache_hit_ratio"),
        "server_cpu_ms_per_search": round(r["server"]["cpu_seconds_per_search"] * 1000, 2) if r.get("server") else None,
        "server_peak_rss_mib": round(r["server"]["peak_rss_bytes"] / 2**20) if r.get("server") else None,
        "server_private_mib_end": round(r["server"].get("rss_anon_bytes_end", 0) / 2**20) if r.get("server") else None,
    }
(out / "results.json").write_text(json.dumps(summary, indent=1) + "\n")
print(json.dumps(summary, indent=1))
PY
