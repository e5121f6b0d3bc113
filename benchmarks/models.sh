#!/usr/bin/env bash
# Model throughput, in one run: this machine's GEMM ceiling (ONNX Runtime's fp32 and int8 kernels
# and stillweb's native int8 kernel; the int8 ceiling is the faster), then the MiniLM embedder on
# stillweb's native int8 engine (the default on CPUs), and its ONNX models in int8 and fp32
# through stillweb's Rust `ort` path and through Python onnxruntime (the same library version,
# model, texts, truncation and batching). The texts are chunks of the real samples exported by
# `stillweb-indexer export`. Writes $work/results.json.
#
# Usage: benchmarks/models.sh [CHUNKS]   (default 2000)
set -euo pipefail
cd "$(dirname "$0")/.."
chunks=${1:-2000}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/stillweb
models=${STILLWEB_MODELS:-$cache/models}
work=$cache/bench/models
mkdir -p "$work"
models/fetch > /dev/null
benchmarks/peers-venv
py=$cache/venv-bench/bin/python
export ORT_DYLIB_PATH=$models/onnxruntime/libonnxruntime.so
cargo build --release --locked -p stillweb-indexer
bin=target/release
threads=$(nproc)

$bin/stillweb-indexer export --manifest corpus-manifests/samples.toml --unit chunks \
  --limit "$chunks" --out "$work/chunks.jsonl" > /dev/null
echo "==> GEMM ceiling ($threads threads): ONNX Runtime's kernels, then stillweb's native int8 kernel"
"$py" benchmarks/gemm.py "$threads" > "$work/gemm.json"
$bin/stillweb-indexer bench-gemm --threads "$threads" > "$work/gemm-native.json"
echo "==> MiniLM int8 on stillweb's native engine (the default on CPUs)"
RUST_LOG=warn $bin/stillweb-indexer bench-embed --texts "$work/chunks.jsonl" \
  --embedder "$models/all-minilm-l6-v2" --engine native-int8 --model-threads "$threads" > "$work/native-rust.json"
echo "==> the same on its portable kernel (what CPUs without AMX run; identical vectors)"
STILLWEB_NATIVE_KERNEL=portable RUST_LOG=warn $bin/stillweb-indexer bench-embed --texts "$work/chunks.jsonl" \
  --embedder "$models/all-minilm-l6-v2" --engine native-int8 --model-threads "$threads" > "$work/native-portable-rust.json"
for model in all-minilm-l6-v2 all-minilm-l6-v2-fp32; do
  echo "==> $model as ONNX: Rust ort, then Python onnxruntime"
  RUST_LOG=warn $bin/stillweb-indexer bench-embed --texts "$work/chunks.jsonl" \
    --embedder "$models/$model" --engine onnx --model-threads "$threads" > "$work/$model-rust.json"
  "$py" benchmarks/embed_onnxruntime.py "$models/$model" "$work/chunks.jsonl" "$threads" \
    > "$work/$model-python.json"
done

"$py" - "$work" <<'PY'
import json, os, pathlib, subprocess, sys
work = pathlib.Path(sys.argv[1])
load = lambda n: json.loads((work / n).read_text())
gemm, native_gemm = load("gemm.json"), load("gemm-native.json")
# The int8 ceiling is the fastest int8 product measured here, by either kernel.
int8_ceiling = max(gemm["int8_ceiling_gops"], native_gemm["int8_ceiling_gops"])
# MiniLM-L6: 6 layers of q, k, v, o (384x384) and the 384x1536 feed-forward pair, 2 ops per
# multiply-add; attention's own products (~4% at these lengths) are left out, so this is a floor.
ops_per_token = 2 * (4 * 384 * 384 + 2 * 384 * 1536) * 6
result = {"machine": {"cpu": subprocess.run(["sh", "-c", "lscpu | sed -n 's/^Model name: *//p'"], capture_output=True, text=True).stdout.strip(),
                      "cores": os.cpu_count()},
          "gemm": gemm, "gemm_native": native_gemm, "int8_ceiling_gops": int8_ceiling,
          "ops_per_token": ops_per_token, "embedder": {}}
def entry(rust, ceiling, python=None):
    gops = rust["tokens_per_second"] * ops_per_token / 1e9
    e = {"texts": rust["texts"], "mean_tokens": round(rust["tokens"] / rust["texts"], 1),
         "rust_chunks_per_s": round(rust["texts_per_second"], 1),
         "rust_gops": round(gops, 1), "fraction_of_ceiling": round(gops / ceiling, 3),
         "chunks_per_s_at_130_tokens": round(rust["tokens_per_second"] / 130, 1)}
    if python:
        e["python_chunks_per_s"] = round(python["texts_per_second"], 1)
        e["rust_over_python"] = round(rust["texts_per_second"] / python["texts_per_second"], 3)
    return e
result["embedder"]["native-int8"] = entry(load("native-rust.json"), int8_ceiling)
result["embedder"]["native-int8-portable"] = entry(load("native-portable-rust.json"), int8_ceiling)
result["embedder"]["onnx-int8"] = entry(load("all-minilm-l6-v2-rust.json"), int8_ceiling, load("all-minilm-l6-v2-python.json"))
result["embedder"]["onnx-fp32"] = entry(load("all-minilm-l6-v2-fp32-rust.json"), gemm["fp32_ceiling_gflops"], load("all-minilm-l6-v2-fp32-python.json"))
(work / "results.json").write_text(json.dumps(result, indent=1) + "\n")
print(json.dumps(result, indent=1))
PY
