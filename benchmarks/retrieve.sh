#!/usr/bin/env bash
# Search-R1 /retrieve with a whole RL step in one call, against the same queries sent one per
# request, on one index and one machine, back to back. For each batch size B (default 512 and
# 2560 = GRPO's 512 prompts x 5 rollouts): a fresh server (caches off, so every query pays its
# full cost), then stillweb-loadtest in a closed loop of one client sending /retrieve calls of B
# consecutive distinct queries from QUERIES. The peer: a fresh server, /retrieve calls of one
# query each from 8 clients. Reports queries/s and the server's peak resident memory (VmHWM)
# for each, in $out/results.json; each run's report.json / report.html in $out/<run>/.
#
# Usage: benchmarks/retrieve.sh INDEX QUERIES.txt OUT [DURATION_S]
set -euo pipefail
cd "$(dirname "$0")/.."
index=$1 queries=$2 out=$3 duration=${4:-60}
source benchmarks/serve.sh
bin=target/release
mkdir -p "$out"
[ "$(grep -cv '^\s*$' "$queries")" -ge 2560 ] || { echo "need at least 2,560 queries in $queries" >&2; exit 1; }

serve() {  # serve NAME: a fresh server, caches off; sets $url and $pid
  start_server "$out" "$1" "$index" --result-cache-entries 0 --embedding-cache-entries 0 \
    --request-timeout-secs 300
}
run() {  # run NAME BATCH CONCURRENCY
  local name=$1 batch=$2 clients=$3
  serve "$name"
  "$bin/stillweb-loadtest" --target "$url" --queries "$queries" --out "$out/$name" --server-pid "$pid" \
    --workload retrieve --batch-size "$batch" --k 3 --concurrency "$clients" \
    --duration "$duration" --timeout-ms 300000 --seed 1 > /dev/null
  kill "$pid"; wait "$pid" 2>/dev/null || true
}

run one-per-request 1 8
for b in 512 2560; do run "batch-$b" "$b" 1; done

python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
rows = {}
for name in ["one-per-request", "batch-512", "batch-2560"]:
    r = json.load(open(os.path.join(out, name, "report.json")))
    op = r["operations"]["retrieve"]
    size = r.get("batch_size") or 1
    rows[name] = {
        "calls": op["requests"],
        "errors": op["errors"],
        "queries_per_call": size,
        "queries_per_s": round(op["rate"] * size, 1),
        "call_p50_ms": op["latency_ms"]["p50"],
        "call_p99_ms": op["latency_ms"]["p99"],
        "server_peak_rss_mib": round(r["server"]["peak_rss_bytes"] / 2**20, 1),
    }
base = rows["one-per-request"]["queries_per_s"]
for row in rows.values():
    row["ratio_to_one_per_request"] = round(row["queries_per_s"] / base, 2) if base else None
json.dump(rows, open(os.path.join(out, "results.json"), "w"), indent=2)
print(json.dumps(rows, indent=2))
PY
