#!/usr/bin/env bash
# What an overlay costs: building 500 new pages (the first 500 fabricated pages of
# ../shared/data/fabricated) as an overlay of the ~1M-chunk scale index against building that
# index, and searches/s at CLIENTS clients (caches off) of the index alone against the index
# with the overlay, servers alternating, a fresh one each round.
#
# Usage: benchmarks/overlay.sh SYNTH_DIR OUT [SECONDS=20] [ROUNDS=3] [CLIENTS=8]
#   SYNTH_DIR from `stillweb-bench synth` (corpus.toml, queries.txt). The base is built once into
#   OUT/base (timed); delete it to time it again.
set -euo pipefail
cd "$(dirname "$0")/.."
synth=$1 out=$2 seconds=${3:-20} rounds=${4:-3} clients=${5:-8}
source benchmarks/serve.sh
bin=target/release
mkdir -p "$out"
now() { date +%s.%N; }

# 1. The base index, as BENCHMARKS.md's scale runs build it.
if [ ! -f "$out/base/manifest.json" ]; then
  t0=$(now)
  "$bin/stillweb-bench" build-scale --manifest "$synth/corpus.toml" --out "$out/base" --force \
    > "$out/build-base.json"
  python3 -c "print(round($(now) - $t0, 1))" > "$out/build-base.seconds"
fi

# 2. The overlay: 500 pages, embedded with the base's model.
mkdir -p "$out/pages"
head -n 500 ../shared/data/fabricated/documents.jsonl > "$out/pages/pages.jsonl"
printf 'name = "fabricated-500"\n[[source]]\nformat = "jsonl"\npath = "pages.jsonl"\nexpected_documents = 500\n' \
  > "$out/pages/m.toml"
t0=$(now)
"$bin/stillweb-indexer" build --manifest "$out/pages/m.toml" --out "$out/overlay" --force \
  --overlay-of "$out/base" > "$out/build-overlay.json"
python3 -c "print(round($(now) - $t0, 1))" > "$out/build-overlay.seconds"
echo "base build: $(cat "$out/build-base.seconds") s; overlay build: $(cat "$out/build-overlay.seconds") s"

# 3. Searches/s, alternating.
for round in $(seq "$rounds"); do
  for layers in base overlay; do
    flags=()
    [ "$layers" = overlay ] && flags=(--overlay "$out/overlay")
    name=$layers-$round
    start_server "$out" "$name" "$out/base" "${flags[@]}" \
      --result-cache-entries 0 --embedding-cache-entries 0
    "$bin/stillweb-loadtest" --target "$url" --queries "$synth/queries.txt" --out "$out/$name-warm" \
      --workload search --concurrency "$clients" --duration 5 --seed 9 > /dev/null
    "$bin/stillweb-loadtest" --target "$url" --queries "$synth/queries.txt" --out "$out/$name" \
      --server-pid "$pid" --workload search --concurrency "$clients" --duration "$seconds" \
      --seed 1 > /dev/null
    python3 - "$out/$name/report.json" "$name" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); s = d["operations"]["search"]; v = d["server"]
print(f'{sys.argv[2]:<12} searches/s {s["rate"]:7.1f}  p50 {s["latency_ms"]["p50"]:6.1f} ms  '
      f'p99 {s["latency_ms"]["p99"]:6.1f} ms  CPU/search {1000 * v["cpu_seconds_per_search"]:5.2f} ms  errors {s["errors"]}')
PY
    kill "$pid"; wait "$pid" 2> /dev/null || true
  done
done
