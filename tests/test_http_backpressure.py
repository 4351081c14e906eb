"""Back-pressure through hivegate's HTTP protocol class to a reader that stalls.

uvicorn's ``send`` waits for the transport to drain only once the transport has called the protocol's
``pause_writing``; anything between the protocol and the socket that holds writes back (a write-
coalescing transport was tried on the hot path, and let a whole response pile up in the server's
memory) must keep that signal. An app that sends without yielding is paused after about the kernel's
buffers (~3 MB).
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import uvicorn

from hivegate.http_server import http_protocol
from hivegate.settings import ServerSettings

CHUNK = b"z" * 65_536
CHUNKS = 1_000  # 64 MiB


async def test_a_producer_that_does_not_yield_is_still_paused_by_a_stalled_reader() -> None:
    sent = 0

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        nonlocal sent
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        for _ in range(CHUNKS):
            await send({"type": "http.response.body", "body": CHUNK, "more_body": True})
            sent += 1
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    config = uvicorn.Config(app, http=http_protocol(ServerSettings()), ws="none", log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    serving = asyncio.create_task(server.serve(sockets=[listener]))
    try:
        for _ in range(100):
            if server.started:
                break
            await asyncio.sleep(0.05)
        client = socket.socket()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        client.connect(("127.0.0.1", port))
        client.setblocking(False)
        _, writer = await asyncio.open_connection(sock=client)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        await asyncio.sleep(1.0)  # the client reads nothing
        writer.close()
        assert sent < CHUNKS // 4, f"{sent} chunks ({sent * len(CHUNK) >> 20} MiB) accepted from a stalled reader's app"
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, 10)
