"""An MCP server for tests of the ``mcp`` backend's upstreams (an official-SDK ``MCPServer``).

``python tests/upstreams/mcp_stdio_upstream.py`` speaks MCP on stdin/stdout;
``python tests/upstreams/mcp_stdio_upstream.py --http`` serves Streamable HTTP at ``/mcp`` on a free
loopback port and prints ``mcp-upstream listening on URL`` once it accepts connections. Tools:

- ``whoami``: the server process's pid, and the ``UPSTREAM_GREETING`` environment variable (so a test
  can tell which process answered, and what environment it was given);
- ``add(a, b)``: the sum;
- ``crash``: the process exits at once (status 3), without answering;
- ``leak_env``: whether the gateway's own settings (``HIVEGATE_*``) reached the process;
- ``big(n)``: a text of ``n`` bytes (a result past the backend's limit).
"""

from __future__ import annotations

import asyncio
import os
import sys

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


@server.tool(description="A text of n bytes.")
def big(n: int) -> str:
    return "x" * n


def serve_http() -> None:
    import uvicorn

    app = server.streamable_http_app(json_response=True, host="127.0.0.1")
    runner = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))

    async def main() -> None:
        serving = asyncio.create_task(runner.serve())
        while not runner.started:
            if serving.done():
                await serving
                return
            await asyncio.sleep(0.02)
        port = runner.servers[0].sockets[0].getsockname()[1]
        print(f"mcp-upstream listening on http://127.0.0.1:{port}", flush=True)
        await serving

    asyncio.run(main())


if __name__ == "__main__":
    if "--http" in sys.argv:
        serve_http()
    else:
        server.run("stdio")
