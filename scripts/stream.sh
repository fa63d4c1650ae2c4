#!/usr/bin/env bash
# Runs the streaming pipeline locally: starts the Bigtable, BigQuery and
# Pub/Sub emulators (those not already up), creates the topic and subscription,
# starts the stream on prism, and publishes generated readings in real time.
# Both print progress every 5 s. The stream keeps running after the
# publisher is done; Ctrl-C (or SIGTERM) stops it cleanly, prints its
# ledger, and the script (and make stream) exits 0.
#
# Settings (environment): PROJECT INSTANCE TABLE DATASET TOPIC SUBSCRIPTION RATE
# SENSORS DURATION BAD_FRACTION LATE_FRACTION LATE_BY ALLOWED_LATENESS
# EARLY_FIRING DEAD_LETTER.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${PROJECT:=local-project}" "${INSTANCE:=local-instance}" "${TABLE:=patient_vitals}" "${DATASET:=vitals}"
: "${TOPIC:=vitals}" "${SUBSCRIPTION:=vitals-stream}"
: "${RATE:=200}" "${SENSORS:=50}" "${DURATION:=60s}" "${BAD_FRACTION:=0.01}" "${LATE_FRACTION:=0.01}" "${LATE_BY:=2h}"
: "${ALLOWED_LATENESS:=3h}" "${EARLY_FIRING:=10s}" "${DEAD_LETTER:=.run/deadletter-stream}"

scripts/emulators.sh start bigtable bigquery pubsub >/dev/null
: "${BIGTABLE_EMULATOR_HOST:=127.0.0.1:8086}" "${PUBSUB_EMULATOR_HOST:=127.0.0.1:8085}"
: "${BIGQUERY_EMULATOR_HOST:=127.0.0.1:9050}" "${BIGQUERY_STORAGE_EMULATOR_HOST:=127.0.0.1:9060}"
export BIGTABLE_EMULATOR_HOST PUBSUB_EMULATOR_HOST BIGQUERY_EMULATOR_HOST BIGQUERY_STORAGE_EMULATOR_HOST
echo "emulators: Bigtable $BIGTABLE_EMULATOR_HOST, BigQuery $BIGQUERY_EMULATOR_HOST, Pub/Sub $PUBSUB_EMULATOR_HOST"

topic="projects/$PROJECT/topics/$TOPIC"
sub="projects/$PROJECT/subscriptions/$SUBSCRIPTION"
put() { # path body: create a resource on the emulator; 409 means it exists
  local code
  code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT -H 'Content-Type: application/json' \
    "http://$PUBSUB_EMULATOR_HOST/v1/$1" -d "$2")
  case "$code" in
    200) echo "created $1" ;;
    409) echo "exists  $1" ;;
    *) echo "creating $1 failed: HTTP $code" >&2; exit 1 ;;
  esac
}
put "$topic" '{}'
put "$sub" "{\"topic\":\"$topic\",\"ackDeadlineSeconds\":60}"

mkdir -p .run "$DEAD_LETTER"
echo "building the launcher and the publisher (the first build compiles Beam: 2-3 minutes)..."
go build -o .run/sensorpipe ./launch
go build -o .run/publish ./launch/publish

# Ctrl-C must reach the launcher only: the launcher ends a stream cleanly on
# SIGINT (prints its ledger, exits 0), but make, which runs this script,
# prints "*** Interrupt" and exits 130 whenever it gets SIGINT itself. So on
# a terminal, job control (set -m) runs the launcher as the foreground job
# in a process group of its own: the terminal sends Ctrl-C to that group,
# not to make's. The publisher runs in the background, in a group of its
# own too.
interactive=false
if [ -t 0 ]; then
  set -m
  interactive=true
fi

.run/publish --topic="$topic" --rate="$RATE" --sensors="$SENSORS" --duration="$DURATION" \
  --bad_fraction="$BAD_FRACTION" --late_fraction="$LATE_FRACTION" --late_by="$LATE_BY" &
publisher=$!
stop_publisher() {
  if kill -0 "$publisher" 2>/dev/null; then kill -TERM "$publisher" 2>/dev/null || true; fi
  wait "$publisher" 2>/dev/null || true
}
if ! $interactive; then
  # No terminal (a pipe, a test): a SIGINT or SIGTERM sent to this script
  # is passed to the launcher, which stops cleanly.
  trap 'kill -INT "${pipeline:-}" 2>/dev/null || true' INT
  trap 'kill -TERM "${pipeline:-}" 2>/dev/null || true' TERM
fi

launch() {
  .run/sensorpipe --source=pubsub --subscription="$sub" --timestamp_attribute=event_ts --id_attribute=record_id \
    --allowed_lateness="$ALLOWED_LATENESS" --early_firing="$EARLY_FIRING" \
    --bigtable_project="$PROJECT" --bigtable_instance="$INSTANCE" --bigtable_table="$TABLE" \
    --bigquery_project="$PROJECT" --bigquery_dataset="$DATASET" --bigquery_table=readings \
    --dead_letter="$DEAD_LETTER"
}
set +e
if $interactive; then
  launch # the foreground job, in a process group of its own, until it stops
  code=$?
else
  launch &
  pipeline=$!
  while :; do
    wait "$pipeline"
    code=$?
    kill -0 "$pipeline" 2>/dev/null || break # wait returned for a trapped signal
  done
fi
stop_publisher
exit "$code"
