#!/usr/bin/env bash
# Starts and stops the local emulators sensorpipe runs against:
#   Bigtable  (the gcloud SDK's cbtemulator)      at $BIGTABLE_EMULATOR_HOST         (default 127.0.0.1:8086)
#   BigQuery  (our own, go run ./launch/bqemulator) at $BIGQUERY_EMULATOR_HOST        (default 127.0.0.1:9050)
#                                                  and $BIGQUERY_STORAGE_EMULATOR_HOST (default 127.0.0.1:9060)
#   Pub/Sub   (the gcloud SDK's emulator, Java)   at $PUBSUB_EMULATOR_HOST           (default 127.0.0.1:8085)
# An emulator already answering on its address is left alone. Those this
# script starts are recorded in .run/*.pid and stopped by that process id.
#
# usage: scripts/emulators.sh start [bigtable bigquery pubsub] | stop | status
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=.run
mkdir -p "$RUN"
: "${BIGTABLE_EMULATOR_HOST:=127.0.0.1:8086}"
: "${BIGQUERY_EMULATOR_HOST:=127.0.0.1:9050}"
: "${BIGQUERY_STORAGE_EMULATOR_HOST:=127.0.0.1:9060}"
: "${PUBSUB_EMULATOR_HOST:=127.0.0.1:8085}"

sdk_root() { gcloud info --format='value(installation.sdk_root)' 2>/dev/null || echo /usr/lib/google-cloud-sdk; }

listening() { # host:port
  (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null
}

wait_for() { # name host:port pid seconds
  local name=$1 addr=$2 pid=$3 secs=$4 i
  for ((i = 0; i < secs * 10; i++)); do
    if listening "$addr"; then echo "$name emulator up at $addr (pid $pid)"; return 0; fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "$name emulator exited; see $RUN/$name.log:" >&2; tail -20 "$RUN/$name.log" >&2; return 1
    fi
    sleep 0.1
  done
  echo "$name emulator did not answer at $addr within ${secs}s; see $RUN/$name.log" >&2
  return 1
}

start_bigtable() {
  if listening "$BIGTABLE_EMULATOR_HOST"; then echo "Bigtable emulator already up at $BIGTABLE_EMULATOR_HOST"; return; fi
  local bin; bin="$(sdk_root)/platform/bigtable-emulator/cbtemulator"
  [ -x "$bin" ] || { echo "cbtemulator not found at $bin: install the gcloud SDK's Bigtable emulator (package google-cloud-cli-bigtable-emulator)" >&2; exit 1; }
  # setsid: its own process group, so a Ctrl-C meant for a job (make stream) leaves it up.
  setsid "$bin" -host "${BIGTABLE_EMULATOR_HOST%:*}" -port "${BIGTABLE_EMULATOR_HOST##*:}" >"$RUN/bigtable.log" 2>&1 &
  echo $! >"$RUN/bigtable.pid"
  wait_for bigtable "$BIGTABLE_EMULATOR_HOST" "$!" 30
}

start_bigquery() {
  if listening "$BIGQUERY_EMULATOR_HOST"; then echo "BigQuery emulator already up at $BIGQUERY_EMULATOR_HOST"; return; fi
  go build -o "$RUN/bqemulator" ./launch/bqemulator
  # setsid, like the others: a Ctrl-C meant for make stream leaves it (and
  # the rows it holds in memory) up.
  setsid "$RUN/bqemulator" --rest_addr="$BIGQUERY_EMULATOR_HOST" --grpc_addr="$BIGQUERY_STORAGE_EMULATOR_HOST" >"$RUN/bigquery.log" 2>&1 &
  echo $! >"$RUN/bigquery.pid"
  wait_for bigquery "$BIGQUERY_EMULATOR_HOST" "$!" 30
}

start_pubsub() {
  if listening "$PUBSUB_EMULATOR_HOST"; then echo "Pub/Sub emulator already up at $PUBSUB_EMULATOR_HOST"; return; fi
  local bin; bin="$(sdk_root)/platform/pubsub-emulator/bin/cloud-pubsub-emulator"
  [ -x "$bin" ] || { echo "Pub/Sub emulator not found at $bin: install google-cloud-cli-pubsub-emulator and Java 17" >&2; exit 1; }
  # setsid: the emulator is a shell script that starts a JVM; its own
  # process group lets stop end both.
  setsid "$bin" --host="${PUBSUB_EMULATOR_HOST%:*}" --port="${PUBSUB_EMULATOR_HOST##*:}" >"$RUN/pubsub.log" 2>&1 &
  echo $! >"$RUN/pubsub.pid"
  wait_for pubsub "$PUBSUB_EMULATOR_HOST" "$!" 60
}

stop_one() {
  local name=$1 f="$RUN/$1.pid"
  [ -f "$f" ] || return 0
  local pid; pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    # The Pub/Sub emulator leads its own process group (setsid): end it all.
    if [ "$name" = pubsub ]; then kill -- "-$pid" 2>/dev/null || kill "$pid"; else kill "$pid"; fi
    echo "stopped $name emulator (pid $pid)"
  fi
  rm -f "$f"
}

case "${1:-}" in
  start)
    shift
    [ $# -gt 0 ] || set -- bigtable bigquery pubsub
    for e in "$@"; do "start_$e"; done
    cat <<EOT
export BIGTABLE_EMULATOR_HOST=$BIGTABLE_EMULATOR_HOST
export BIGQUERY_EMULATOR_HOST=$BIGQUERY_EMULATOR_HOST
export BIGQUERY_STORAGE_EMULATOR_HOST=$BIGQUERY_STORAGE_EMULATOR_HOST
export PUBSUB_EMULATOR_HOST=$PUBSUB_EMULATOR_HOST
EOT
    ;;
  stop) for e in bigtable bigquery pubsub; do stop_one "$e"; done ;;
  status)
    for v in BIGTABLE_EMULATOR_HOST BIGQUERY_EMULATOR_HOST PUBSUB_EMULATOR_HOST; do
      if listening "${!v}"; then echo "$v=${!v} up"; else echo "$v=${!v} down"; fi
    done ;;
  *) echo "usage: $0 start [bigtable bigquery pubsub] | stop | status" >&2; exit 2 ;;
esac
