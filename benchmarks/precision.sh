#!/usr/bin/env bash
# Stage-2 chunk vectors at f32, f16 and i8 on one corpus, side by side: the f16 and i8 indexes
# are `stillweb-indexer revector` copies of the f32 index (the same graph and tantivy files,
# hard-linked), so only the chunk vectors differ. Each is served in turn (caches off) and loaded
# with stillweb-loadtest: 10 s of warm-up, then a closed loop of 8 clients (searches/s, p50/p99);
# then the server's resident memory (VmRSS, of which RssFile is the mapped index) and the index's
# bytes on disk. Results in $out/results.tsv.
#
# Usage: benchmarks/precision.sh INDEX_F32 QUERIES.txt OUT [SECONDS=30]
#   INDEX_F32 built with --chunk-vectors f32 (e.g. `stillweb-bench build-scale --chunk-vectors f32`)
set -euo pipefail
cd "$(dirname "$0")/.."
index=$1 queries=$2 out=$3 seconds=${4:-30}
source benchmarks/serve.sh
bin=target/release
mkdir -p "$out"
[ -f "$index/dense/chunks.f32" ] || { echo "$index has no f32 chunk vectors" >&2; exit 1; }

for precision in f16 i8; do
  [ -f "$out/index-$precision/manifest.json" ] ||
    "$bin/stillweb-indexer" revector --index "$index" --out "$out/index-$precision" \
      --chunk-vectors "$precision" --force > /dev/null
done

printf 'precision\tsearches/s\tp50 ms\tp99 ms\terrors\tVmRSS MiB\tRssFile MiB\tRssAnon MiB\tindex MB\tvectors MB\n' \
  > "$out/results.tsv"
for precision in f32 f16 i8; do
  dir=$index
  [ "$precision" = f32 ] || dir=$out/index-$precision
  start_server "$out" "$precision" "$dir" --result-cache-entries 0 --embedding-cache-entries 0
  for run in warmup closed-8; do
    duration=$seconds
    [ "$run" = warmup ] && duration=10
    "$bin/stillweb-loadtest" --target "$url" --queries "$queries" --out "$out/$precision-$run" \
      --server-pid "$pid" --workload search --concurrency 8 --duration "$duration" --seed 1 > /dev/null
  done
  memory=$(resident_mib "$pid")
  kill "$pid"
  wait "$pid" 2> /dev/null || true
  bytes=$(du -sbL "$dir" | cut -f1)
  vectors=$(stat -c %s "$dir/dense/chunks.$precision")
  python3 - "$out/$precision-closed-8/report.json" "$precision" "$memory" "$bytes" "$vectors" \
    >> "$out/results.tsv" << 'EOF'
import json, sys
report, precision, memory, total, vectors = sys.argv[1:]
search = json.load(open(report))["operations"]["search"]
rss, rss_file, rss_anon = memory.split()
print("\t".join([precision, f"{search['rate']:.1f}", f"{search['latency_ms']['p50']:.1f}",
                 f"{search['latency_ms']['p99']:.1f}", str(search["errors"]),
                 rss, rss_file, rss_anon, f"{int(total) / 1e6:.0f}", f"{int(vectors) / 1e6:.0f}"]))
EOF
done
column -t -s $'\t' "$out/results.tsv"
