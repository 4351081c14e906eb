"""The hot path's cancellation scopes and its responses on the wire, against a real server:

- the invoke deadline with a synchronous backend in a worker thread, on each era and path;
- a backend's own ``TimeoutError`` is not the deadline (-32003) on any path;
- a lean handshake-era call cancelled by ``notifications/cancelled`` gets 202 with no body;
- a client that disconnects (lean JSON call, SDK SSE call) cancels the backend call;
- progress events of an SSE response arrive as they are produced, not when the response ends;
- a large response to a slow reader, two pipelined on one keep-alive connection, arrive whole and in order;
- a 431 after a served request on one connection (pipelined) still arrives after that response.

Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.e2e.marker_agent import wait_for_marker
from tests.gateway_process import GatewayProcess, run_gateway

AGENTS = """
import pathlib
import time

import anyio

MARKS = pathlib.Path(__file__).parent / "marks"


def sleepy(invocation):
    time.sleep(4)
    return "late"


async def own_timeout(invocation):
    raise TimeoutError("the backend's own timeout")


async def drip(invocation):
    for word in invocation.message.split():
        await anyio.sleep(0.4)
        yield word + " "


def big(invocation):
    return "x" * int(invocation.message)


async def waiter(invocation):
    (MARKS / f"started-{invocation.message}").write_text("", encoding="utf-8")
    try:
        await anyio.sleep(120)
    except anyio.get_cancelled_exc_class():
        (MARKS / f"cancelled-{invocation.message}").write_text("", encoding="utf-8")
        raise
    return "too late"
"""

CONFIG = "".join(
    f"""
[[agents]]
id = "{agent}"
name = "{agent}"
owner = "alice"
auth = "none"
invoke_timeout_seconds = {timeout}
backend = {{ type = "python", callable = "attack_agents:{function}" }}
"""
    for agent, function, timeout in [
        ("sleepy", "sleepy", 1),
        ("owntimeout", "own_timeout", 5),
        ("drip", "drip", 30),
        ("big", "big", 30),
        ("waiter", "waiter", 60),
    ]
)

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
WAIT_S = 10.0
MAX_HEADERS = 20

PATHS = [
    pytest.param("legacy", False, id="legacy-lean"),
    pytest.param("legacy", True, id="legacy-sdk"),
    pytest.param(MODERN, False, id="modern-lean"),
    pytest.param(MODERN, True, id="modern-sdk"),
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("attack")
    (root / "marks").mkdir()
    (root / "attack_agents.py").write_text(AGENTS, encoding="utf-8")
    (root / "agents.toml").write_text(CONFIG, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def gateway(folder: Path) -> Iterator[GatewayProcess]:
    with run_gateway(folder / "agents.toml", env={"HIVEGATE_SERVER__MAX_HEADERS": str(MAX_HEADERS)}) as running:
        yield running


def _port(gateway: GatewayProcess) -> int:
    port = urlsplit(gateway.url).port
    assert port is not None
    return port


async def _progress(progress: float, total: float | None, message: str | None) -> None:
    return None


def _modern_call(port: int, agent: str, message: str, *, request_id: int = 1, progress: str | None = None) -> bytes:
    meta: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    if progress is not None:
        meta["progressToken"] = progress
    params = {"name": agent, "arguments": {"message": message}, "_meta": meta}
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}).encode()
    head = (
        f"POST /{agent}/mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: application/json, text/event-stream\r\n"
        f"Content-Type: application/json\r\nMCP-Protocol-Version: {MODERN}\r\nMcp-Method: tools/call\r\n"
        f"Mcp-Name: {agent}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    """One response with a Content-Length body."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT_S)
    lines = head.decode("latin-1").split("\r\n")
    headers = {n.lower(): v.strip() for n, _, v in (line.partition(":") for line in lines[1:] if line)}
    body = await asyncio.wait_for(reader.readexactly(int(headers["content-length"])), WAIT_S)
    return int(lines[0].split()[1]), headers, body


def _no_server_errors(gateway: GatewayProcess) -> None:
    output = gateway.output()
    assert "Traceback" not in output, output
    assert "Exception in callback" not in output, output


# -- the deadline and cancellation (asyncio.timeout scopes) ------------------------------------------


@pytest.mark.parametrize(("mode", "progress"), PATHS)
async def test_a_sync_backend_past_its_deadline_is_answered_32003_without_waiting_for_its_thread(
    gateway: GatewayProcess, mode: str, progress: bool
) -> None:
    async with Client(f"{gateway.url}/sleepy/mcp", mode=mode) as client:  # type: ignore[arg-type]
        started = time.monotonic()
        with pytest.raises(MCPError) as caught:
            await client.call_tool("sleepy", {"message": "x"}, progress_callback=_progress if progress else None)
        elapsed = time.monotonic() - started
    assert (caught.value.code, caught.value.message) == (-32003, "Agent reply timeout")
    assert caught.value.data == {"code": "service_timeout", "timeout_seconds": 1.0}
    assert 1.0 <= elapsed < 3.5  # the thread sleeps 4 s


@pytest.mark.parametrize(("mode", "progress"), PATHS)
async def test_a_backends_own_timeout_error_is_an_agent_failure_not_the_deadline(
    gateway: GatewayProcess, mode: str, progress: bool
) -> None:
    async with Client(f"{gateway.url}/owntimeout/mcp", mode=mode) as client:  # type: ignore[arg-type]
        result = await client.call_tool(
            "owntimeout", {"message": "x"}, progress_callback=_progress if progress else None
        )
    assert result.is_error
    assert result.content[0].text == "The agent failed to produce a reply."  # type: ignore[union-attr]
    assert "TimeoutError: the backend's own timeout" in gateway.output()  # logged (and drained here)


async def _legacy_session(http: httpx.AsyncClient, url: str) -> dict[str, str]:
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }
    accept = {"Accept": "application/json, text/event-stream"}
    response = await http.post(url, json=init, headers=accept)
    assert response.status_code == 200, response.text
    headers = {**accept, "Mcp-Session-Id": response.headers["mcp-session-id"], "MCP-Protocol-Version": LEGACY}
    done = await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    assert done.status_code == 202
    return headers


async def test_a_lean_legacy_call_cancelled_by_notification_gets_202_and_no_body(
    gateway: GatewayProcess, folder: Path
) -> None:
    url = f"{gateway.url}/waiter/mcp"
    async with httpx.AsyncClient(timeout=WAIT_S) as http:
        headers = await _legacy_session(http, url)
        call = {
            "jsonrpc": "2.0",
            "id": 41,
            "method": "tools/call",
            "params": {"name": "waiter", "arguments": {"message": "lean-cancel"}},
        }
        answers: list[httpx.Response] = []
        async with anyio.create_task_group() as tg:

            async def post() -> None:
                answers.append(await http.post(url, json=call, headers=headers))

            tg.start_soon(post)
            await wait_for_marker(folder / "marks" / "started-lean-cancel")
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 41}}
            assert (await http.post(url, json=cancel, headers=headers)).status_code == 202
    await wait_for_marker(folder / "marks" / "cancelled-lean-cancel")
    assert answers[0].status_code == 202
    assert answers[0].content == b""
    _no_server_errors(gateway)


@pytest.mark.parametrize("progress", [None, "p"], ids=["lean-json", "sdk-sse"])
async def test_a_client_that_disconnects_cancels_the_backend_call(
    gateway: GatewayProcess, folder: Path, progress: str | None
) -> None:
    message = f"disconnect-{progress}"
    _, writer = await asyncio.open_connection("127.0.0.1", _port(gateway))
    writer.write(_modern_call(_port(gateway), "waiter", message, progress=progress))
    await wait_for_marker(folder / "marks" / f"started-{message}")
    writer.close()
    await wait_for_marker(folder / "marks" / f"cancelled-{message}")
    async with httpx.AsyncClient(timeout=WAIT_S) as http:
        assert (await http.get(f"{gateway.url}/healthz")).status_code == 200
    _no_server_errors(gateway)


# -- responses on the wire: streamed events, large and pipelined answers, refusals --------------------


async def test_progress_events_arrive_as_produced_not_at_the_end(gateway: GatewayProcess) -> None:
    """drip yields a word every 0.4 s: the head and each event reach the client about then."""
    reader, writer = await asyncio.open_connection("127.0.0.1", _port(gateway))
    started = time.monotonic()
    writer.write(_modern_call(_port(gateway), "drip", "one two three four five", progress="p"))
    arrivals: list[tuple[float, bytes]] = []
    data = b""
    try:
        while not data.endswith(b"0\r\n\r\n"):
            chunk = await asyncio.wait_for(reader.read(65_536), WAIT_S)
            assert chunk, data
            data += chunk
            arrivals.append((time.monotonic() - started, chunk))
    finally:
        writer.close()
    progress_at = [t for t, chunk in arrivals if b"notifications/progress" in chunk]
    assert len(progress_at) >= 4, arrivals  # not all in one piece at the end
    assert progress_at[0] < 1.2
    assert progress_at[-1] - progress_at[0] > 1.0  # spread over the 2 s the agent takes


async def test_a_listen_stream_head_arrives_while_the_stream_stays_open(gateway: GatewayProcess) -> None:
    async with httpx.AsyncClient(timeout=WAIT_S) as http:
        headers = await _legacy_session(http, f"{gateway.url}/drip/mcp")
        with anyio.fail_after(3):
            async with http.stream(
                "GET", f"{gateway.url}/drip/mcp", headers={**headers, "Accept": "text/event-stream"}
            ) as response:
                assert response.status_code == 200
                assert response.headers["content-type"].startswith("text/event-stream")


async def test_large_pipelined_responses_to_a_slow_reader_arrive_whole_and_in_order(gateway: GatewayProcess) -> None:
    port = _port(gateway)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    reader, writer = await asyncio.open_connection(sock=sock, limit=1 << 24)
    sizes = [3_000_000, 2_000_001]
    try:
        writer.write(b"".join(_modern_call(port, "big", str(size), request_id=n) for n, size in enumerate(sizes)))
        await asyncio.sleep(1.0)  # the reader stalls: the server must hold the answer, not drop it
        for n, size in enumerate(sizes):
            status, _, body = await _read_response(reader)
            assert status == 200
            answer = json.loads(body)
            assert answer["id"] == n
            assert answer["result"]["content"][0]["text"] == "x" * size
    finally:
        writer.close()
    _no_server_errors(gateway)


async def test_a_client_gone_mid_response_leaves_the_server_healthy(gateway: GatewayProcess) -> None:
    port = _port(gateway)
    for _ in range(3):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(_modern_call(port, "big", "20000000"))
        await asyncio.wait_for(reader.read(1000), WAIT_S)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # reset
        writer.close()
    async with httpx.AsyncClient(timeout=WAIT_S) as http:
        assert (await http.get(f"{gateway.url}/healthz")).status_code == 200
    _no_server_errors(gateway)


async def test_a_431_after_a_served_request_on_one_keep_alive_connection_arrives(gateway: GatewayProcess) -> None:
    port = _port(gateway)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    too_many = (
        b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: 1\r\n" % n for n in range(MAX_HEADERS + 5)) + b"\r\n"
    )
    try:
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (await _read_response(reader))[0] == 200
        writer.write(too_many)
        status, headers, body = await _read_response(reader)
        assert status == 431
        assert headers["connection"] == "close"
        assert json.loads(body)["id"] is None
        with contextlib.suppress(ConnectionResetError):
            assert await asyncio.wait_for(reader.read(), WAIT_S) == b""
    finally:
        writer.close()
