# Sourced by the benchmark scripts that drive a server: where the models and ONNX Runtime are,
# and start_server. Run from the repository root.
cache=${XDG_CACHE_HOME:-$HOME/.cache}/stillweb
models=${STILLWEB_MODELS:-$cache/models}
export ORT_DYLIB_PATH=${ORT_DYLIB_PATH:-$models/onnxruntime/libonnxruntime.so}

# start_server DIR NAME INDEX [FLAGS...]: the server ($SERVER_BIN, by default
# target/release/stillweb-server) on a free loopback port, its stdout and log in
# DIR/NAME.server.{out,log}; sets $url and $pid, or exits with the log.
start_server() {
  local dir=$1 name=$2 index=$3
  shift 3
  start_with "$dir" "$name" --index "$index" "$@"
}

# start_with DIR NAME FLAGS...: the same with exactly FLAGS (a coordinator: --shard URL...).
start_with() {
  local dir=$1 name=$2
  shift 2
  "${SERVER_BIN:-target/release/stillweb-server}" --listen 127.0.0.1:0 "$@" \
    > "$dir/$name.server.out" 2> "$dir/$name.server.log" &
  pid=$!
  for _ in $(seq 600); do
    url=$(sed -n 's/^stillweb-server listening on //p' "$dir/$name.server.out")
    [ -n "$url" ] && return
    kill -0 "$pid" 2> /dev/null || { cat "$dir/$name.server.log" >&2; exit 1; }
    sleep 0.5
  done
  echo "server did not start" >&2
  exit 1
}

# resident_mib PID: prints the process's VmRSS, RssFile (mapped files: the index, shared with the
# page cache) and RssAnon (private), in MiB, on one line.
resident_mib() {
  awk '/^VmRSS|^RssFile|^RssAnon/ {v[$1] = $2}
    END {printf "%.0f %.0f %.0f\n", v["VmRSS:"] / 1024, v["RssFile:"] / 1024, v["RssAnon:"] / 1024}' \
    "/proc/$1/status"
}

# plain_queries QUERIES DIR: prints a file of one query per line: QUERIES itself, or for a BEIR
# queries.jsonl, DIR/queries.txt written from its "text" fields.
plain_queries() {
  local queries=$1 dir=$2
  if [[ $queries == *.jsonl ]]; then
    python3 -c 'import json,sys
for line in open(sys.argv[1]):
    text = json.loads(line)["text"].replace("\n", " ").strip()
    if text and not text.startswith("#"): print(text)' "$queries" > "$dir/queries.txt"
    echo "$dir/queries.txt"
  else
    echo "$queries"
  fi
}
