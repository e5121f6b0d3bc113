#!/usr/bin/env bash
# stillweb beside Search-R1's `retrieval_server.py` (the retriever most search-agent RL recipes
# start from) on SciFact, in one run on one host: the peer with all-MiniLM-L6-v2 (the same
# weights stillweb embeds with, fp32 PyTorch, mean pooling) over a faiss Flat index that its own
# `index_builder.py` builds, on the CPU; stillweb in its default hybrid mode, result and
# embedding caches off. One closed-loop client program (stillweb-loadtest's `retrieve`
# workload: Search-R1's `POST /retrieve {"queries", "topk": 3}`) drives both servers in turn,
# a fresh server for each, at 1, 8 and 32 clients sending one query per call and at one client
# sending calls of 32 queries; ROUNDS rounds alternate the servers. stillweb runs twice: as it is,
# and with `--embed-batch-queries 0` (each search embeds its own query, the default before
# queries were gathered).
#
# The peer's code is never committed here: pass a checkout of
# https://github.com/PeterGriffinJin/Search-R1 (its two files are copied into the cache and
# patched only to run on the CPU: `.cuda()` -> `.cpu()`, fp16 off). Its Python environment
# (PyTorch, transformers, faiss-cpu, datasets, FastAPI, uvicorn from PyPI, pinned; ~7 GB, as
# PyPI's torch brings CUDA libraries) and its index live under ~/.cache/stillweb/peers.
#
# Usage: benchmarks/search-r1.sh SEARCH_R1_CHECKOUT STILLWEB_SCIFACT_INDEX OUT [SECONDS=15] [ROUNDS=3]
#   STILLWEB_SCIFACT_INDEX: `stillweb-indexer build --manifest corpus-manifests/scifact.toml --out DIR`.
# Prints one line per run and a table of medians; every run's report.json is in OUT/<run>/.
set -euo pipefail
cd "$(dirname "$0")/.."
checkout=$1 index=$2 out=$3 seconds=${4:-15} rounds=${5:-3}
source benchmarks/serve.sh
die() { printf 'benchmarks/search-r1.sh: %s\n' "$*" >&2; exit 1; }
scifact=../shared/data/beir/scifact
[ -f "$scifact/corpus.jsonl" ] || die "SciFact is missing: $scifact/corpus.jsonl"
server_py=$checkout/search_r1/search/retrieval_server.py
builder_py=$checkout/search_r1/search/index_builder.py
[ -f "$server_py" ] && [ -f "$builder_py" ] \
  || die "$checkout is not a Search-R1 checkout (no search_r1/search/retrieval_server.py); clone https://github.com/PeterGriffinJin/Search-R1"
[ -f "$index/manifest.json" ] || die "$index holds no stillweb index"
peer=$cache/peers/search-r1
venv=$cache/peers/search-r1-venv
mkdir -p "$peer" "$out"
out=$(readlink -f "$out")

packages=(torch==2.9.1 transformers==4.57.3 faiss-cpu==1.15.1 datasets==4.4.1 fastapi==0.123.0
  uvicorn==0.38.0 numpy==2.3.5)
if [ "$(cat "$venv/.stamp" 2>/dev/null)" != "${packages[*]}" ]; then
  echo "==> the peer's Python environment (${packages[*]}), once"
  python3 -m venv "$venv" || die "python3 -m venv failed"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "${packages[@]}" \
    || die "pip could not install ${packages[*]}"
  echo "${packages[*]}" > "$venv/.stamp"
fi

# The peer's two files, patched only to run on the CPU.
commit=$(git -C "$checkout" rev-parse HEAD 2> /dev/null || echo unknown)
for f in "$server_py" "$builder_py"; do
  sed -e 's/\.cuda()/.cpu()/g' -e "s/\.to('cuda')/.to('cpu')/g" \
    -e 's/retrieval_use_fp16=True/retrieval_use_fp16=False/' "$f" > "$peer/$(basename "$f")"
done

# The same MiniLM weights (the safetensors models/fetch installs), with the tokenizer's fixed
# 128-token padding and truncation taken out (the peer pads per batch and truncates at 256).
model=$peer/minilm
mkdir -p "$model"
ln -sf "$models/all-minilm-l6-v2/config.json" "$models/all-minilm-l6-v2/model.safetensors" "$model/"
python3 - "$models/all-minilm-l6-v2/tokenizer.json" "$model" <<'PY'
import json, sys
tok = json.load(open(sys.argv[1]))
tok["padding"] = tok["truncation"] = None
json.dump(tok, open(f"{sys.argv[2]}/tokenizer.json", "w"))
json.dump({"tokenizer_class": "BertTokenizerFast", "do_lower_case": True, "model_max_length": 512},
          open(f"{sys.argv[2]}/tokenizer_config.json", "w"))
PY

# SciFact in the peer's corpus format ("contents": the quoted title, a newline, the text), and
# its Flat index, built once by the peer's own builder.
corpus=$peer/scifact-corpus.jsonl
if [ ! -s "$peer/minilm_Flat.index" ]; then
  echo "==> the peer's index of SciFact (its index_builder.py, on the CPU), once"
  python3 - "$scifact/corpus.jsonl" "$corpus" <<'PY'
import json, sys
with open(sys.argv[2], "w") as out:
    for line in open(sys.argv[1]):
        d = json.loads(line)
        out.write(json.dumps({"id": d["_id"], "contents": f'"{d["title"]}"\n{d["text"]}'}) + "\n")
PY
  (cd "$peer" && "$venv/bin/python" index_builder.py --retrieval_method minilm --model_path "$model" \
    --corpus_path "$corpus" --save_dir "$peer" --max_length 256 --batch_size 64 \
    --pooling_method mean --faiss_type Flat) > "$out/peer-index.log" 2>&1 \
    || { tail -20 "$out/peer-index.log" >&2; die "the peer's index_builder.py failed"; }
fi

queries=$(plain_queries "$scifact/queries.jsonl" "$out")
loadtest=target/release/stillweb-loadtest
[ -x "$loadtest" ] && [ -x target/release/stillweb-server ] \
  || die "build first: cargo build --release -p stillweb-server -p stillweb-loadtest"

start_peer() {  # a fresh retrieval_server.py on port 8000 (its fixed port); sets $url and $pid
  if curl -s -o /dev/null "http://127.0.0.1:8000/"; then die "port 8000 is taken; the peer needs it"; fi
  (cd "$peer" && exec "$venv/bin/python" retrieval_server.py --index_path "$peer/minilm_Flat.index" \
    --corpus_path "$corpus" --topk 3 --retriever_name minilm --retriever_model "$model") \
    > "$out/$1.server.log" 2>&1 &
  pid=$!
  url=http://127.0.0.1:8000
  for _ in $(seq 600); do
    grep -q "Uvicorn running" "$out/$1.server.log" && return
    kill -0 "$pid" 2> /dev/null || { tail -20 "$out/$1.server.log" >&2; die "the peer did not start"; }
    sleep 0.5
  done
  die "the peer did not start in 300 s"
}

drive() {  # drive RUN BATCH CLIENTS
  local run=$1 batch=$2 clients=$3
  "$loadtest" --target "$url" --queries "$queries" --out "$out/$run" --server-pid "$pid" \
    --workload retrieve --batch-size "$batch" --k 3 --concurrency "$clients" --warmup 3 \
    --duration "$seconds" --timeout-ms 120000 --seed 1 > /dev/null
  python3 - "$out/$run/report.json" "$run" "$batch" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); s = d["operations"]["retrieve"]; v = d["server"]
batch = int(sys.argv[3])
print(f'{sys.argv[2]:<28} queries/s {s["rate"] * batch:8.1f}  p50 {s["latency_ms"]["p50"]:7.1f} ms  '
      f'p99 {s["latency_ms"]["p99"]:7.1f} ms  errors {s["errors"]}')
PY
}

pid=
trap '[ -n "$pid" ] && kill "$pid" 2> /dev/null' EXIT
echo "==> peer: Search-R1 $commit, torch $("$venv/bin/python" -c 'import torch; print(torch.__version__, "threads", torch.get_num_threads())')"
for round in $(seq "$rounds"); do
  for server in search-r1 stillweb stillweb-alone; do
    flags=(--result-cache-entries 0 --embedding-cache-entries 0 --request-timeout-secs 120)
    case $server in
      search-r1) start_peer "$server-$round" ;;
      stillweb) start_server "$out" "$server-$round" "$index" "${flags[@]}" ;;
      stillweb-alone) start_server "$out" "$server-$round" "$index" "${flags[@]}" --embed-batch-queries 0 ;;
    esac
    for c in 1 8 32; do drive "$server-$round-c$c" 1 "$c"; done
    drive "$server-$round-batch32" 32 1
    kill "$pid"; wait "$pid" 2> /dev/null || true
  done
done

python3 - "$out" "$rounds" "$commit" <<'PY'
import json, statistics, sys
out, rounds, commit = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def run(server, r, setting):
    d = json.load(open(f"{out}/{server}-{r}-{setting}/report.json"))
    s, batch = d["operations"]["retrieve"], 32 if setting == "batch32" else 1
    return s["rate"] * batch, s["latency_ms"]["p99"], s["errors"]
rows = {}
print(f"\nSearch-R1 {commit} vs stillweb, SciFact, medians of {rounds} rounds (each round in brackets)")
print("| setting | Search-R1 q/s | p99 ms | stillweb q/s | p99 ms | ratio | each embedding its own: q/s | p99 ms |")
print("|---|---|---|---|---|---|---|---|")
med = lambda xs, i: statistics.median(x[i] for x in xs)
each = lambda xs, i: ", ".join(f"{x[i]:.1f}" for x in xs)
for setting, label in [("c1", "1 client"), ("c8", "8 clients"), ("c32", "32 clients"),
                       ("batch32", "calls of 32, 1 client")]:
    peer, ours, alone = ([run(server, r, setting) for r in range(1, rounds + 1)]
                         for server in ["search-r1", "stillweb", "stillweb-alone"])
    ratios = [o[0] / p[0] for o, p in zip(ours, peer)]
    rows[setting] = {"search_r1_qps": med(peer, 0), "search_r1_p99_ms": med(peer, 1),
                     "stillweb_qps": med(ours, 0), "stillweb_p99_ms": med(ours, 1),
                     "ratio": statistics.median(ratios), "alone_qps": med(alone, 0),
                     "alone_p99_ms": med(alone, 1), "errors": sum(x[2] for x in peer + ours + alone)}
    print(f"| {label} | {med(peer, 0):.1f} ({each(peer, 0)}) | {med(peer, 1):.0f} | "
          f"{med(ours, 0):.1f} ({each(ours, 0)}) | {med(ours, 1):.0f} | "
          f"{statistics.median(ratios):.1f}× ({', '.join(f'{x:.1f}' for x in ratios)}) | "
          f"{med(alone, 0):.1f} ({each(alone, 0)}) | {med(alone, 1):.0f} |")
json.dump({"search_r1_commit": commit, "rounds": rounds, "settings": rows},
          open(f"{out}/results.json", "w"), indent=2)
PY
