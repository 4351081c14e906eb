"""Issue 7 item 3: the embedded HTTP server bounds the request head (time, bytes, fields) and connections.

Every test drives a real ``hivegate serve`` subprocess over raw loopback sockets (the attacks are
malformed or slow HTTP no client library sends) with small limits set through the environment.
Every wait is bounded; the slow clients pace their bytes (that pacing is the attack, not a
synchronisation).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
from collections.abc import Generator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.gateway_process import GatewayProcess, run_gateway

HEAD_TIMEOUT_S = 3.0
BODY_TIMEOUT_S = 2.0
KEEP_ALIVE_S = 1
MAX_HEADER_BYTES = 16_384
MAX_HEADERS = 20
WAIT_S = 10.0  # the longest any single wait below may take
LIMITS_ENV = {
    "HIVEGATE_SERVER__HEADER_READ_TIMEOUT_SECONDS": str(HEAD_TIMEOUT_S),
    "HIVEGATE_SERVER__BODY_READ_TIMEOUT_SECONDS": str(BODY_TIMEOUT_S),
    "HIVEGATE_SERVER__KEEP_ALIVE_TIMEOUT_SECONDS": str(KEEP_ALIVE_S),
    "HIVEGATE_SERVER__MAX_HEADER_BYTES": str(MAX_HEADER_BYTES),
    "HIVEGATE_SERVER__MAX_HEADERS": str(MAX_HEADERS),
}


@pytest.fixture(scope="module")
def gateway() -> Generator[GatewayProcess]:
    with run_gateway(None, env=LIMITS_ENV) as process:
        yield process


def _address(gateway: GatewayProcess) -> tuple[str, int]:
    parts = urlsplit(gateway.url)
    assert parts.hostname is not None
    assert parts.port is not None
    return parts.hostname, parts.port


async def _connect(
    gateway: GatewayProcess, source: str = "127.0.0.1"
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = _address(gateway)
    return await asyncio.wait_for(asyncio.open_connection(host, port, local_addr=(source, 0)), WAIT_S)


async def _read_to_eof(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends until it closes (a reset counts as the close)."""
    chunks: list[bytes] = []
    with contextlib.suppress(ConnectionResetError):
        while chunk := await reader.read(65_536):
            chunks.append(chunk)
    return b"".join(chunks)


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """One response with a ``Content-Length`` body (the connection stays open)."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT_S)
    lines = head.decode("latin-1").split("\r\n")
    length = next(int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:"))
    body = await asyncio.wait_for(reader.readexactly(length), WAIT_S)
    return int(lines[0].split()[1]), body


def _parse(raw: bytes) -> tuple[int, dict[str, str], Any]:
    """Status, headers and JSON body of a complete ``Connection: close`` response."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, json.loads(body)


def _head(path: str, size: int | None = None, fields: int = 0) -> bytes:
    """A ``Connection: close`` GET head with ``fields`` extra header fields, padded to exactly ``size`` bytes."""
    lines = [f"GET {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    lines += [f"X-Field-{n}: {n}" for n in range(fields)]
    head = ("\r\n".join(lines) + "\r\n").encode()
    if size is not None:
        overhead = len(head) + len(b"X-Pad: \r\n\r\n")
        assert size > overhead
        head += b"X-Pad: " + b"a" * (size - overhead) + b"\r\n"
    return head + b"\r\n"


async def _exchange(gateway: GatewayProcess, raw: bytes) -> bytes:
    reader, writer = await _connect(gateway)
    try:
        writer.write(raw)
        with contextlib.suppress(ConnectionResetError):
            await asyncio.wait_for(writer.drain(), WAIT_S)
        return await asyncio.wait_for(_read_to_eof(reader), WAIT_S)
    finally:
        writer.close()


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS line")


async def test_slow_loris_connections_are_closed_while_a_normal_request_is_served(gateway: GatewayProcess) -> None:
    """Issue 7 item 3: clients trickling a head byte by byte get 408 and a close after
    ``server.header_read_timeout_seconds`` (not before), while a normal request is served meanwhile."""
    loop = asyncio.get_running_loop()
    head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 10_000
    all_trickling = asyncio.Barrier(21)

    async def trickle() -> tuple[bytes, float]:
        reader, writer = await _connect(gateway)
        started = loop.time()

        async def send() -> None:
            with contextlib.suppress(ConnectionError):
                for n, byte in enumerate(head):
                    writer.write(bytes([byte]))
                    await writer.drain()
                    if n == 2:
                        await all_trickling.wait()
                    await asyncio.sleep(0.05)

        sender = asyncio.create_task(send())
        try:
            raw = await asyncio.wait_for(_read_to_eof(reader), HEAD_TIMEOUT_S + WAIT_S)
            return raw, loop.time() - started
        finally:
            sender.cancel()
            writer.close()

    slow = [asyncio.create_task(trickle()) for _ in range(20)]
    await asyncio.wait_for(all_trickling.wait(), WAIT_S)
    async with httpx.AsyncClient(timeout=WAIT_S) as client:
        health = await client.get(f"{gateway.url}/healthz")
    assert health.status_code == 200
    assert not any(task.done() for task in slow), "a slow client was closed before the timeout"
    for raw, elapsed in await asyncio.gather(*slow):
        status, headers, body = _parse(raw)
        assert status == 408
        assert headers["connection"] == "close"
        assert body["id"] is None
        assert body["error"]["data"]["code"] == "request_timeout"
        assert HEAD_TIMEOUT_S - 0.05 <= elapsed < HEAD_TIMEOUT_S + 3


async def test_a_connection_that_sends_nothing_is_closed_silently(gateway: GatewayProcess) -> None:
    """Issue 7 item 3: a new connection must start its request within the head timeout (no response is owed)."""
    loop = asyncio.get_running_loop()
    reader, writer = await _connect(gateway)
    started = loop.time()
    try:
        raw = await asyncio.wait_for(_read_to_eof(reader), HEAD_TIMEOUT_S + WAIT_S)
    finally:
        writer.close()
    assert raw == b""
    assert HEAD_TIMEOUT_S - 0.05 <= loop.time() - started < HEAD_TIMEOUT_S + 3


async def test_idle_keep_alive_connection_is_closed(gateway: GatewayProcess) -> None:
    """Issue 7 item 3: after a response, an idle keep-alive connection is closed after
    ``server.keep_alive_timeout_seconds``."""
    loop = asyncio.get_running_loop()
    reader, writer = await _connect(gateway)
    try:
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert (await _read_response(reader))[0] == 200
        idle_since = loop.time()
        assert await asyncio.wait_for(_read_to_eof(reader), KEEP_ALIVE_S + WAIT_S) == b""
    finally:
        writer.close()
    assert KEEP_ALIVE_S - 0.05 <= loop.time() - idle_since < KEEP_ALIVE_S + 3


async def test_bytes_trickled_between_requests_do_not_hold_a_keep_alive_connection(gateway: GatewayProcess) -> None:
    """Issue 7 item 3: empty lines trickled after a response (which cancel uvicorn's keep-alive timer
    and start no message) still meet the head timeout."""
    reader, writer = await _connect(gateway)

    async def trickle() -> None:
        with contextlib.suppress(ConnectionError):
            for _ in range(1000):
                writer.write(b"\r\n")
                await writer.drain()
                await asyncio.sleep(0.05)

    try:
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert (await _read_response(reader))[0] == 200
        sender = asyncio.create_task(trickle())
        try:
            raw = await asyncio.wait_for(_read_to_eof(reader), HEAD_TIMEOUT_S + WAIT_S)
        finally:
            sender.cancel()
    finally:
        writer.close()
    assert raw.startswith(b"HTTP/1.1 408 ")


TOKEN_HEAD = (
    b"POST /oauth/token HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
    b"Content-Length: 40\r\n\r\n"
)


async def test_a_stalled_body_gets_408_after_the_body_time(gateway: GatewayProcess) -> None:
    """Issue 7 item 3: a request whose body stops arriving is answered 408 (the plane's body) and closed
    once ``header_read_timeout_seconds`` + ``body_read_timeout_seconds`` have passed since it began."""
    loop = asyncio.get_running_loop()
    reader, writer = await _connect(gateway)
    started = loop.time()
    try:
        writer.write(TOKEN_HEAD + b"grant_type=")
        raw = await asyncio.wait_for(_read_to_eof(reader), HEAD_TIMEOUT_S + BODY_TIMEOUT_S + WAIT_S)
    finally:
        writer.close()
    status, _, body = _parse(raw)
    assert status == 408
    assert body["error"] == "invalid_request"
    assert HEAD_TIMEOUT_S + BODY_TIMEOUT_S - 0.05 <= loop.time() - started < HEAD_TIMEOUT_S + BODY_TIMEOUT_S + 3


async def test_a_body_still_arriving_after_the_head_deadline_is_served(gateway: GatewayProcess) -> None:
    """Issue 7 item 3: the body gets its own time: a body completed after ``header_read_timeout_seconds``
    (but within the body's time) reaches the app, which answers it (not 408)."""
    reader, writer = await _connect(gateway)
    body = b"grant_type=refresh_token&refresh_token=x"
    assert len(body) == 40
    try:
        writer.write(TOKEN_HEAD)
        for n, byte in enumerate(body):  # 40 bytes over ~HEAD_TIMEOUT_S + 0.5 s
            writer.write(bytes([byte]))
            await writer.drain()
            if n < len(body) - 1:
                await asyncio.sleep((HEAD_TIMEOUT_S + 0.5) / len(body))
        status, answer = await _read_response(reader)
    finally:
        writer.close()
    assert status == 401, answer  # the token endpoint's verdict on a request without client credentials
    assert json.loads(answer)["error"] == "invalid_client"


async def test_pipelined_requests_and_expect_100_continue_still_work(gateway: GatewayProcess) -> None:
    """Issue 7 item 3: the limits keep HTTP/1.1 intact: two requests in one write get two answers in
    order, and ``Expect: 100-continue`` still gets its interim response."""
    reader, writer = await _connect(gateway)
    try:
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * 2)
        assert (await _read_response(reader))[0] == 200
        assert (await _read_response(reader))[0] == 200
        writer.write(TOKEN_HEAD.replace(b"\r\n\r\n", b"\r\nExpect: 100-continue\r\n\r\n"))
        interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT_S)
        assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
        writer.write(b"grant_type=refresh_token&refresh_token=x")
        status, _ = await _read_response(reader)
    finally:
        writer.close()
    assert status == 401


async def test_head_of_max_header_bytes_is_served_one_more_byte_is_431(gateway: GatewayProcess) -> None:
    """Issue 7 item 3: the request line and headers may take exactly ``server.max_header_bytes``;
    one byte more gets 431 with a JSON-RPC error body (MCP paths) or an OAuth one (``/oauth/``)."""
    exact = await _exchange(gateway, _head("/healthz", MAX_HEADER_BYTES))
    assert exact.startswith(b"HTTP/1.1 200 "), exact[:200]

    status, headers, body = _parse(await _exchange(gateway, _head("/echo/mcp", MAX_HEADER_BYTES + 1)))
    assert status == 431
    assert headers["connection"] == "close"
    assert headers["content-type"] == "application/json"
    assert body["jsonrpc"] == "2.0"
    assert body["id"] is None
    assert body["error"]["code"] == -32600
    assert body["error"]["data"]["code"] == "headers_too_large"

    status, _, body = _parse(await _exchange(gateway, _head("/oauth/token", MAX_HEADER_BYTES + 1)))
    assert status == 431
    assert body["error"] == "invalid_request"
    assert body["error_description"]


async def test_a_one_mebibyte_head_gets_431_not_a_reset(gateway: GatewayProcess) -> None:
    """Issue 7 item 3: the client that sent far more than the limit still reads the 431 (the server
    discards the rest for a moment before it closes)."""
    raw = await _exchange(gateway, _head("/echo/mcp", 1024 * 1024))
    assert _parse(raw)[0] == 431


async def test_too_many_header_fields_get_431(gateway: GatewayProcess) -> None:
    """Issue 7 item 3: at most ``server.max_headers`` header fields (Host and Connection count)."""
    allowed = await _exchange(gateway, _head("/healthz", fields=MAX_HEADERS - 2))
    assert allowed.startswith(b"HTTP/1.1 200 "), allowed[:200]
    status, _, body = _parse(await _exchange(gateway, _head("/echo/mcp", fields=MAX_HEADERS - 1)))
    assert status == 431
    assert body["error"]["data"]["code"] == "headers_too_large"
    # 10,000 fields, as the attack sent: refused as soon as the limit is passed.
    status, _, _ = _parse(await _exchange(gateway, _head("/echo/mcp", fields=10_000)))
    assert status == 431


async def test_unfinished_huge_header_lines_do_not_grow_memory(gateway: GatewayProcess) -> None:
    """Issue 7 item 3: four connections each sending an unfinished 16 MiB header line leave the
    server's resident memory within a few MiB (before: the parser held every byte, +64 MiB)."""
    line_bytes = 16 * 1024 * 1024
    chunk = b"a" * 65_536

    async def attack() -> asyncio.StreamWriter:
        """Send the unfinished line; the connection stays open (unless the server closes it)."""
        _, writer = await _connect(gateway)
        writer.write(b"GET /echo/mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")
        with contextlib.suppress(ConnectionError):
            for _ in range(line_bytes // len(chunk)):
                writer.write(chunk)
                await asyncio.wait_for(writer.drain(), WAIT_S)
        return writer

    (await attack()).close()  # warm-up: the first one allocates the server's buffers for good
    before = _rss_kib(gateway.process.pid)
    async with asyncio.timeout(4 * WAIT_S):
        writers = await asyncio.gather(*(attack() for _ in range(4)))
    grown_kib = _rss_kib(gateway.process.pid) - before
    for writer in writers:
        writer.close()
    assert grown_kib < 8 * 1024, f"RSS grew by {grown_kib} KiB"


async def test_connection_caps_per_client_address_and_global() -> None:
    """Issue 7 item 3: ``server.max_connections_per_client`` refuses a client address's next connection
    while other addresses are still served; ``server.max_connections`` caps all of them; a slot
    frees when a connection ends."""
    env = {
        "HIVEGATE_SERVER__MAX_CONNECTIONS_PER_CLIENT": "3",
        "HIVEGATE_SERVER__MAX_CONNECTIONS": "5",
        "HIVEGATE_SERVER__KEEP_ALIVE_TIMEOUT_SECONDS": "60",
    }
    request = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    held: list[asyncio.StreamWriter] = []

    async def served(gateway: GatewayProcess, source: str) -> bool:
        """Open a connection from ``source`` and send a request: True if answered (the connection is kept)."""
        reader, writer = await _connect(gateway, source)
        writer.write(request)
        try:
            status, _ = await _read_response(reader)
        except (asyncio.IncompleteReadError, ConnectionResetError):
            writer.close()
            return False
        assert status == 200
        held.append(writer)
        return True

    with run_gateway(None, env=env) as gateway:
        try:
            assert [await served(gateway, "127.0.0.1") for _ in range(3)] == [True, True, True]
            assert not await served(gateway, "127.0.0.1")  # the address's fourth
            assert [await served(gateway, "127.0.0.2") for _ in range(2)] == [True, True]
            assert not await served(gateway, "127.0.0.3")  # the sixth in all
            held.pop(0).close()
            # The slot frees once the server has processed the close: until then (boundedly) it refuses.
            async with asyncio.timeout(WAIT_S):
                while not await served(gateway, "127.0.0.1"):
                    pass
        finally:
            for writer in held:
                writer.close()


async def test_health_checks_pass_while_one_address_holds_connections_under_a_low_descriptor_limit() -> None:
    """Issue 7 item 3: with 200 descriptors, 300 connections held from one address used to take every
    descriptor (accept failed, health checks hung); the per-address cap keeps ``/healthz`` answering."""
    env = {
        "HIVEGATE_SERVER__MAX_CONNECTIONS": "150",
        "HIVEGATE_SERVER__MAX_CONNECTIONS_PER_CLIENT": "100",
        "HIVEGATE_SERVER__HEADER_READ_TIMEOUT_SECONDS": "60",
    }
    held: list[asyncio.StreamWriter] = []
    with run_gateway(None, env=env) as gateway:
        resource.prlimit(gateway.process.pid, resource.RLIMIT_NOFILE, (200, 200))
        try:
            for _ in range(300):
                _, writer = await _connect(gateway)
                writer.write(b"G")  # a request started, never finished
                held.append(writer)
            reader, writer = await _connect(gateway, "127.0.0.2")
            held.append(writer)
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert (await _read_response(reader))[0] == 200
        finally:
            for writer in held:
                writer.close()
