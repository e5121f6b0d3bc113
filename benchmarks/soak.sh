#!/usr/bin/env bash
# Soak: agent episodes (search, visit, search again, visit, end the session) offered for a long
# time at 70% of the server's measured episode capacity, to show that memory stays flat and no
# request fails. 1. closed loop of 8 clients for 40 s: the capacity C (episodes/s); 2. open
# loop at 0.7 C for MINUTES (default 30). Caches at their defaults (bounded LRUs), as served.
# Prints and writes $out/results.json: capacity, offered and achieved rate, errors, p99 per
# operation, and the server's resident memory each five minutes (total and, at the end,
# private); each run's report.json / report.html in $out/<run>/.
#
# Usage: benchmarks/soak.sh INDEX QUERIES.txt OUT [MINUTES]
set -euo pipefail
cd "$(dirname "$0")/.."
index=$1 queries=$2 out=$3 minutes=${4:-30}
source benchmarks/serve.sh
bin=target/release
mkdir -p "$out"

start_server "$out" soak "$index"
trap 'kill "$pid" 2>/dev/null || true' EXIT
load() {  # load RUN ARGS...
  local run=$1; shift
  "$bin/stillweb-loadtest" --target "$url" --queries "$queries" --out "$out/$run" --server-pid "$pid" \
    --workload episode "$@" > /dev/null
}
load capacity --concurrency 8 --duration 40 --warmup 10 --seed 11
rate=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(round(0.7 * r["episodes"]["completed"] / r["elapsed_s"], 2))' "$out/capacity/report.json")
echo "capacity run done; soaking at $rate episodes/s for $minutes min" >&2
load soak --rate "$rate" --duration $((minutes * 60)) --seed 12

python3 - "$out" "$rate" <<'PY'
import json, os, sys
out, rate = sys.argv[1], float(sys.argv[2])
cap = json.load(open(os.path.join(out, "capacity", "report.json")))
soak = json.load(open(os.path.join(out, "soak", "report.json")))
timeline = soak["timeline"]
rss_by_5min = {f"{s['second'] // 60} min": s.get("server_rss_mib")
               for s in timeline if s["second"] % 300 == 0 or s["second"] == len(timeline) - 1}
result = {
    "capacity_episodes_per_s": round(cap["episodes"]["completed"] / cap["elapsed_s"], 2),
    "offered_episodes_per_s": rate,
    "soak_minutes": round(soak["elapsed_s"] / 60, 1),
    "episodes": soak["episodes"],
    "requests": soak["requests"],
    "errors": soak["errors"],
    "error_kinds": soak["error_kinds"],
    "p99_ms": {op: o["latency_ms"]["p99"] for op, o in soak["operations"].items()},
    "server_rss_mib_by_time": rss_by_5min,
    "server_private_mib_before_soak": round(cap["server"]["rss_anon_bytes_end"] / 2**20, 1),
    "server_private_mib_end": round(soak["server"]["rss_anon_bytes_end"] / 2**20, 1),
    "server_peak_rss_mib": round(soak["server"]["peak_rss_bytes"] / 2**20, 1),
}
json.dump(result, open(os.path.join(out, "results.json"), "w"), indent=2)
print(json.dumps(result, indent=2))
PY
