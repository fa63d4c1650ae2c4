#!/bin/sh
# Flex Template entry point: the Go template launcher runs this with the
# job's flags. Beam Go cross-compiles a worker binary unless --worker_binary
# names one, and the template image has no Go toolchain; the launcher binary
# is built for linux/amd64, so it is its own worker binary.
dir=$(dirname "$0")
exec "$dir/sensorpipe" --worker_binary="$dir/sensorpipe" "$@"
