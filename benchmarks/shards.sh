#!/usr/bin/env bash
# One index against the same corpus as N shards behind a coordinator, on this machine:
# 1. build: the single index, then the N shards one after another as independent jobs
#    (`build-scale --shards N --shard I`, one process each) and `stillweb-indexer finalize`;
# 2. serve each (caches off) and load it with stillweb-loadtest: a closed loop of 8 clients
#    (searches/s), then an open loop at 70% of that rate (p50/p99);
# 3. resident memory of every process (VmRSS, and its private part RssAnon), and the time per
#    stage the coordinator and the single server report (Server-Timing).
# Each run's report lands in $out/<run>/; a summary in $out/results.json.
#
# Usage: benchmarks/shards.sh SYNTH_DIR OUT [SHARDS=4] [SECONDS=30]
#   SYNTH_DIR from `stillweb-bench synth` (corpus.toml, queries.txt)
set -euo pipefail
cd "$(dirname "$0")/.."
synth=$1 out=$2 shards=${3:-4} seconds=${4:-30}
source benchmarks/serve.sh
bin=target/release
mkdir -p "$out"
caches=(--result-cache-entries 0 --embedding-cache-entries 0)
now() { date +%s.%N; }

# 1. Builds.
if [ ! -f "$out/single/manifest.json" ]; then
  t0=$(now)
  "$bin/stillweb-bench" build-scale --manifest "$synth/corpus.toml" --out "$out/single" --force \
    > "$out/build-single.json"
  echo "{\"seconds\": $(python3 -c "print($(now) - $t0)")}" > "$out/build-single.time.json"
fi
if [ ! -f "$out/set/shard-$((shards - 1))/bm25_stats.json" ]; then
  rm -rf "$out/set"
  : > "$out/build-shards.times"
  for i in $(seq 0 $((shards - 1))); do
    t0=$(now)
    "$bin/stillweb-bench" build-scale --manifest "$synth/corpus.toml" --out "$out/set" \
      --shards "$shards" --shard "$i" > "$out/build-shard-$i.json"
    python3 -c "print($(now) - $t0)" >> "$out/build-shards.times"
  done
  t0=$(now)
  "$bin/stillweb-indexer" finalize --out "$out/set" > "$out/finalize.json"
  python3 -c "print($(now) - $t0)" > "$out/finalize.time"
fi

load() {  # load RUN URL PIDS ARGS...
  local run=$1 target=$2 pids=$3; shift 3
  "$bin/stillweb-loadtest" --target "$target" --queries "$synth/queries.txt" --out "$out/$run" \
    --server-pid "${pids%%,*}" "$@" > /dev/null
}
rate_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["operations"]["search"]["rate"])' "$1"; }
memory() {  # memory NAME PIDS: VmRSS and RssAnon (KiB) of each pid
  for p in ${2//,/ }; do
    awk -v name="$1" -v pid="$p" '/^VmRSS|^RssAnon/ {v[$1]=$2} END {printf "%s %s %s %s\n", name, pid, v["VmRSS:"], v["RssAnon:"]}' "/proc/$p/status"
  done >> "$out/memory.txt"
}
drive() {  # drive NAME URL PIDS
  load "$1-warmup" "$2" "$3" --workload search --concurrency 8 --duration 10 --seed 99
  load "$1-closed-8" "$2" "$3" --workload search --concurrency 8 --duration "$seconds" --seed 1
  local r70
  r70=$(python3 -c "print(round(0.7 * $(rate_of "$out/$1-closed-8/report.json"), 1))")
  load "$1-open-70pct" "$2" "$3" --workload search --rate "$r70" --duration "$seconds" --seed 2
  memory "$1" "$3"
}
: > "$out/memory.txt"

# 2. The single index.
start_server "$out" single "$out/single" "${caches[@]}"
single_pid=$pid
drive single "$url" "$single_pid"
kill "$single_pid"; wait "$single_pid" 2> /dev/null || true

# 3. The shards (one process each, no models: the coordinator embeds) and a coordinator.
shard_flags=() shard_pids=()
for i in $(seq 0 $((shards - 1))); do
  start_server "$out" "shard-$i" "$out/set/shard-$i" --mode bm25 "${caches[@]}"
  shard_flags+=(--shard "$url") shard_pids+=("$pid")
done
start_with "$out" coordinator "${shard_flags[@]}" "${caches[@]}"
coordinator_pid=$pid
all_pids=$(IFS=,; echo "$coordinator_pid,${shard_pids[*]}")
drive sharded "$url" "$all_pids"
kill "$coordinator_pid" "${shard_pids[@]}"; wait 2> /dev/null || true

python3 - "$out" "$shards" <<'PY'
import json, pathlib, sys
out, shards = pathlib.Path(sys.argv[1]), int(sys.argv[2])
def report(run):
    return json.loads((out / run / "report.json").read_text())
summary = {"shards": shards}
for name in ["single", "sharded"]:
    closed, open_ = report(f"{name}-closed-8"), report(f"{name}-open-70pct")
    summary[name] = {
        "searches_per_s": closed["operations"]["search"]["rate"],
        "open_loop_rate": open_["operations"]["search"]["rate"],
        "open_loop_p50_ms": open_["latency_ms"]["p50"],
        "open_loop_p99_ms": open_["latency_ms"]["p99"],
        "errors": closed["errors"] + open_["errors"],
        "server_stage_p50_ms": {k: v.get("p50") for k, v in open_.get("server_stages_ms", {}).items()},
    }
memory = {}
for line in (out / "memory.txt").read_text().splitlines():
    name, pid, rss, anon = line.split()
    memory.setdefault(name, []).append({"pid": int(pid), "rss_mib": int(rss) / 1024, "private_mib": int(anon) / 1024})
summary["memory"] = memory
for name in ["single", "sharded"]:
    summary[name]["rss_total_mib"] = sum(m["rss_mib"] for m in memory[name])
    summary[name]["private_total_mib"] = sum(m["private_mib"] for m in memory[name])
single_time = json.loads((out / "build-single.time.json").read_text())["seconds"] if (out / "build-single.time.json").exists() else None
shard_times = [float(x) for x in (out / "build-shards.times").read_text().split()] if (out / "build-shards.times").exists() else []
summary["build_seconds"] = {"single": single_time, "shards": shard_times, "shards_total": sum(shard_times),
                            "finalize": float((out / "finalize.time").read_text()) if (out / "finalize.time").exists() else None}
(out / "results.json").write_text(json.dumps(summary, indent=2))
print(json.dumps(summary, indent=2))
PY
