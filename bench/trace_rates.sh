#!/usr/bin/env bash
# The trace output side's rates on synthetic events (issue 11): raw write/read, conversion to
# Perfetto, text and JSON Lines, and collection over loopback. Usage:
#   bench/trace_rates.sh [EVENTS] [RUNS]      (default 2000000 events, 3 runs; medians)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p kerf-tools --example trace_rates
exec target/release/examples/trace_rates "${1:-2000000}" "${2:-3}"
