"""Serve a bench baseline on uvicorn and say where once it accepts connections.

Each baseline server of ``bench/run.py`` (``sdk_echo_server.py``, ``a2a_sdk_echo_server.py``,
``floor_server.py``) builds its own ``uvicorn.Config`` and hands it to :func:`serve`, which prints
``LABEL listening on http://HOST:PORT`` (the port really bound: port 0 picks a free one), the
line ``bench/run.py`` waits for.
"""

from __future__ import annotations

import asyncio
import gc

import uvicorn

__all__ = ["serve"]


async def serve(config: uvicorn.Config, label: str, *, freeze_heap: bool = False) -> None:
    """Run ``config``'s server until it stops; print ``{label} listening on URL`` once it has started.

    ``freeze_heap``: ``gc.freeze()`` after start-up, before the line, so the collector leaves
    the objects of start-up alone while the bench runs.
    """
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            await task
            return
        await asyncio.sleep(0.05)
    if freeze_heap:
        gc.freeze()
    for srv in server.servers:
        for sock in srv.sockets:
            host, bound = sock.getsockname()[:2]
            print(f"{label} listening on http://{host}:{bound}", flush=True)
    await task
