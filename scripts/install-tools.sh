#!/usr/bin/env bash
# Install the project-local tools needed to run the official MCP conformance suite.
#
# Everything goes into the git-ignored .tools/ folder at the repository root:
#   .tools/node22       Node 22 (the binary shipped inside the npm package node@22; the CLI needs Node >= 22)
#   .tools/conformance  @modelcontextprotocol/conformance@0.2.0-alpha.12 (the only line with 2026-07-28 scenarios)
#
# Idempotent: a component that is already installed at the pinned version is skipped.
# Uses the system npm only. Prints the paths of the installed tools on stdout (KEY=path lines).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="$ROOT/.tools"
NODE_MAJOR="22"
CONFORMANCE_VERSION="0.2.0-alpha.12"

NODE_DIR="$TOOLS/node22"
NODE_BIN="$NODE_DIR/node_modules/node/bin/node"
CONF_DIR="$TOOLS/conformance"
CONF_PKG_DIR="$CONF_DIR/node_modules/@modelcontextprotocol/conformance"
CONF_CLI="$CONF_PKG_DIR/dist/index.js"

log() { echo "install-tools: $*" >&2; }

command -v npm >/dev/null 2>&1 || { log "npm not found on PATH (install nodejs/npm first)"; exit 1; }

# Version of an installed npm package, read from its package.json with the system node (empty if absent).
pkg_version() {
    local pkg_json="$1/package.json"
    [[ -f "$pkg_json" ]] || return 0
    node -e 'process.stdout.write(String(require(process.argv[1]).version || ""))' "$pkg_json" 2>/dev/null || true
}

# npm install into a dedicated prefix folder with its own package.json.
npm_install_into() {
    local dir="$1"
    shift
    mkdir -p "$dir"
    [[ -f "$dir/package.json" ]] || (cd "$dir" && npm init -y >/dev/null)
    (cd "$dir" && npm install --no-audit --no-fund --loglevel=error "$@" >&2)
}

# --- Node 22 -------------------------------------------------------------------------------------------------
node_ok() {
    [[ -x "$NODE_BIN" ]] || return 1
    local v
    v="$("$NODE_BIN" --version 2>/dev/null || true)"
    [[ "$v" == "v$NODE_MAJOR."* ]]
}

if node_ok; then
    log "node $("$NODE_BIN" --version) already installed"
else
    log "installing node@$NODE_MAJOR into $NODE_DIR"
    npm_install_into "$NODE_DIR" "node@$NODE_MAJOR"
    node_ok || { log "node@$NODE_MAJOR install did not produce a working $NODE_BIN"; exit 1; }
fi

# --- conformance suite ---------------------------------------------------------------------------------------
if [[ "$(pkg_version "$CONF_PKG_DIR")" == "$CONFORMANCE_VERSION" && -f "$CONF_CLI" ]]; then
    log "@modelcontextprotocol/conformance@$CONFORMANCE_VERSION already installed"
else
    log "installing @modelcontextprotocol/conformance@$CONFORMANCE_VERSION into $CONF_DIR"
    npm_install_into "$CONF_DIR" "@modelcontextprotocol/conformance@$CONFORMANCE_VERSION" --save-exact
    [[ "$(pkg_version "$CONF_PKG_DIR")" == "$CONFORMANCE_VERSION" ]] || {
        log "conformance install did not produce version $CONFORMANCE_VERSION"
        exit 1
    }
fi

echo "NODE22=$NODE_BIN"
echo "NODE22_VERSION=$("$NODE_BIN" --version)"
echo "CONFORMANCE_CLI=$CONF_CLI"
echo "CONFORMANCE_VERSION=$CONFORMANCE_VERSION"
