#!/usr/bin/env bash
# The GPU measurement, as one prepared script for a machine with an NVIDIA GPU (ONNX Runtime's
# CUDA execution provider). Three parts, each written to OUT and summarised in OUT/summary.md:
#
#   1. Reranker pairs/s and model FLOPs utilisation (MFU) at pools of 30, 100 and 300 passages,
#      one request's pool per model call and 8 requests' pools per call (what the server's
#      dynamic batcher hands the model), with a random-weight model in the exact shape of
#      Qwen3-Reranker-0.6B (speed does not depend on the weights) on real SciFact queries and
#      passages. MFU = useful FLOPs (2 x matmul weights x tokens + attention's 4 x layers x
#      tokens^2 x 2048, padding not counted) / the GPU's dense peak (STILLWEB_GPU_PEAK_TFLOPS, else
#      looked up from the GPU's name; the model runs in fp32, so both the TF32 and the 16-bit
#      tensor-core peaks are reported against).
#   2. Build embedding: `stillweb-indexer build --provider cuda` of SciFact (5,183 documents),
#      chunks/s over the whole build.
#   3. End to end: reranked searches/s through the server (--provider cuda) on that index at
#      pools 30 and 100, closed loops of 1, 8 and 32 clients (benchmarks/rerank.sh).
#
# Usage: benchmarks/gpu.sh OUT [SECONDS=20]
# Needs, prepared beforehand on a machine with network access (the measured machine may have
# none): release binaries (cargo build --release), `models/fetch --gpu` (ONNX Runtime's GPU build
# and the CUDA libraries), `models/make-fixtures` (its Python environment builds the model here,
# 2.4 GB, once), and ../shared/data/beir/scifact. STILLWEB_GPU_SMOKE=1 runs every step on the CPU
# with tiny settings, to check the script itself on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$1 seconds=${2:-20}
mkdir -p "$out"
cache=${XDG_CACHE_HOME:-$HOME/.cache}/stillweb
models=${STILLWEB_MODELS:-$cache/models}
data=${STILLWEB_SHARED_DATA:-../shared/data}
die() { printf 'benchmarks/gpu.sh: %s\n' "$*" >&2; exit 1; }

smoke=${STILLWEB_GPU_SMOKE:-0}
if [ "$smoke" = 1 ]; then
  provider=cpu pools=4,8 per_call=1,2 e2e_pools="4" clients="1 4" seconds=2
  manifest=corpus-manifests/samples.toml queries=$data/beir/scifact/queries.jsonl
  export ORT_DYLIB_PATH=$models/onnxruntime/libonnxruntime.so
else
  provider=cuda:0 pools=30,100,300 per_call=1,8 e2e_pools="30 100" clients="1 8 32"
  manifest=corpus-manifests/scifact.toml queries=$data/beir/scifact/queries.jsonl
  [ -f "$models/onnxruntime-gpu/env.sh" ] || die "run models/fetch --gpu first (ONNX Runtime's GPU build and the CUDA libraries)"
  # shellcheck disable=SC1091
  source "$models/onnxruntime-gpu/env.sh"
  # The fp32 embedder on the GPU (the int8 one's dynamic quantisation runs on the CPU there), for
  # the build and the server alike.
  export STILLWEB_EMBEDDER=$models/all-minilm-l6-v2-fp32
  command -v nvidia-smi > /dev/null || die "nvidia-smi not found: this needs a machine with an NVIDIA GPU and its driver"
fi
for binary in stillweb-indexer stillweb-server stillweb-loadtest; do
  [ -x "target/release/$binary" ] || die "target/release/$binary is missing: cargo build --release"
done
[ -f "$data/beir/scifact/corpus.jsonl" ] || die "$data/beir/scifact is missing"

{
  echo "# GPU measurement, $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2> /dev/null || echo '?')"
  echo
  if [ "$smoke" = 1 ]; then
    echo "SMOKE RUN on the CPU (STILLWEB_GPU_SMOKE=1): checks the script, measures nothing."
  else
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  fi
  echo
} > "$out/summary.md"

# 1. The reranker alone.
reranker=$cache/bench/qwen3-reranker-0.6b-shape
if [ "$smoke" = 1 ]; then
  reranker=$models/fixtures/qwen3-reranker-tiny
elif [ ! -f "$reranker/qwen3-reranker-0.6b-shape/model.toml" ]; then
  [ -x "$models/.venv-fixtures/bin/python" ] || die "run models/make-fixtures first (its Python environment builds the model)"
  "$models/.venv-fixtures/bin/python" models/fixtures.py --models "$models" --out "$reranker" --qwen3-0.6b-shape > /dev/null
fi
if [ "$smoke" = 0 ]; then
  reranker=$reranker/qwen3-reranker-0.6b-shape
  # Pairs per model call: a GPU wants more than the CPU default of 16 (STILLWEB_GPU_RERANK_BATCH).
  sed -i '/^batch_size = /d' "$reranker/model.toml"
  echo "batch_size = ${STILLWEB_GPU_RERANK_BATCH:-64}" >> "$reranker/model.toml"
fi
target/release/stillweb-indexer bench-rerank --reranker "$reranker" --provider "$provider" \
  --queries "$data/beir/scifact/queries.jsonl" --passages "$data/beir/scifact/corpus.jsonl" \
  --pool "$pools" --pools-per-call "$per_call" --seconds "$seconds" > "$out/rerank.jsonl"
gpu_name=$( [ "$smoke" = 1 ] && echo cpu || nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
python3 - "$out/rerank.jsonl" "$gpu_name" "${STILLWEB_GPU_PEAK_TFLOPS:-}" "$smoke" >> "$out/summary.md" <<'PY'
import json, sys
path, gpu, override, smoke = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
# Dense peaks in TFLOPS (NVIDIA's data sheets, without sparsity): (TF32, FP16/BF16).
PEAKS = {"H200": (494.7, 989.4), "H100 SXM": (494.7, 989.4), "H100 NVL": (417.5, 835.0),
         "H100 PCIe": (378.0, 756.0), "A100": (156.0, 312.0), "L40S": (183.0, 362.0),
         "L4": (60.0, 121.0), "A10": (62.5, 125.0)}
peak = next((p for k, p in PEAKS.items() if k in gpu), None)
if override:
    peak = (float(override), float(override))
# Qwen3-0.6B's shape: per layer q 1024x2048, k and v 1024x1024, o 2048x1024, gate and up
# 1024x3072, down 3072x1024; 28 layers; attention width 16 heads x 128.
layers, weights_per_layer, width = 28, 1024 * 2048 * 2 + 1024 * 1024 * 2 + 1024 * 3072 * 3, 16 * 128
print("## 1. Reranker alone (Qwen3-Reranker-0.6B shape, fp32)\n")
print(f"GPU: {gpu}; dense peak TF32 / FP16 TFLOPS: {peak if peak else 'unknown (set STILLWEB_GPU_PEAK_TFLOPS)'}\n")
print("| pool | pools per call | pairs/s | requests/s | tokens/pair | TFLOPS | MFU vs TF32 | MFU vs FP16 |")
print("|---|---|---|---|---|---|---|---|")
for line in open(path):
    r = json.loads(line)
    n, n2 = r["mean_tokens_per_pair"], r["mean_squared_tokens_per_pair"]
    flops = 2 * layers * weights_per_layer * n + 4 * layers * n2 * width
    tflops = flops * r["pairs_per_second"] / 1e12
    mfu = lambda i: f"{100 * tflops / peak[i]:.1f}%" if peak else "?"
    # The smoke run's tiny model is not the 0.6B shape: no FLOPs for it.
    shown = "n/a" if smoke else f"{tflops:.2f}"
    print(f'| {r["pool"]} | {r["pools_per_call"]} | {r["pairs_per_second"]:.1f} | {r["requests_per_second"]:.2f} '
          f'| {n:.0f} | {shown} | {"n/a" if smoke else mfu(0)} | {"n/a" if smoke else mfu(1)} |')
print()
PY

# 2. Build embedding on the GPU.
index=$out/index
started=$(date +%s.%N)
target/release/stillweb-indexer build --manifest "$manifest" --out "$index" --force \
  --provider "$provider" > "$out/build.json"
elapsed=$(python3 -c "import time; print(time.time() - $started)")
python3 - "$out/build.json" "$elapsed" "$provider" >> "$out/summary.md" <<'PY'
import json, sys
report, elapsed, provider = json.load(open(sys.argv[1])), float(sys.argv[2]), sys.argv[3]
chunks = report.get("chunks") or report.get("manifest", {}).get("chunks")
print(f"## 2. Index build with the embedder on {provider}\n")
print(f"{chunks} chunks in {elapsed:.1f} s (the whole build): **{chunks / elapsed:.0f} chunks/s**\n")
PY

# 3. End to end through the server.
echo "## 3. Reranked searches/s through the server" >> "$out/summary.md"
echo >> "$out/summary.md"
# shellcheck disable=SC2086
benchmarks/rerank.sh "$index" "$queries" "$reranker" "$out/e2e" "$seconds" 1 "$e2e_pools" "$clients" \
  "target/release/stillweb-server::--provider $provider" | tee -a "$out/summary.md"
cat "$out/summary.md"
