"""The reading half of the tests' scripted HTTP/1.1 upstreams (``asyncio.start_server`` handlers that answer
each request as a test says): the requests on one connection, one at a time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator


async def http_requests(reader: asyncio.StreamReader) -> AsyncIterator[tuple[str, dict[str, str], bytes]]:
    """Each request on the connection: its request line, its headers (lower-case names), its body (by
    ``Content-Length``). Ends when the peer closes the connection."""
    while True:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            pairs = (line.partition(":") for line in lines[1:] if line)
            headers = {name.strip().lower(): value.strip() for name, _, value in pairs}
            body = await reader.readexactly(int(headers.get("content-length", "0")))
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        yield lines[0], headers, body
