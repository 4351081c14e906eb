"""CPU per request of uvicorn's ``HttpToolsProtocol`` against hivegate's ``LimitedHttpToolsProtocol``.

    python bench/http_protocol_overhead.py [--requests N] [--rounds R]

In process, no sockets: one keep-alive connection on a fake transport is fed a 2026-07-28
``tools/call`` request as wrk sends it (12 header fields, a 200-byte body) and a minimal ASGI
app answers it; the loop is uvloop, as in ``hivegate serve``. Each round times ``--requests``
requests on each class (process CPU time) after 200 unmeasured ones; the medians over the rounds
are printed. The difference is what the HTTP limits (issue 7 item 3) add to the hot path, free of
the machine noise a loopback load test carries. Run it pinned (``taskset -c 1``) with the tree's
``src/`` on ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

import uvloop
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from hivegate.http_server import http_protocol
from hivegate.settings import load_settings

REQUEST = (
    b"POST /echo/mcp HTTP/1.1\r\nHost: 127.0.0.1:8094\r\nUser-Agent: wrk\r\n"
    b"Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
    b"MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: echo\r\n"
    b"Authorization: Bearer oag_" + b"0" * 64 + b"\r\nConnection: keep-alive\r\nAccept-Encoding: identity\r\n"
    b"Content-Length: 200\r\n\r\n" + b"x" * 200
)


async def app(scope: Any, receive: Any, send: Any) -> None:
    await receive()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"{}"})


class FakeTransport(asyncio.Transport):
    """Accepts writes and drops them; reports a loopback peer."""

    def __init__(self) -> None:
        super().__init__()
        self._closing = False

    def write(self, data: Any) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50_000), "sockname": ("127.0.0.1", 8094)}.get(name, default)

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        self._closing = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def cpu_us_per_request(cls: type[HttpToolsProtocol], requests: int) -> float:
    config = Config(app, log_level="warning", access_log=False)
    config.load()
    state = ServerState()
    protocol = cls(config=config, server_state=state, app_state={})
    protocol.connection_made(FakeTransport())

    async def one() -> None:
        protocol.data_received(REQUEST)
        await asyncio.gather(*state.tasks)  # the request's ASGI task

    for _ in range(200):
        await one()
    started = time.process_time()
    for _ in range(requests):
        await one()
    return (time.process_time() - started) / requests * 1e6


async def main(requests: int, rounds: int) -> None:
    classes: dict[str, type[HttpToolsProtocol]] = {
        "uvicorn HttpToolsProtocol": HttpToolsProtocol,
        "hivegate LimitedHttpToolsProtocol": http_protocol(load_settings().server),
    }
    results: dict[str, list[float]] = {name: [] for name in classes}
    for _ in range(rounds):
        for name, cls in classes.items():
            results[name].append(await cpu_us_per_request(cls, requests))
    for name, values in results.items():
        shown = ", ".join(f"{v:.2f}" for v in values)
        print(f"{name}: median {statistics.median(values):.2f} µs/request (rounds: {shown})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    uvloop.run(main(args.requests, args.rounds))
