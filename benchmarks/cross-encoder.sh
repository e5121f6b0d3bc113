#!/usr/bin/env bash
# The MiniLM-L12 cross-encoder's pairs/s on the native int8 engine and on ONNX Runtime (the
# wheel's int8 graph), pools of 30 SciFact chunks against SciFact queries, one pool per call and 8
# pools per call (what the server's batcher hands it), beside the int8 product ceiling
# (bench-gemm, MiniLM-L12's shapes are MiniLM-L6's), ROUNDS rounds interleaved.
#   benchmarks/cross-encoder.sh [SECONDS=10] [ROUNDS=3] [INDEXER]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10} rounds=${2:-3} indexer=${3:-}
if [ -z "$indexer" ]; then
  cargo build --release -p stillweb-indexer
  indexer=target/release/stillweb-indexer
fi
models=${STILLWEB_MODELS:-${XDG_CACHE_HOME:-$HOME/.cache}/stillweb/models}
scifact=${STILLWEB_SHARED_DATA:-../shared/data}/beir/scifact
for round in $(seq "$rounds"); do
  "$indexer" bench-gemm --seconds 2 | python3 -c "
import json, sys
d = json.load(sys.stdin)
print('round $round ceiling', json.dumps(d, separators=(',', ':'))[:400])"
  for engine in native-int8 onnx; do
    "$indexer" bench-rerank --reranker "$models/ms-marco-minilm-l12" --reranker-engine "$engine" \
      --queries "$scifact/queries.jsonl" --passages "$scifact/corpus.jsonl" --pool 30 \
      --pools-per-call 1,8 --seconds "$seconds" 2> /dev/null | sed "s/^/round $round $engine /"
  done
done
