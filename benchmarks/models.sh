#!/usr/bin/env bash
# Model throughput, in one run: this machine's GEMM ceiling (ONNX Runtime's fp32 and int8 kernels
# and stillweb's native int8 kernel; the int8 ceiling is the faster), then the MiniLM embedder on
# stillweb's native int8 engine (the default on CPUs), and its ONNX models in int8 and fp32
# through stillweb's Rust `ort` path and through Python onnxruntime (the same library version,
# model, texts, truncation and batching). The texts are chunks of the real samples exported by
# `stillweb-indexer export`.
#
# The machine is shared and its speed drifts by tens of percent within minutes, so the whole
# sequence runs MODELS_ROUNDS times (default 3), ceiling and models interleaved: each round's
# shares are taken against that round's own ceiling, and results.json gives every round and the
# medians. Writes $work/results.json.
#
# Usage: benchmarks/models.sh [CHUNKS]   (default 2000)
set -euo pipefail
cd "$(dirname "$0")/.."
chunks=${1:-2000}
rounds=${MODELS_ROUNDS:-3}
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
rm -f "$work"/*-round*.json

$bin/stillweb-indexer export --manifest corpus-manifests/samples.toml --unit chunks \
  --limit "$chunks" --out "$work/chunks.jsonl" > /dev/null
embed() {  # embed NAME ARGS...: stillweb-indexer bench-embed on the chunks
  local name=$1; shift
  RUST_LOG=warn $bin/stillweb-indexer bench-embed --texts "$work/chunks.jsonl" \
    --model-threads "$threads" "$@" > "$work/$name-round$round.json"
}
for round in $(seq "$rounds"); do
  echo "==> round $round of $rounds: GEMM ceiling ($threads threads), ONNX Runtime's kernels then the native one"
  "$py" benchmarks/gemm.py "$threads" > "$work/gemm-round$round.json"
  $bin/stillweb-indexer bench-gemm --threads "$threads" > "$work/gemm-native-round$round.json"
  echo "==> round $round: MiniLM int8 on stillweb's native engine (the default on CPUs)"
  embed native --embedder "$models/all-minilm-l6-v2" --engine native-int8
  echo "==> round $round: the same on the portable kernel (the plain loop; identical vectors)"
  STILLWEB_NATIVE_KERNEL=portable embed native-portable \
    --embedder "$models/all-minilm-l6-v2" --engine native-int8
  for model in all-minilm-l6-v2 all-minilm-l6-v2-fp32; do
    echo "==> round $round: $model as ONNX, Rust ort then Python onnxruntime"
    embed "$model-rust" --embedder "$models/$model" --engine onnx
    "$py" benchmarks/embed_onnxruntime.py "$models/$model" "$work/chunks.jsonl" "$threads" \
      > "$work/$model-python-round$round.json"
  done
done

"$py" - "$work" "$rounds" <<'PY'
import json, os, pathlib, statistics, subprocess, sys
work, rounds = pathlib.Path(sys.argv[1]), int(sys.argv[2])
load = lambda name, r: json.loads((work / f"{name}-round{r}.json").read_text())
# MiniLM-L6: 6 layers of q, k, v, o (384x384) and the 384x1536 feed-forward pair, 2 ops per
# multiply-add; attention's own products (~4% at these lengths) are left out, so this is a floor.
ops_per_token = 2 * (4 * 384 * 384 + 2 * 384 * 1536) * 6
def one_round(r):
    gemm, native_gemm = load("gemm", r), load("gemm-native", r)
    # The int8 ceiling is the fastest int8 product measured in this round, by either kernel.
    int8_ceiling = max(gemm["int8_ceiling_gops"], native_gemm["int8_ceiling_gops"])
    def entry(rust, ceiling, python=None):
        gops = rust["tokens_per_second"] * ops_per_token / 1e9
        e = {"rust_chunks_per_s": round(rust["texts_per_second"], 1), "rust_gops": round(gops, 1),
             "fraction_of_ceiling": round(gops / ceiling, 3),
             "chunks_per_s_at_130_tokens": round(rust["tokens_per_second"] / 130, 1)}
        if python:
            e["python_chunks_per_s"] = round(python["texts_per_second"], 1)
            e["rust_over_python"] = round(rust["texts_per_second"] / python["texts_per_second"], 3)
        return e
    return {"gemm": gemm, "gemm_native": native_gemm, "int8_ceiling_gops": int8_ceiling,
            "fp32_ceiling_gflops": gemm["fp32_ceiling_gflops"], "embedder": {
        "native-int8": entry(load("native", r), int8_ceiling),
        "native-int8-portable": entry(load("native-portable", r), int8_ceiling),
        "onnx-int8": entry(load("all-minilm-l6-v2-rust", r), int8_ceiling, load("all-minilm-l6-v2-python", r)),
        "onnx-fp32": entry(load("all-minilm-l6-v2-fp32-rust", r), gemm["fp32_ceiling_gflops"], load("all-minilm-l6-v2-fp32-python", r)),
    }}
per_round = [one_round(r) for r in range(1, rounds + 1)]
median = lambda values: round(statistics.median(values), 3)
medians = {"int8_ceiling_gops": median([r["int8_ceiling_gops"] for r in per_round]),
           "fp32_ceiling_gflops": median([r["fp32_ceiling_gflops"] for r in per_round]),
           "embedder": {name: {field: median([r["embedder"][name][field] for r in per_round])
                               for field in entry}
                        for name, entry in per_round[0]["embedder"].items()}}
first = load("native", 1)
result = {"machine": {"cpu": subprocess.run(["sh", "-c", "lscpu | sed -n 's/^Model name: *//p'"], capture_output=True, text=True).stdout.strip(),
                      "cores": os.cpu_count(), "native_kernel": per_round[0]["gemm_native"]["kernel"]},
          "texts": first["texts"], "mean_tokens": round(first["tokens"] / first["texts"], 1),
          "ops_per_token": ops_per_token, "rounds": rounds, "median": medians, "per_round": per_round}
(work / "results.json").write_text(json.dumps(result, indent=1) + "\n")
print(json.dumps({k: result[k] for k in ("machine", "texts", "mean_tokens", "median")}, indent=1))
PY
