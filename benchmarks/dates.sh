#!/usr/bin/env bash
# Date-filtered against unfiltered searches/s: the same queries plain, with a wide range
# (`after:2012 before:2020`) and with a narrow one (`after:2018 before:2019`) appended, each
# through benchmarks/concurrency.sh (a fresh server, caches off, at 1 and 8 clients), the
# variants alternating within each round so that the machine's drift hits them alike. Then
# `stillweb-bench filtered-recall`: the dense retriever's filtered top 10 against the exact
# filtered top 10 over the same ranges.
#
# Usage: benchmarks/dates.sh INDEX QUERIES OUT [SECONDS=10] [ROUNDS=3]
#   QUERIES: one query a line, a TSV (id, query), or JSON Lines with "question" (fabricated
#   items.jsonl) or "text" (BEIR queries.jsonl).
# Prints each run's line, the median searches/s of each variant and its ratio to plain, and
# the recall JSON.
set -euo pipefail
cd "$(dirname "$0")/.."
index=$1 queries=$2 out=$3 seconds=${4:-10} rounds=${5:-3}
mkdir -p "$out"
python3 - "$queries" "$out" <<'PY'
import json, sys
def text(line):
    if line.startswith("{"):
        row = json.loads(line)
        return row.get("question") or row["text"]
    return line.split("\t", 1)[-1]
queries = [text(l.rstrip("\n")) for l in open(sys.argv[1]) if l.strip()]
with open(f"{sys.argv[2]}/queries.tsv", "w") as f:
    f.writelines(f"{i}\t{q}\n" for i, q in enumerate(queries))
for name, suffix in [("plain", ""), ("wide", " after:2012 before:2020"), ("narrow", " after:2018 before:2019")]:
    with open(f"{sys.argv[2]}/{name}.txt", "w") as f:
        f.writelines(q + suffix + "\n" for q in queries)
PY
for round in $(seq "$rounds"); do
  for variant in plain wide narrow; do
    benchmarks/concurrency.sh "$index" "$out/$variant.txt" "$out/$variant-$round" "$seconds" 1 "1 8" |
      sed "s/^/$variant /"
  done
done
python3 - "$out" "$rounds" <<'PY'
import glob, json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
rate = {}
for variant in ["plain", "wide", "narrow"]:
    for c in [1, 8]:
        runs = [json.load(open(p))["operations"]["search"]["rate"]
                for p in glob.glob(f"{out}/{variant}-*/*-c{c}/report.json")]
        rate[variant, c] = statistics.median(runs)
for (variant, c), r in rate.items():
    print(f"{variant:<7} c={c}: median {r:7.1f} searches/s over {rounds} rounds, "
          f"{r / rate['plain', c]:.3f} x plain")
PY
target/release/stillweb-bench filtered-recall --index "$index" --queries "$out/queries.tsv" \
  --count 200 --ranges 2012-01-01..2020-01-01,2018-01-01..2019-01-01,2018-06-01..2018-07-01 |
  tee "$out/recall.json"
