"""The baseline for ``bench/run.py``: a bare official-SDK MCP server with one ``echo`` tool.

``python bench/sdk_echo_server.py PORT [--sse]`` serves ``POST /mcp`` with the SDK's
``MCPServer`` in JSON-response mode (``streamable_http_app(json_response=True)``; with
``--sse``, the SDK's default mode, which answers with SSE streams) on uvicorn with uvloop and
httptools, no access log: the same stack hivegate runs on, with nothing of hivegate's. Port 0
picks a free port; the server prints ``sdk listening on URL`` once it accepts connections.

The tool is ``async`` (as hivegate's echo handler is), so the SDK is not charged for the
worker-thread hop a sync tool function costs; everything else is the SDK's defaults.
"""

from __future__ import annotations

import sys

import uvicorn
import uvloop
from mcp.server.mcpserver import MCPServer

from ready_server import serve

mcp = MCPServer(name="sdk-echo", version="1.0.0")


@mcp.tool()
async def echo(message: str) -> str:
    """Reply with the message received."""
    return message


async def _serve(port: int, json_response: bool) -> None:
    config = uvicorn.Config(
        mcp.streamable_http_app(json_response=json_response),
        host="127.0.0.1",
        port=port,
        loop="uvloop",
        http="httptools",
        log_level="warning",
        access_log=False,
        lifespan="on",
    )
    await serve(config, "sdk")


def main() -> None:
    args = sys.argv[1:]
    json_response = "--sse" not in args
    ports = [a for a in args if a != "--sse"]
    uvloop.run(_serve(int(ports[0]) if ports else 0, json_response))


if __name__ == "__main__":
    main()
