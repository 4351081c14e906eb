"""An MCP server for tests of the ``mcp`` backend's upstreams (an official-SDK ``MCPServer``).

``python tests/upstreams/mcp_stdio_upstream.py`` speaks MCP on stdin/stdout;
``python tests/upstreams/mcp_stdio_upstream.py --http`` serves Streamable HTTP at ``/mcp`` on a free
loopback port and prints ``mcp-upstream listening on URL`` once it accepts connections. Tools:

- ``whoami``: the server process's pid, and the ``UPSTREAM_GREETING`` environment variable (so a test
  can tell which process answered, and what environment it was given);
- ``add(a, b)``: the sum;
- ``crash``: the process exits at once (status 3), without answering;
- ``leak_env``: whether the gateway's own settings (``HIVEGATE_*``) reached the process;
- ``big(n)``: a text of ``n`` bytes (a result past the backend's limit);
- ``shout(text, n)``: writes ``text`` to stderr ``n`` times, a line each, and answers ``done``;
- ``flood(n)``: writes ``n`` bytes without a newline straight to stdout (the protocol stream), then answers;
- ``garbage(n)``: writes ``n`` lines that are not JSON-RPC to stdout, then answers.

With ``UPSTREAM_LINGER=1`` in its environment the process does not exit when its stdin ends (it sleeps
ten minutes), as a careless server might: only a signal stops it.

``whoami``'s description names the process's pid too (a test that only lists tools can tell processes
apart).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time

from mcp.server.mcpserver import MCPServer

server = MCPServer("stdio-upstream")
WIRE = os.dup(1)
"""The protocol stream (stdout), for ``flood`` and ``garbage``: the SDK's stdio server diverts fd 1 to stderr
(a stray print cannot garble the stream), and serves the wire from a duplicate of its own."""


@server.tool(description=f"The server process's pid and greeting (pid={os.getpid()}).")
def whoami() -> str:
    return f"pid={os.getpid()} greeting={os.environ.get('UPSTREAM_GREETING', '')}"


@server.tool(
    description="What this process holds beyond its own: listening TCP sockets, and copies of its stdin/stdout."
)
def descriptors() -> str:
    listening = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table, encoding="ascii") as rows:
            for row in list(rows)[1:]:
                fields = row.split()
                if fields[3] == "0A":  # LISTEN
                    listening.add(fields[9])
    stdio = {os.readlink(f"/proc/self/fd/{fd}") for fd in (0, 1)}
    held, copies = 0, 0
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{name}")
            if target.startswith("socket:[") and target[8:-1] in listening:
                held += 1
            if int(name) > 2 and target in stdio:
                copies += 1
    return json.dumps({"listening": held, "stdio_copies": copies})


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


@server.tool(description="Answer after the given seconds.")
async def slow(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return f"after {seconds} s"


@server.tool(description="Write text to stderr n times, a line each.")
def shout(text: str, n: int = 1) -> str:
    for _ in range(n):
        sys.stderr.write(text + "\n")
    sys.stderr.flush()
    return "done"


@server.tool(description="Write n bytes without a newline to stdout, then answer.")
def flood(n: int) -> str:
    block = b"x" * min(n, 1 << 20)
    left = n
    while left > 0:
        left -= os.write(WIRE, block[:left])
    return "flooded"


@server.tool(description="Write n lines that are not JSON-RPC to stdout, then answer.")
def garbage(n: int) -> str:
    os.write(WIRE, b"this is not json\n" * n)
    return "garbled"


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
        try:
            server.run("stdio")
        finally:  # also when its stdout is gone (a broken pipe)
            if os.environ.get("UPSTREAM_LINGER") == "1":
                time.sleep(600)
