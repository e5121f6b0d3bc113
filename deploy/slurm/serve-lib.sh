# Shared by the serving jobs: run a server in the foreground, publish where it listens in the
# rendezvous directory, and stop it cleanly when Slurm cancels the job.
#
# serve_and_publish NAME COMMAND...: runs COMMAND (whose first stdout line ends with the URL it
# listens on, as stillweb-server prints it), writes http://$advertise:PORT to
# $STILLWEB_RENDEZVOUS/NAME.url once it listens and its pid to NAME.pid, and waits for it;
# SIGTERM (scancel) is passed on, so the server drains its requests and exits.
set -euo pipefail
: "${STILLWEB_RENDEZVOUS:?}"
bin=${STILLWEB_BIN:+$STILLWEB_BIN/}
listen_host=${STILLWEB_LISTEN_HOST:-0.0.0.0}
advertise=${STILLWEB_ADVERTISE:-$(hostname)}
mkdir -p "$STILLWEB_RENDEZVOUS"

serve_and_publish() {
  local name=$1
  shift
  local out=$STILLWEB_RENDEZVOUS/$name.out
  "$@" > "$out" &
  local pid=$!
  trap 'kill -TERM $pid 2> /dev/null; wait $pid' TERM INT
  echo "$pid" > "$STILLWEB_RENDEZVOUS/$name.pid"
  local url=
  until url=$(grep -o 'http://[^ ]*' "$out" 2> /dev/null | head -n 1) && [ -n "$url" ]; do
    kill -0 "$pid" 2> /dev/null || { echo "$name exited before it listened" >&2; wait "$pid"; exit 1; }
    sleep 0.2
  done
  echo "http://$advertise:${url##*:}" > "$STILLWEB_RENDEZVOUS/$name.url.tmp"
  mv "$STILLWEB_RENDEZVOUS/$name.url.tmp" "$STILLWEB_RENDEZVOUS/$name.url"
  echo "$name serves on $(cat "$STILLWEB_RENDEZVOUS/$name.url")" >&2
  wait "$pid"
}

# wait_for NAME: the URL NAME published, once it has (polling the shared directory).
wait_for() {
  until [ -s "$STILLWEB_RENDEZVOUS/$1.url" ]; do sleep 0.5; done
  cat "$STILLWEB_RENDEZVOUS/$1.url"
}
