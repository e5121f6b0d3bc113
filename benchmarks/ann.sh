#!/usr/bin/env bash
# ANN: usearch (through stillweb's Rust crate, with the settings of every stillweb document graph)
# beside faiss-cpu HNSW and hnswlib (PyPI), on the same MiniLM vectors and queries, in one run:
# build from all cores, then recall@10, single-thread QPS and latency at ef 32/64/128, and bytes
# per vector. The vectors are the first ROWS chunk vectors of a built index; the queries are
# embedded by the server's embedder, one per call, and their exact top 10 found by brute force.
# Writes $work/results.json; BENCHMARKS.md quotes it.
#
# Usage: benchmarks/ann.sh INDEX ROWS QUERIES.tsv [COUNT]   (COUNT queries, default 1000)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 3 ] || { sed -n '2,9p' "$0" >&2; exit 2; }
index=$1 rows=$2 queries=$3 count=${4:-1000}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/stillweb
work=$cache/bench/ann-$(basename "$index")-$rows
mkdir -p "$work"
models/fetch > /dev/null
benchmarks/peers-venv
py=$cache/venv-bench/bin/python
export ORT_DYLIB_PATH=${STILLWEB_MODELS:-$cache/models}/onnxruntime/libonnxruntime.so
cargo build --release --locked -p stillweb-bench
bin=target/release
threads=$(nproc)
efs=32,64,128

echo "==> data: $rows vectors from $index, $count queries"
RUST_LOG=warn $bin/stillweb-bench ann-data --index "$index" --rows "$rows" --queries "$queries" \
  --count "$count" --out "$work/data" > /dev/null
echo "==> usearch (f32 as stillweb builds it, and i8)"
$bin/stillweb-bench ann --data "$work/data" --threads "$threads" --ef "$efs" > "$work/usearch.json"
echo "==> faiss-cpu, hnswlib"
"$py" benchmarks/ann_peers.py "$work/data" "$threads" "$efs" > "$work/peers.json"

"$py" - "$work" <<'PY'
import json, os, pathlib, subprocess, sys
work = pathlib.Path(sys.argv[1])
engines = json.loads((work / "usearch.json").read_text()) + json.loads((work / "peers.json").read_text())
cpu = subprocess.run(["sh", "-c", "lscpu | sed -n 's/^Model name: *//p'"], capture_output=True, text=True).stdout.strip()
result = {"machine": {"cpu": cpu, "cores": os.cpu_count()},
          "data": json.loads((work / "data" / "meta.json").read_text()), "engines": engines}
(work / "results.json").write_text(json.dumps(result, indent=2))
print(f"{'engine':38} {'build s':>8} {'B/vec':>7} " + " ".join(f"{'ef'+str(s['ef'])+' R@10':>10} {'qps':>7} {'p99 us':>7}" for s in engines[0]["searches"]))
for e in engines:
    row = f"{e['engine']:38} {e['build_seconds']:8.1f} {e['bytes_per_vector']:7.0f} "
    row += " ".join(f"{s['recall_at_10']:10.3f} {s['qps']:7.0f} {s['p99_us']:7.0f}" for s in e["searches"])
    print(row)
print(f"results: {work}/results.json")
PY
