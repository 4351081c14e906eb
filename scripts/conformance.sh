#!/usr/bin/env bash
# Run the official MCP conformance suite against a running server, on both wires.
#
#   scripts/conformance.sh URL OUTDIR
#
# Runs `--suite all` for --spec-version 2026-07-28 and 2025-11-25 against URL (e.g.
# http://127.0.0.1:3001/mcp), writing the results under OUTDIR/<spec-version>/, then summarises every
# checks.json with scripts/conformance_report.py, which fails on any FAILURE in a scenario that is
# not allow-listed in scripts/conformance-expected-failures.txt. Needs scripts/install-tools.sh first.
#
# Environment: CONFORMANCE_TIMEOUT_MS (per scenario, default 30000), PYTHON (default python3),
#              CONFORMANCE_SPEC_VERSIONS (default "2026-07-28 2025-11-25").
set -uo pipefail

if [[ $# -ne 2 ]]; then
    echo "usage: $0 URL OUTDIR" >&2
    exit 2
fi
URL="$1"
OUTDIR="$2"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NODE22="$ROOT/.tools/node22/node_modules/node/bin/node"
CLI="$ROOT/.tools/conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js"
PYTHON="${PYTHON:-python3}"
TIMEOUT_MS="${CONFORMANCE_TIMEOUT_MS:-30000}"
SPEC_VERSIONS="${CONFORMANCE_SPEC_VERSIONS:-2026-07-28 2025-11-25}"

if [[ ! -x "$NODE22" || ! -f "$CLI" ]]; then
    echo "conformance.sh: tools missing; run scripts/install-tools.sh first" >&2
    exit 2
fi

mkdir -p "$OUTDIR"
for version in $SPEC_VERSIONS; do
    dest="$OUTDIR/$version"
    rm -rf "$dest"
    mkdir -p "$dest"
    echo "== conformance --suite all --spec-version $version -> $dest" >&2
    # The CLI exits 1 when any check fails; the report below decides what counts.
    "$NODE22" "$CLI" server --url "$URL" --suite all --spec-version "$version" \
        --timeout "$TIMEOUT_MS" -o "$dest" >"$dest/run.log" 2>&1
    echo "   conformance CLI exit code: $? (log: $dest/run.log)" >&2
done

exec "$PYTHON" "$ROOT/scripts/conformance_report.py" "$OUTDIR"
