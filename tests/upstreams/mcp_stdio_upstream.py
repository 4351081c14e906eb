"""A stdio MCP server for tests of the ``mcp`` backend's stdio upstreams (an official-SDK ``MCPServer``).

``python tests/upstreams/mcp_stdio_upstream.py`` speaks MCP on stdin/stdout. Tools:

- ``whoami``: the server process's pid, and the ``UPSTREAM_GREETING`` environment variable (so a test
  can tell which process answered, and what environment it was given);
- ``add(a, b)``: the sum;
- ``crash``: the process exits at once (status 3), without answering;
- ``leak_env``: whether the gateway's own settings (``HIVEGATE_*``) reached the process.
"""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("stdio-upstream")


@server.tool(description="The server process's pid and greeting.")
def whoami() -> str:
    return f"pid={os.getpid()} greeting={os.environ.get('UPSTREAM_GREETING', '')}"


@server.tool(description="The sum of a and b.")
def add(a: int, b: int) -> int:
    return a + b


@server.tool(description="Exit at once, without answering.")
def crash() -> str:
    os._exit(3)


@server.tool(description="The names of HIVEGATE_* variables this process was given.")
def leak_env() -> str:
    return ",".join(sorted(name for name in os.environ if name.startswith("HIVEGATE_"))) or "none"


if __name__ == "__main__":
    server.run("stdio")
