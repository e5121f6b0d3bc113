#!/usr/bin/env bash
# Where the server's CPU goes under load: a fresh server (caches off) on INDEX, a closed loop of
# stillweb-loadtest with the given workload flags, and `perf record` (the cpu-clock software
# event, so it works in guests without hardware counters) on the server for SECONDS in the middle
# of the run. Prints the share of the server's samples by part: the query embedding (native
# engine and tokenizer), the weight products alone, the dense candidates (usearch's HNSW), BM25
# (tantivy), the kernel, and the rest.
#
# Usage: benchmarks/cpu-share.sh INDEX QUERIES OUT SECONDS LOADTEST_FLAGS...
#   e.g. benchmarks/cpu-share.sh IDX q.txt /tmp/cpu 10 --workload retrieve --batch-size 32 --k 3 --concurrency 1
#   QUERIES: one query per line, or a BEIR queries.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
index=$1 queries=$2 out=$3 seconds=$4
shift 4
command -v perf > /dev/null || { echo "needs perf (Debian: linux-perf)" >&2; exit 1; }
source benchmarks/serve.sh
mkdir -p "$out"
queries=$(plain_queries "$queries" "$out")
start_server "$out" profiled "$index" --result-cache-entries 0 --embedding-cache-entries 0
target/release/stillweb-loadtest --target "$url" --queries "$queries" --out "$out/load" \
  --server-pid "$pid" --warmup 3 --duration $((seconds + 8)) --seed 1 "$@" > /dev/null &
load=$!
sleep 5
perf record -F 999 -e cpu-clock -p "$pid" -o "$out/perf.data" -- sleep "$seconds" 2> /dev/null
wait "$load"
kill "$pid"; wait "$pid" 2> /dev/null || true
perf report -i "$out/perf.data" --no-children --sort symbol --stdio 2> /dev/null \
  | python3 -c '
import re, sys
parts = {"embedding": 0.0, "  of which weight products": 0.0, "dense candidates (HNSW)": 0.0,
         "BM25 (tantivy)": 0.0, "kernel": 0.0, "rest": 0.0}
for line in sys.stdin:
    m = re.match(r"\s+([0-9.]+)%\s+\[(.)\]\s+(.*)", line)
    if not m:
        continue
    share, kind, symbol = float(m.group(1)), m.group(2), m.group(3)
    if kind == "k":
        parts["kernel"] += share
    elif "stillweb_native" in symbol or "tokenizers" in symbol or "unicode" in symbol:
        parts["embedding"] += share
        if "vnni_blocks" in symbol or "avx2_blocks" in symbol or "amx_matmul" in symbol:
            parts["  of which weight products"] += share
    elif "usearch" in symbol or symbol.startswith(("nk_", "search_<")):
        parts["dense candidates (HNSW)"] += share
    elif "tantivy" in symbol:
        parts["BM25 (tantivy)"] += share
    else:
        parts["rest"] += share
total = sum(v for k, v in parts.items() if not k.startswith(" "))
for name, share in parts.items():
    print(f"{name:<28} {100 * share / total:5.1f}%")
'
