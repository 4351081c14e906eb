#!/usr/bin/env bash
# Profile hivegate under load: py-spy record on the server (pinned to core 1) during a bounded
# wrk run of the given workloads (default: 2026-07-28 tools/call), via bench/run.py --profile.
#
#   bench/profile.sh [DURATION_S] [WORKLOADS] [EXTRA run.py ARGS...]
#   e.g. bench/profile.sh 15 tools_call,legacy_tools_call
#        OUT=bench/results/before bench/profile.sh 15 tools_call --hivegate-tree /tmp/old-checkout
#
# Writes under $OUT (default bench/results): profile-hivegate-WORKLOAD.svg (flame graph), .stacks.txt
# (collapsed stacks, not committed), .top.txt (bench/profile_top.py summary) and profile-run.json (the
# profiled run's numbers: py-spy pauses the server briefly per sample, so
# a profiled run's numbers are not the benchmark's).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-/tmp/scratch/venv/bin/python}
OUT=${OUT:-bench/results}
DURATION=${1:-15}
WORKLOADS=${2:-tools_call}
shift $(( $# < 2 ? $# : 2 ))
PY_SPY=${PY_SPY:-$(dirname "$PYTHON")/py-spy}
if ! [ -x "$PY_SPY" ]; then
    echo "py-spy not found at $PY_SPY: $(dirname "$PYTHON")/pip install py-spy" >&2
    exit 1
fi
PATH="$(dirname "$PY_SPY"):$PATH"
export PATH
"$PYTHON" bench/run.py --only hivegate --workloads "$WORKLOADS" --duration "$DURATION" \
    --rounds 1 --profile --profile-dir "$OUT" --out "$OUT/profile-run.json" "$@"
for workload in ${WORKLOADS//,/ }; do
    stem=$OUT/profile-hivegate-$workload
    "$PYTHON" bench/profile_top.py "$stem.stacks.txt" > "$stem.top.txt"
    echo "== $stem.top.txt"
    head -40 "$stem.top.txt"
done
