#!/usr/bin/env bash
# Run a command and report its peak resident memory, split the way the kernel accounts it:
# RssAnon (private memory: what the process needs) and RssFile (pages of memory-mapped files:
# shared with the page cache and dropped under pressure), sampled every 0.2 s, plus the kernel's
# own VmHWM at the end. Usage: benchmarks/peak-rss.sh COMMAND [ARGS...]; the report goes to stderr
# as one line: `peak VmRSS=… MiB RssAnon=… MiB RssFile=… MiB VmHWM=… MiB wall=… s rc=…`.
# With PEAK_RSS_TRACE=FILE, every sample too (seconds, VmRSS, RssAnon, RssFile in MiB), to line up
# with the command's log and see which phase holds the peak.
set -u
trace=${PEAK_RSS_TRACE:-/dev/null}
: > "$trace"
"$@" &
pid=$!
start=$(date +%s.%N)
max_rss=0 max_anon=0 max_file=0 hwm=0
while kill -0 "$pid" 2>/dev/null; do
  if read -r rss anon file h < <(awk '/^VmRSS:/ {r=$2} /^RssAnon:/ {a=$2} /^RssFile:/ {f=$2} /^VmHWM:/ {h=$2}
      END {print r+0, a+0, f+0, h+0}' "/proc/$pid/status" 2>/dev/null); then
    (( rss > max_rss )) && max_rss=$rss
    (( anon > max_anon )) && max_anon=$anon
    (( file > max_file )) && max_file=$file
    (( h > hwm )) && hwm=$h
    printf '%.1f\t%d\t%d\t%d\n' "$(echo "$(date +%s.%N) - $start" | bc)" $((rss / 1024)) \
      $((anon / 1024)) $((file / 1024)) >> "$trace"
  fi
  sleep 0.2
done
wait "$pid"
rc=$?
wall=$(echo "$(date +%s.%N) - $start" | bc)
printf 'peak VmRSS=%d MiB RssAnon=%d MiB RssFile=%d MiB VmHWM=%d MiB wall=%.0f s rc=%d\n' \
  $((max_rss / 1024)) $((max_anon / 1024)) $((max_file / 1024)) $((hwm / 1024)) "$wall" "$rc" >&2
exit "$rc"
