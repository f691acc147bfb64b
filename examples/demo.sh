#!/usr/bin/env bash
# Two processes joined through a cudaipc channel: a producer publishes patterned frames, a
# consumer verifies every byte and reports throughput and latency.
#   examples/demo.sh [BUILD_DIR] [FRAMES] [BYTES]
set -euo pipefail
build=${1:-build}
frames=${2:-20000}
bytes=${3:-65536}
dir=$(mktemp -d)
producer=
# A consumer that fails ends the script (set -e): the producer, waiting for it, goes too.
trap '[ -z "$producer" ] || kill "$producer" 2>/dev/null || true; rm -rf "$dir"' EXIT
"$build/examples/cudaipc-demo-producer" "$dir/demo.sock" "$frames" "$bytes" &
producer=$!
for _ in $(seq 100); do [ -S "$dir/demo.sock" ] && break; sleep 0.05; done
"$build/examples/cudaipc-demo-consumer" "$dir/demo.sock"
# The producer's status counts too (set -e).
wait "$producer"
producer=
