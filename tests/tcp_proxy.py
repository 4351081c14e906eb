"""A loopback TCP forwarder a test controls, to take a database away from one server without touching others.

``TcpProxy(target_port)`` listens on a free loopback port and forwards every connection to
``127.0.0.1:target_port``. The test switches it between three states:

- ``forward()``: connections are relayed (the database is there);
- ``refuse()``: the listening socket is closed and open connections are reset: new connections
  are refused at once (the database host is up, the database is not);
- ``blackhole()``: connections are accepted and bytes are swallowed in both directions, on new and
  open connections alike (the database or the network stopped answering).

The proxy runs its own asyncio loop in a daemon thread, so it serves a server in a subprocess and
an in-process store alike; every control call waits (bounded) for the loop to apply it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Coroutine, Generator
from typing import Any

from sqlalchemy.engine import make_url

__all__ = ["TcpProxy", "running_proxy"]

CONTROL_TIMEOUT_SECONDS = 10.0


class TcpProxy:
    """A controllable TCP forwarder from ``127.0.0.1:port`` to ``127.0.0.1:target_port``."""

    def __init__(self, target_port: int) -> None:
        self._target_port = target_port
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="tcp-proxy", daemon=True)
        self._server: asyncio.Server | None = None
        self._mode = "forward"
        self._writers: set[asyncio.StreamWriter] = set()
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port: int = probe.getsockname()[1]

    def start(self) -> None:
        self._thread.start()
        self._call(self._listen())

    def stop(self) -> None:
        self._call(self._close(reset=True))
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=CONTROL_TIMEOUT_SECONDS)
        self._loop.close()

    def url_for(self, database_url: str) -> str:
        """``database_url`` pointed at the proxy (host 127.0.0.1, the proxy's port)."""
        return make_url(database_url).set(host="127.0.0.1", port=self.port).render_as_string(hide_password=False)

    def forward(self) -> None:
        self._call(self._set_mode("forward", listen=True))

    def refuse(self) -> None:
        self._call(self._set_mode("refuse", listen=False))

    def blackhole(self) -> None:
        self._call(self._set_mode("blackhole", listen=True))

    def _call(self, coroutine: Coroutine[Any, Any, None]) -> None:
        asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=CONTROL_TIMEOUT_SECONDS)

    async def _set_mode(self, mode: str, *, listen: bool) -> None:
        self._mode = mode
        if mode == "refuse":
            await self._close(reset=True)
        elif listen and self._server is None:
            await self._listen()

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port, reuse_address=True)

    async def _close(self, *, reset: bool) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        if reset:
            for writer in list(self._writers):
                writer.transport.abort()
            self._writers.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            if self._mode != "forward":
                await self._swallow(reader)
                return
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._target_port)
            except OSError:
                return
            self._writers.add(up_writer)
            try:
                await asyncio.gather(self._relay(reader, up_writer), self._relay(up_reader, writer))
            finally:
                self._writers.discard(up_writer)
                up_writer.transport.abort()
        finally:
            self._writers.discard(writer)
            writer.transport.abort()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while chunk := await reader.read(65536):
                if self._mode == "blackhole":
                    continue  # swallowed: the other side never hears of it
                writer.write(chunk)
                await writer.drain()
        with contextlib.suppress(OSError, RuntimeError):  # the other side may be gone already
            writer.write_eof()

    @staticmethod
    async def _swallow(reader: asyncio.StreamReader) -> None:
        with contextlib.suppress(OSError):
            while await reader.read(65536):
                pass


@contextlib.contextmanager
def running_proxy(target_port: int) -> Generator[TcpProxy]:
    """A started :class:`TcpProxy`, stopped afterwards."""
    proxy = TcpProxy(target_port)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()
