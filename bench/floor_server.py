"""The floor for ``bench/run.py``: an ASGI app that answers every MCP POST with a canned ``echo`` result.

    python bench/floor_server.py PORT [--spin-us N]

What one request costs on this machine with no MCP work at all: uvicorn with uvloop and hivegate's
own HTTP protocol class (:func:`hivegate.http_server.http_protocol`, the limits ``hivegate serve``
runs with), the body read and parsed with orjson, a reply with the request's id and the result
hivegate's echo agent gives (``tools/call`` → one text block ``hello``; ``tools/list`` → a tool
named ``echo``), written with ``Content-Length``. ``--spin-us N`` burns N µs of CPU per request
in Python (a busy loop on ``time.perf_counter``), standing for an application of that cost: the
server's CPU per request minus N is then the cost of HTTP, the event loop and the kernel at that
load (it grows as the request rate falls, since fewer requests share each wake-up). Port 0 picks
a free port; prints ``floor listening on URL`` once it accepts connections.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import orjson
import uvicorn
import uvloop

from hivegate.http_server import http_protocol
from hivegate.settings import ServerSettings
from ready_server import serve

_CALL = {"content": [{"type": "text", "text": "hello"}], "isError": False, "resultType": "complete"}
_LIST = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}], "resultType": "complete"}


def app_of(spin_s: float) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        request = orjson.loads(b"".join(chunks))
        if spin_s:
            until = time.perf_counter() + spin_s
            while time.perf_counter() < until:
                pass
        result = _LIST if request.get("method") == "tools/list" else _CALL
        body = orjson.dumps({"jsonrpc": "2.0", "id": request.get("id"), "result": result})
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


async def _serve(port: int, spin_s: float) -> None:
    config = uvicorn.Config(
        app_of(spin_s),
        host="127.0.0.1",
        port=port,
        loop="uvloop",
        http=http_protocol(ServerSettings()),
        ws="none",
        log_level="warning",
        access_log=False,
        lifespan="off",
    )
    await serve(config, "floor", freeze_heap=True)


def main() -> None:
    args = sys.argv[1:]
    spin_us = 0.0
    if "--spin-us" in args:
        at = args.index("--spin-us")
        spin_us = float(args[at + 1])
        del args[at : at + 2]
    uvloop.run(_serve(int(args[0]) if args else 0, spin_us / 1e6))


if __name__ == "__main__":
    main()
