"""FastMCP's proxy in front of an MCP server, for ``bench/mcp_hop.py --fastmcp-python`` (issue 11's comparison).

    FASTMCP_PYTHON bench/fastmcp_proxy.py UPSTREAM_URL PORT

Run with the Python of a separate virtual environment holding FastMCP 4.1.6 (it brings its own MCP SDK,
which hivegate's would conflict with); nothing of hivegate is imported:

    python3 -m venv .bench-fastmcp && .bench-fastmcp/bin/pip install fastmcp==4.1.6

Serves ``fastmcp.server.server.create_proxy(UPSTREAM_URL)`` over Streamable HTTP at
``http://127.0.0.1:PORT/mcp`` and prints ``fastmcp-proxy listening on http://127.0.0.1:PORT`` first.
"""

from __future__ import annotations

import sys

from fastmcp.server.server import create_proxy  # pyright: ignore[reportMissingImports]


def main() -> None:
    upstream, port = sys.argv[1], int(sys.argv[2])
    proxy = create_proxy(upstream)
    print(f"fastmcp-proxy listening on http://127.0.0.1:{port}", flush=True)
    proxy.run(transport="http", host="127.0.0.1", port=port, show_banner=False, log_level="warning")


if __name__ == "__main__":
    main()
