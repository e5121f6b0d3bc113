#!/usr/bin/env bash
# One query's embedding cost by batch size on each CPU engine, against this machine's GEMM
# ceilings measured in the same run: `stillweb-indexer bench-query-batches` (one thread, SciFact's
# queries) on the native int8 engine, ONNX int8 and ONNX fp32, beside ONNX Runtime's fp32 and int8
# products (`benchmarks/gemm.py`) and the native int8 kernel's (measured by bench-query-batches
# itself). The int8 ceiling is the faster of the two int8 kernels; each engine's share is its
# weight products' rate over the ceiling of its own arithmetic.
#
# The machine's speed drifts, so ROUNDS rounds run ceilings and engines interleaved, and the
# table gives medians over rounds (each share against its own round's ceiling).
#
# Usage: benchmarks/query-embed.sh QUERIES OUT [SECONDS=3] [ROUNDS=3] [BATCHES=1,8,32,128]
#   QUERIES: a BEIR queries.jsonl (or any JSON Lines with "text").
set -euo pipefail
cd "$(dirname "$0")/.."
queries=$1 out=$2 seconds=${3:-3} rounds=${4:-3} batches=${5:-1,8,32,128}
source benchmarks/serve.sh
mkdir -p "$out"
models/fetch > /dev/null
benchmarks/peers-venv
py=${XDG_CACHE_HOME:-$HOME/.cache}/stillweb/venv-bench/bin/python
cargo build --release --locked -p stillweb-indexer
for round in $(seq "$rounds"); do
  echo "==> round $round of $rounds: ONNX Runtime's fp32 and int8 products (1 thread)"
  OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 "$py" benchmarks/gemm.py 1 > "$out/gemm-$round.json"
  for engine in native-int8:all-minilm-l6-v2:native-int8 onnx-int8:all-minilm-l6-v2:onnx \
    onnx-fp32:all-minilm-l6-v2-fp32:onnx; do
    IFS=: read -r name model flag <<< "$engine"
    echo "==> round $round: $name, batches $batches"
    RUST_LOG=warn target/release/stillweb-indexer bench-query-batches --queries "$queries" \
      --embedder "$models/$model" --engine "$flag" --model-threads 1 --seconds "$seconds" \
      --batches "$batches" > "$out/$name-$round.json"
  done
done

"$py" - "$out" "$rounds" <<'PY'
import json, pathlib, statistics, sys
out, rounds = pathlib.Path(sys.argv[1]), int(sys.argv[2])
load = lambda name, r: json.loads((out / f"{name}-{r}.json").read_text())
engines = ["native-int8", "onnx-int8", "onnx-fp32"]
rows = {}  # (engine, batch) -> [(ms, gops, share)] over rounds
ceilings = {"int8": [], "fp32": []}
for r in range(1, rounds + 1):
    gemm = load("gemm", r)
    native = load("native-int8", r)
    int8 = max(gemm["int8_ceiling_gops"], native["native_int8_ceiling_gops"])
    fp32 = gemm["fp32_ceiling_gflops"]
    ceilings["int8"].append(int8)
    ceilings["fp32"].append(fp32)
    for engine in engines:
        report = load(engine, r)
        ceiling = fp32 if engine.endswith("fp32") else int8
        for b in report["batches"]:
            rows.setdefault((engine, b["batch"]), []).append(
                (b["ms_per_query"], b["model_gops"], b["model_gops"] / ceiling))
median = statistics.median
first = load("native-int8", 1)
print(f'{first["queries"]} queries, {first["tokens_per_query"]} tokens each, 1 thread, '
      f'{rounds} rounds; ceilings (median): int8 {median(ceilings["int8"]):.1f} GOP/s, '
      f'fp32 {median(ceilings["fp32"]):.1f} GFLOP/s')
print("| engine | batch | ms per query | weight products, GOP/s | share of its ceiling |")
print("|---|---|---|---|---|")
for (engine, batch), runs in rows.items():
    ms, gops, share = (median(x) for x in zip(*runs))
    print(f"| {engine} | {batch} | {ms:.3f} | {gops:.1f} | {100 * share:.0f}% |")
PY
