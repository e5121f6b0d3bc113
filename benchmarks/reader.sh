#!/usr/bin/env bash
# Issue 41's quality table: SciFact nDCG@10 / Recall@100 (test queries; --qrels train to choose
# weights) and fabricated gold@1 / gold@10 for each embedder (MiniLM-L6, bge-small) without a
# reranker and with the MiniLM-L12 cross-encoder over pools of 10, 30 and 50 chunks, the
# reranker alone (weight 1) and interpolated (weight 0.5, the quality preset's). Builds the four
# indexes (timed: chunks/s, peak RSS) unless OUT already holds them.
#   benchmarks/reader.sh OUT [INDEXER]     (INDEXER: a stillweb-indexer binary; default: release build)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: benchmarks/reader.sh OUT [INDEXER]}
indexer=${2:-}
if [ -z "$indexer" ]; then
  cargo build --release -p stillweb-indexer
  indexer=target/release/stillweb-indexer
fi
models=${STILLWEB_MODELS:-${XDG_CACHE_HOME:-$HOME/.cache}/stillweb/models}
shared=${STILLWEB_SHARED_DATA:-../shared/data}
reranker=$models/ms-marco-minilm-l12
mkdir -p "$out"
declare -A embedder=([minilm]=$models/all-minilm-l6-v2 [bge]=$models/bge-small-en)
for e in minilm bge; do
  for corpus in scifact fabricated; do
    index=$out/$corpus-$e
    [ -f "$index/manifest.json" ] && continue
    /usr/bin/time -f "peak_rss_kib=%M wall_s=%e" "$indexer" build --manifest corpus-manifests/$corpus.toml \
      --out "$index" --embedder "${embedder[$e]}" 2> "$out/build-$corpus-$e.log" > /dev/null
    chunks=$(python3 -c "import json; print(json.load(open('$index/manifest.json'))['chunks'])")
    echo "build $corpus $e: $chunks chunks, $(tail -1 "$out/build-$corpus-$e.log")"
  done
done
row() {  # corpus embedder mode [pool]
  local corpus=$1 e=$2 mode=$3 pool=${4:-} args=()
  case $corpus in
    scifact) args+=(--beir "$shared/beir/scifact") ;;
    fabricated) args+=(--items "$shared/fabricated/items.jsonl") ;;
  esac
  [ -n "$pool" ] && args+=(--reranker "$reranker" --rerank-pool "$pool" --rerank-weight 1,0.5)
  "$indexer" eval --index "$out/$corpus-$e" --embedder "${embedder[$e]}" --mode "$mode" "${args[@]}" 2> /dev/null \
    | python3 -c "
import json, sys
runs = json.load(sys.stdin)
for r in runs if isinstance(runs, list) else [runs]:
    scores = ' '.join(f'{k} {v:.4f}' for k, v in r.items() if k.split('@')[0] in ('ndcg', 'recall', 'gold'))
    pool = r['params']['rerank_pool']
    weight = f\" weight {r['params']['rerank_weight']:g}\" if pool else ''
    print(f\"$corpus $e $mode pool {pool}{weight}: {scores} ({r['seconds']:.0f} s)\")
"
}
for e in minilm bge; do
  for corpus in scifact fabricated; do
    row $corpus $e hybrid
    for pool in 10 30 50; do row $corpus $e rerank $pool; done
  done
done | tee "$out/quality.txt"
