#!/usr/bin/env bash
# Install the tools the test suite needs beyond the Python venv.
#
# Debian's Chromium at /usr/bin/chromium, for the browser tests (tests/browser.py). Installed with
# apt-get when we are root and apt-get exists; otherwise this prints how to install it and goes on
# (the browser tests then fail saying so, or skip with HIVEGATE_TEST_SKIP_BROWSER=1).
#
# The official MCP conformance suite, into the git-ignored .tools/ folder at the repository root:
#   .tools/node22       Node 22 (the binary shipped inside the npm package node@22; the CLI needs Node >= 22)
#   .tools/conformance  @modelcontextprotocol/conformance@0.2.0-alpha.12 (the only line with 2026-07-28 scenarios)
#   .tools/mcp-remote   mcp-remote@0.15.1 (the stdio bridge Claude Desktop uses; tests/e2e/test_mcp_remote.py)
#   .tools/a2a-js       @a2a-js/sdk@1.3.0 (the A2A JavaScript SDK's client; tests/e2e/test_a2a_js.py)
#   .tools/server-everything  @modelcontextprotocol/server-everything@2026.8.31 (the reference MCP test
#                       server, run over stdio behind an `mcp` agent; tests/e2e/test_mcp_everything.py)
#
# Idempotent: a component that is already installed (at the pinned version) is skipped.
# Uses the system apt-get and npm only. Prints the paths of the installed tools on stdout (KEY=path lines).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="$ROOT/.tools"
NODE_MAJOR="22"
CONFORMANCE_VERSION="0.2.0-alpha.12"
MCP_REMOTE_VERSION="0.15.1"
A2A_JS_VERSION="1.3.0"
EVERYTHING_VERSION="2026.8.31"

NODE_DIR="$TOOLS/node22"
NODE_BIN="$NODE_DIR/node_modules/node/bin/node"
CONF_DIR="$TOOLS/conformance"
CONF_PKG_DIR="$CONF_DIR/node_modules/@modelcontextprotocol/conformance"
CONF_CLI="$CONF_PKG_DIR/dist/index.js"
MCP_REMOTE_DIR="$TOOLS/mcp-remote"
MCP_REMOTE_PKG_DIR="$MCP_REMOTE_DIR/node_modules/mcp-remote"
MCP_REMOTE_CLI="$MCP_REMOTE_PKG_DIR/dist/proxy.js"
A2A_JS_DIR="$TOOLS/a2a-js"
A2A_JS_PKG_DIR="$A2A_JS_DIR/node_modules/@a2a-js/sdk"
A2A_JS_CLIENT="$A2A_JS_PKG_DIR/dist/client/index.js"
EVERYTHING_DIR="$TOOLS/server-everything"
EVERYTHING_PKG_DIR="$EVERYTHING_DIR/node_modules/@modelcontextprotocol/server-everything"
EVERYTHING_CLI="$EVERYTHING_PKG_DIR/dist/index.js"

log() { echo "install-tools: $*" >&2; }

# --- Chromium (Debian's package) -----------------------------------------------------------------------------
CHROMIUM_BIN="/usr/bin/chromium"

apt_install_chromium() {
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >&2
}

if [[ -x "$CHROMIUM_BIN" ]]; then
    log "chromium already installed ($CHROMIUM_BIN)"
elif [[ "$(id -u)" == "0" ]] && command -v apt-get >/dev/null 2>&1; then
    log "installing Debian's chromium with apt-get"
    if ! apt_install_chromium; then
        log "apt-get install failed; running apt-get update and trying again"
        if ! { DEBIAN_FRONTEND=noninteractive apt-get update >&2 && apt_install_chromium; }; then
            log "WARNING: could not install chromium; the browser tests fail until $CHROMIUM_BIN exists"
        fi
    fi
else
    log "WARNING: $CHROMIUM_BIN is missing and this is not root with apt-get, so it is not installed here."
    log "  Install it as root:  apt-get update && apt-get install -y --no-install-recommends chromium"
    log "  (or set HIVEGATE_TEST_SKIP_BROWSER=1 to skip the browser tests)"
fi

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

# --- mcp-remote ----------------------------------------------------------------------------------------------
if [[ "$(pkg_version "$MCP_REMOTE_PKG_DIR")" == "$MCP_REMOTE_VERSION" && -f "$MCP_REMOTE_CLI" ]]; then
    log "mcp-remote@$MCP_REMOTE_VERSION already installed"
else
    log "installing mcp-remote@$MCP_REMOTE_VERSION into $MCP_REMOTE_DIR"
    npm_install_into "$MCP_REMOTE_DIR" "mcp-remote@$MCP_REMOTE_VERSION" --save-exact
    [[ "$(pkg_version "$MCP_REMOTE_PKG_DIR")" == "$MCP_REMOTE_VERSION" && -f "$MCP_REMOTE_CLI" ]] || {
        log "mcp-remote install did not produce version $MCP_REMOTE_VERSION at $MCP_REMOTE_CLI"
        exit 1
    }
fi

# --- @a2a-js/sdk ---------------------------------------------------------------------------------------------
# Its optional peer dependencies (express, grpc, database drivers) are for the server side and are not installed.
if [[ "$(pkg_version "$A2A_JS_PKG_DIR")" == "$A2A_JS_VERSION" && -f "$A2A_JS_CLIENT" ]]; then
    log "@a2a-js/sdk@$A2A_JS_VERSION already installed"
else
    log "installing @a2a-js/sdk@$A2A_JS_VERSION into $A2A_JS_DIR"
    npm_install_into "$A2A_JS_DIR" "@a2a-js/sdk@$A2A_JS_VERSION" --save-exact
    [[ "$(pkg_version "$A2A_JS_PKG_DIR")" == "$A2A_JS_VERSION" && -f "$A2A_JS_CLIENT" ]] || {
        log "@a2a-js/sdk install did not produce version $A2A_JS_VERSION at $A2A_JS_CLIENT"
        exit 1
    }
fi

# --- @modelcontextprotocol/server-everything ------------------------------------------------------------------
if [[ "$(pkg_version "$EVERYTHING_PKG_DIR")" == "$EVERYTHING_VERSION" && -f "$EVERYTHING_CLI" ]]; then
    log "@modelcontextprotocol/server-everything@$EVERYTHING_VERSION already installed"
else
    log "installing @modelcontextprotocol/server-everything@$EVERYTHING_VERSION into $EVERYTHING_DIR"
    npm_install_into "$EVERYTHING_DIR" "@modelcontextprotocol/server-everything@$EVERYTHING_VERSION" --save-exact
    [[ "$(pkg_version "$EVERYTHING_PKG_DIR")" == "$EVERYTHING_VERSION" && -f "$EVERYTHING_CLI" ]] || {
        log "server-everything install did not produce version $EVERYTHING_VERSION at $EVERYTHING_CLI"
        exit 1
    }
fi

if [[ -x "$CHROMIUM_BIN" ]]; then echo "CHROMIUM=$CHROMIUM_BIN"; fi
echo "NODE22=$NODE_BIN"
echo "NODE22_VERSION=$("$NODE_BIN" --version)"
echo "CONFORMANCE_CLI=$CONF_CLI"
echo "CONFORMANCE_VERSION=$CONFORMANCE_VERSION"
echo "MCP_REMOTE_CLI=$MCP_REMOTE_CLI"
echo "MCP_REMOTE_VERSION=$MCP_REMOTE_VERSION"
echo "A2A_JS_DIR=$A2A_JS_DIR"
echo "A2A_JS_VERSION=$A2A_JS_VERSION"
echo "EVERYTHING_CLI=$EVERYTHING_CLI"
echo "EVERYTHING_VERSION=$EVERYTHING_VERSION"
