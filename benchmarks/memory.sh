#!/usr/bin/env bash
# Serving memory and cold start-up of one index (issue 43). Drops the page cache (root only; else
# says the start is warm), starts the server and times start-up to its first answered search
# (process start to the first 200 of POST /v1/search), then offers a closed loop of 8 clients
# (caches off) for SECONDS and reads the server's resident memory: VmRSS, of which RssFile is the
# mapped index (shared with the page cache, reclaimable) and RssAnon private memory; resident MiB
# per mapping in OUT/mappings.tsv.
#
# Usage: benchmarks/memory.sh INDEX QUERIES.txt OUT [SECONDS=60]
set -euo pipefail
cd "$(dirname "$0")/.."
index=$1 queries=$2 out=$3 seconds=${4:-60}
source benchmarks/serve.sh
bin=target/release
mkdir -p "$out"
cache=warm
if [ "$(id -u)" = 0 ] && sync && echo 3 > /proc/sys/vm/drop_caches 2> /dev/null; then
  cache=cold
fi
started=$(date +%s.%N)
start_server "$out" memory "$index" --result-cache-entries 0 --embedding-cache-entries 0
query=$(head -1 "$queries" | python3 -c 'import json,sys; print(json.dumps({"query": sys.stdin.read().strip(), "k": 10}))')
until curl -sf -o /dev/null -H 'content-type: application/json' -d "$query" "$url/v1/search"; do
  sleep 0.05
done
first=$(echo "$(date +%s.%N) - $started" | bc)
"$bin/stillweb-loadtest" --target "$url" --queries "$queries" --out "$out/closed-8" \
  --server-pid "$pid" --workload search --concurrency 8 --duration "$seconds" --warmup 10 \
  --seed 1 > /dev/null
read -r rss file anon < <(resident_mib "$pid")
# Resident KiB per mapped file (the index's files, the model, the binary) and anonymous memory.
awk '/^[0-9a-f]+-[0-9a-f]+ / {name = NF >= 6 ? $6 : "[anonymous]"} /^Rss:/ {kib[name] += $2}
  END {for (n in kib) if (kib[n] >= 1024) printf "%d\t%s\n", kib[n] / 1024, n}' \
  "/proc/$pid/smaps" | sort -rn > "$out/mappings.tsv"
kill "$pid"
wait "$pid" 2> /dev/null || true
python3 - "$out/closed-8/report.json" "$cache" "$first" "$rss" "$file" "$anon" "$(du -sbL "$index" | cut -f1)" \
  > "$out/results.tsv" << 'PY'
import json, sys
report, cache, first, rss, rss_file, rss_anon, total = sys.argv[1:]
search = json.load(open(report))["operations"]["search"]
print("\t".join(["page cache", "first answer s", "searches/s", "p50 ms", "p99 ms", "errors",
                 "VmRSS MiB", "RssFile MiB", "RssAnon MiB", "index MB"]))
print("\t".join([cache, f"{float(first):.1f}", f"{search['rate']:.1f}",
                 f"{search['latency_ms']['p50']:.1f}", f"{search['latency_ms']['p99']:.1f}",
                 str(search["errors"]), rss, rss_file, rss_anon, f"{int(total) / 1e6:.0f}"]))
PY
column -t -s $'\t' "$out/results.tsv"
