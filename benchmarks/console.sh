#!/usr/bin/env bash
# How long the console takes to show a search in a browser: the release server on INDEX (the
# demo index: scripts/demo builds it), headless Chromium through playwright-core
# (scripts/browser-env), a fresh page per query from /ui/?q=QUERY to its first result on screen.
#
# Usage: benchmarks/console.sh INDEX QUERIES.txt OUT [N=20]
set -euo pipefail
cd "$(dirname "$0")/.."
index=$1 queries=$2 out=$3 n=${4:-20}
mkdir -p "$out"
source benchmarks/serve.sh
playwright=$(scripts/browser-env)
cargo build --release --locked -p stillweb-server
start_server "$out" console "$index"
trap 'kill $pid 2> /dev/null || true' EXIT
node benchmarks/console.mjs "$url" "$playwright" "$queries" "$n" | tee "$out/console.json"
