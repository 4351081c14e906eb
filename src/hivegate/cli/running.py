"""Serving a gateway with uvicorn, in the event loop that opened it (``hivegate serve`` and its reload workers).

The gateway is opened (:meth:`hivegate.gateway.Gateway.open`) before uvicorn starts, in the same
event loop, so the database connections it pools belong to the loop that serves them, and a
database failure at start-up is raised before anything listens.
"""

from __future__ import annotations

import gc
import socket

import anyio
import uvicorn

from hivegate.app import create_app
from hivegate.gateway import Gateway
from hivegate.http_server import http_protocol
from hivegate.settings import Settings
from hivegate.storage import Storage

__all__ = ["serve_gateway", "uvicorn_config"]

STARTED_POLL_SECONDS = 0.05
"""How often :func:`serve_gateway` looks whether uvicorn has started (to print the listening line)."""


def uvicorn_config(gateway: Gateway) -> uvicorn.Config:
    """The uvicorn configuration serving ``gateway``'s app with hivegate's HTTP limits (no sockets bound)."""
    server = gateway.settings.server
    return uvicorn.Config(
        create_app(gateway),
        host=server.host,
        port=server.port,
        loop="uvloop",
        http=http_protocol(server),  # httptools with hivegate's head, field and connection limits
        ws="none",  # hivegate serves no WebSocket endpoint
        timeout_keep_alive=server.keep_alive_timeout_seconds,
        log_level=server.log_level,
        access_log=False,
        proxy_headers=False,
        lifespan="on",
    )


async def serve_gateway(
    settings: Settings, sockets: list[socket.socket], *, storage: Storage | None = None, announce: bool = True
) -> int:
    """Open the gateway (over ``storage`` when given), serve it on ``sockets`` until shut down, close it.

    With ``announce``, once uvicorn has started, prints ``hivegate listening on URL`` per socket on stdout.

    Returns:
        uvicorn's exit status (3 when it could not start).

    Raises:
        StoreUnavailableError: opening the gateway failed on the database (nothing was served).
    """
    gateway = await Gateway.open(settings, storage=storage)
    try:
        return await _run(uvicorn.Server(uvicorn_config(gateway)), sockets, announce)
    finally:
        await gateway.close()


async def _run(server: uvicorn.Server, sockets: list[socket.socket], announce: bool) -> int:
    """Serve until shut down; returns uvicorn's exit status (3 when it could not start, e.g. a busy port)."""
    status = 0

    async def serve() -> None:
        nonlocal status
        try:
            await server.serve(sockets=sockets)
        except SystemExit as exc:  # uvicorn exits when it cannot bind; it has logged why
            status = exc.code if isinstance(exc.code, int) else 1

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve)
        while not server.started:
            if server.should_exit or status:
                return status
            await anyio.sleep(STARTED_POLL_SECONDS)
        # Objects built at start-up live for the whole process: move them out of the collector's
        # sight so full collections stay short (the SDK's p99 tail is full-GC pauses).
        gc.freeze()
        for srv in server.servers if announce else []:
            for sock in srv.sockets:
                address = sock.getsockname()
                shown = f"[{address[0]}]" if ":" in address[0] else address[0]
                print(f"hivegate listening on http://{shown}:{address[1]}", flush=True)
    return status
