"""Resource exhaustion against a real server: one principal at every budget, the others still served.

Issue 7 item 2 (acceptance "resource-exhaustion e2e"): handshake-era sessions, GET streams and
2026-07-28 listen streams were capped only per endpoint (10,000 sessions per agent filled in 35 s
without credentials, then 503 for everyone for 30 min; 1,024 listen streams shared by every
user of ``/mcp``). Here the budgets are small (settings), principal A (alice's ``oag_`` key)
takes all of hers, and principal B (bob's ``oag_`` key) still initializes and calls tools on
his agent and on ``/mcp``; two anonymous client addresses (127.0.0.1 and 127.0.0.2) on an
``auth = "none"`` agent are budgeted apart; the process total answers 503; slots come back on
``DELETE`` and on client disconnect; the server's RSS stays under :data:`RSS_BOUND_MIB`. Request
bodies in flight are budgeted in bytes: alice holding unfinished bodies up to her budget gets 429
for the next, while bob is served, and is served again once her connections close.

Spec: MCP 2025-11-25 basic/transports#session-management, #listening-for-messages-from-the-server;
MCP 2026-07-28 basic/utilities/subscriptions; RFC 6585 §4 (429); RFC 9110 §10.2.3 (Retry-After).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncGenerator, Generator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import TextContent

from tests.e2e.registry_cli import cli_at_once, first_line
from tests.gateway_process import ROOT, GatewayProcess, run_gateway

AGENTS = """
[[agents]]
id = "alice-echo"
name = "Alice's echo"
owner = "alice"
backend = { type = "python", callable = "echo_agent:reply" }

[[agents]]
id = "bob-echo"
name = "Bob's echo"
owner = "bob"
backend = { type = "python", callable = "echo_agent:reply" }

[[agents]]
id = "open-echo"
name = "Open echo"
owner = "alice"
auth = "none"
backend = { type = "python", callable = "echo_agent:reply" }
"""
SESSIONS, SESSIONS_TOTAL = 3, 8
STREAMS, STREAMS_TOTAL = 2, 5
BODY_BYTES = 64 * 1024
"""In-flight request-body bytes per principal (the total is 8 times it)."""
HELD_BODIES, HELD_BYTES = 3, 20 * 1024
"""Unfinished bodies principal A holds, and the bytes each has sent (60 KiB of its 64 KiB)."""
BUDGET_ENV = {
    "HIVEGATE_MCP__MAX_SESSIONS_PER_PRINCIPAL": str(SESSIONS),
    "HIVEGATE_MCP__MAX_SESSIONS_TOTAL": str(SESSIONS_TOTAL),
    "HIVEGATE_MCP__MAX_LISTEN_STREAMS_PER_PRINCIPAL": str(STREAMS),
    "HIVEGATE_MCP__MAX_LISTEN_STREAMS_TOTAL": str(STREAMS_TOTAL),
    "HIVEGATE_MCP__MAX_GET_STREAMS_PER_PRINCIPAL": str(STREAMS),
    "HIVEGATE_MCP__MAX_GET_STREAMS_TOTAL": str(STREAMS_TOTAL),
    "HIVEGATE_MCP__BUDGET_RETRY_AFTER_SECONDS": "5",
    "HIVEGATE_MCP__MAX_BODY_BYTES_IN_FLIGHT_PER_PRINCIPAL": str(BODY_BYTES),
    "HIVEGATE_MCP__MAX_BODY_BYTES_IN_FLIGHT_TOTAL": str(8 * BODY_BYTES),
    # anonymous callers may hold 6 of the 8 sessions (the process-total test has them hold 5)
    "HIVEGATE_MCP__ANONYMOUS_BUDGET_SHARE": "0.75",
}
RSS_BOUND_MIB = 300
"""What the server may use here (measured ~110-130 MiB; docs/performance.md "Memory under attack")."""
LEGACY = "2025-11-25"
MODERN = "2026-07-28"
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
PYTHONPATH = os.pathsep.join([str(ROOT / "src"), str(ROOT / "examples")])
EXAMPLES = (str(ROOT / "examples"),)
"""This checkout's sources first (not whichever hivegate is installed), and the demo agents."""
WAIT_SECONDS = 30
INTERNAL_ERROR = -32603


@dataclass(frozen=True)
class World:
    gateway: GatewayProcess
    alice: str
    bob: str


@contextmanager
def serve_world(folder: Path, env: dict[str, str]) -> Generator[World]:
    """Serve :data:`AGENTS` from a SQLite registry in ``folder`` with alice and bob and an ``oag_`` key each."""
    config = folder / "agents.toml"
    config.write_text(AGENTS, encoding="utf-8")
    database_url = f"sqlite+aiosqlite:///{folder / 'hivegate.db'}"
    cli_at_once(
        database_url,
        (("users", "create", "alice", "--password-stdin"), "alice's password\n"),
        (("users", "create", "bob", "--password-stdin"), "bob's password\n"),
        pythonpath=EXAMPLES,
    )
    alice, bob, _ = cli_at_once(
        database_url,
        (("keys", "create", "--user", "alice"), ""),
        (("keys", "create", "--user", "bob"), ""),
        (("agents", "apply", str(config)), ""),
        pythonpath=EXAMPLES,
    )
    with run_gateway(config, database_url=database_url, env=env) as gateway:
        yield World(gateway, first_line(alice), first_line(bob))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with serve_world(tmp_path_factory.mktemp("exhaustion"), {"PYTHONPATH": PYTHONPATH, **BUDGET_ENV}) as served:
        yield served


def _rss_mib(pid: int) -> float:
    """The process's resident set (``VmRSS`` of /proc/PID/status) in MiB."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _http(world: World, key: str | None = None, address: str = "127.0.0.1") -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    transport = httpx.AsyncHTTPTransport(local_address=address)
    return httpx.AsyncClient(base_url=world.gateway.url, headers=headers, transport=transport, timeout=WAIT_SECONDS)


def _refusal(response: httpx.Response, status: int, code: str, budget: str) -> None:
    """A JSON-RPC error with ``status``, hivegate's ``code`` and ``Retry-After``."""
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/json")
    assert response.headers["retry-after"] == "5"
    body = response.json()
    assert body["jsonrpc"] == "2.0"
    assert body["id"] is None
    assert body["error"]["code"] == INTERNAL_ERROR
    assert body["error"]["data"]["code"] == code
    assert body["error"]["data"]["budget"] == budget


async def _initialize(http: httpx.AsyncClient, path: str) -> httpx.Response:
    return await http.post(path, content=json.dumps(INITIALIZE), headers=HEADERS)


@asynccontextmanager
async def _session(http: httpx.AsyncClient, path: str) -> AsyncGenerator[dict[str, str]]:
    """An initialized handshake-era session (its request headers); ``DELETE`` at exit."""
    opened = await _initialize(http, path)
    assert opened.status_code == 200, opened.text
    headers = {**HEADERS, "Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": LEGACY}
    notified = await http.post(
        path, content=json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}), headers=headers
    )
    assert notified.status_code == 202
    try:
        yield headers
    finally:
        await http.delete(path, headers=headers)


@asynccontextmanager
async def _get_stream(http: httpx.AsyncClient, path: str, session: dict[str, str]) -> AsyncGenerator[httpx.Response]:
    """The session's GET (SSE) stream, open (200) until exit, when the client disconnects."""
    async with http.stream("GET", path, headers={**session, "Accept": "text/event-stream"}) as response:
        yield response


def _listen_body() -> str:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"},
    }
    params = {"notifications": {"toolsListChanged": True}, "_meta": meta}
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": params})


@asynccontextmanager
async def _listen(http: httpx.AsyncClient, path: str) -> AsyncGenerator[httpx.Response]:
    """A ``subscriptions/listen`` stream; when admitted, open (its ack read) until exit."""
    headers = {**HEADERS, "MCP-Protocol-Version": MODERN, "Mcp-Method": "subscriptions/listen"}
    async with http.stream("POST", path, content=_listen_body(), headers=headers) as response:
        if response.status_code != 200:
            await response.aread()
            yield response
            return
        lines = response.aiter_lines()  # kept until exit: a dropped line iterator closes the response
        with anyio.fail_after(WAIT_SECONDS):
            while "notifications/subscriptions/acknowledged" not in await anext(lines):
                pass
        yield response


async def call_echo(url: str, key: str | None, mode: str, address: str = "127.0.0.1") -> str:
    """``initialize`` (legacy) or discovery (2026-07-28), then ``tools/call`` of the first agent tool (SDK client)."""
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    transport = httpx2.AsyncHTTPTransport(local_address=address)
    async with (
        httpx2.AsyncClient(headers=headers, transport=transport, timeout=WAIT_SECONDS) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,  # type: ignore[arg-type]
    ):
        # the first agent tool (on /mcp, discover_agents comes first and is not an agent's)
        tool = next(t.name for t in (await client.list_tools()).tools if t.name != "discover_agents")
        result = await client.call_tool(tool, {"message": "still served"})
        assert not result.is_error, result
        content = result.content[0]
        assert isinstance(content, TextContent)
        return content.text


async def _retry_until_admitted(http: httpx.AsyncClient, path: str, open_stream: Any) -> None:
    """Open a stream until the server has noticed an earlier disconnect (bounded: a few seconds)."""
    with anyio.fail_after(WAIT_SECONDS):
        for _ in range(200):
            async with open_stream() as response:
                if response.status_code == 200:
                    return
            await anyio.sleep(0.05)
    raise AssertionError(f"{path}: the released slot never came back")


async def test_one_principal_at_every_budget_leaves_another_served(world: World) -> None:
    """Issue 7 item 2: alice at her session, GET-stream and listen-stream budgets; bob initializes and calls."""
    rss_before = _rss_mib(world.gateway.process.pid)
    path = "/alice-echo/mcp"
    async with _http(world, world.alice) as alice, _http(world, world.bob) as bob, AsyncExitStack() as held:
        sessions = [await held.enter_async_context(_session(alice, path)) for _ in range(SESSIONS)]
        _refusal(await _initialize(alice, path), 429, "budget_exceeded", "sessions")
        _refusal(await _initialize(alice, "/mcp"), 429, "budget_exceeded", "sessions")  # one budget over endpoints

        for session in sessions[:STREAMS]:
            stream = await held.enter_async_context(_get_stream(alice, path, session))
            assert stream.status_code == 200
        async with _get_stream(alice, path, sessions[-1]) as refused:
            await refused.aread()
            _refusal(refused, 429, "budget_exceeded", "get_streams")

        for _ in range(STREAMS):
            listening = await held.enter_async_context(_listen(alice, path))
            assert listening.status_code == 200
        async with _listen(alice, "/mcp") as refused:
            _refusal(refused, 429, "budget_exceeded", "listen_streams")

        # bob: the official client initializes and calls, on his agent (both eras) and on /mcp.
        with anyio.fail_after(WAIT_SECONDS):
            assert await call_echo(f"{world.gateway.url}/bob-echo/mcp", world.bob, "legacy") == "still served"
            assert await call_echo(f"{world.gateway.url}/bob-echo/mcp", world.bob, MODERN) == "still served"
            assert await call_echo(f"{world.gateway.url}/mcp", world.bob, "legacy") == "still served"
        async with _session(bob, "/bob-echo/mcp") as session, _get_stream(bob, "/bob-echo/mcp", session) as stream:
            assert stream.status_code == 200
            async with _listen(bob, "/mcp") as listening:
                assert listening.status_code == 200

        rss = _rss_mib(world.gateway.process.pid)
        assert rss < RSS_BOUND_MIB, (rss_before, rss)

        # The slots come back: DELETE a session, disconnect a GET stream and a listen stream.
        await held.aclose()
    async with _http(world, world.alice) as alice, AsyncExitStack() as held:
        sessions = [await held.enter_async_context(_session(alice, path)) for _ in range(SESSIONS)]
        await _retry_until_admitted(alice, path, lambda: _get_stream(alice, path, sessions[0]))
        await _retry_until_admitted(alice, path, lambda: _listen(alice, path))


async def test_anonymous_callers_are_budgeted_by_address(world: World) -> None:
    """Issue 7 item 2: on an ``auth = "none"`` agent, 127.0.0.1 at its session budget; 127.0.0.2 still served."""
    path = "/open-echo/mcp"
    async with _http(world, address="127.0.0.1") as first, _http(world, address="127.0.0.2") as second:
        async with AsyncExitStack() as held:
            for _ in range(SESSIONS):
                await held.enter_async_context(_session(first, path))
            _refusal(await _initialize(first, path), 429, "budget_exceeded", "sessions")
            with anyio.fail_after(WAIT_SECONDS):
                assert await call_echo(world.gateway.url + path, None, "legacy", "127.0.0.2") == "still served"
            async with _session(second, path) as session, _get_stream(second, path, session) as stream:
                assert stream.status_code == 200
        # DELETE returned every slot of 127.0.0.1.
        async with _session(first, path):
            pass


async def test_the_process_total_is_503_for_a_newcomer(world: World) -> None:
    """Issue 7 item 2: once every session of the process is taken, a principal holding none gets 503."""
    async with (
        _http(world, world.alice) as alice,
        _http(world, address="127.0.0.1") as first,
        _http(world, address="127.0.0.2") as second,
        _http(world, world.bob) as bob,
        AsyncExitStack() as held,
    ):
        for client, path, count in ((alice, "/mcp", SESSIONS), (first, "/open-echo/mcp", SESSIONS)):
            for _ in range(count):
                await held.enter_async_context(_session(client, path))
        for _ in range(SESSIONS_TOTAL - 2 * SESSIONS):
            await held.enter_async_context(_session(second, "/open-echo/mcp"))
        _refusal(await _initialize(bob, "/bob-echo/mcp"), 503, "capacity_exhausted", "sessions")
        # Streams have their own budgets: bob still listens, and 2026-07-28 calls need no session.
        async with _listen(bob, "/bob-echo/mcp") as listening:
            assert listening.status_code == 200
        with anyio.fail_after(WAIT_SECONDS):
            assert await call_echo(f"{world.gateway.url}/bob-echo/mcp", world.bob, MODERN) == "still served"
    async with _http(world, world.bob) as bob, _session(bob, "/bob-echo/mcp"):
        pass


@asynccontextmanager
async def _unfinished_body(world: World, key: str, path: str) -> AsyncGenerator[None]:
    """A POST on a raw connection that declares 1 MiB and sends :data:`HELD_BYTES`; closed at exit."""
    url = httpx.URL(world.gateway.url)
    assert url.port is not None
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {url.host}:{url.port}\r\nAuthorization: Bearer {key}\r\n"
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        "Content-Length: 1048576\r\n\r\n"
    )
    with anyio.fail_after(WAIT_SECONDS):
        stream: anyio.abc.SocketStream = await anyio.connect_tcp(url.host, url.port)
    async with stream:
        with anyio.fail_after(WAIT_SECONDS):
            await stream.send(head.encode("ascii") + b" " * HELD_BYTES)
        yield


async def _padded_ping(http: httpx.AsyncClient, path: str) -> httpx.Response:
    """A complete 2025-11-25 ``ping`` padded with 8 KiB of whitespace (more than A's budget has left)."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}) + " " * 8 * 1024
    return await http.post(path, content=body, headers=HEADERS)


async def _ping_until(http: httpx.AsyncClient, path: str, *, refused: bool) -> httpx.Response:
    """Send :func:`_padded_ping` until it is (or is no longer) refused with 429 (bounded: a few seconds)."""
    with anyio.fail_after(WAIT_SECONDS):
        for _ in range(200):
            response = await _padded_ping(http, path)
            if (response.status_code == 429) == refused:
                return response
            await anyio.sleep(0.05)
    raise AssertionError(f"{path}: the padded ping was never {'refused' if refused else 'admitted'}")


async def test_request_bodies_in_flight_are_budgeted_in_bytes_per_principal(world: World) -> None:
    """Issue 7 item 2 ("memory is bounded in bytes, per principal"): alice's unfinished bodies fill her
    in-flight byte budget, her next body gets 429 ``budget_exceeded``, bob's calls are served, and
    once her connections close she is served again (before: connections × ``server.max_body_bytes``)."""
    path = "/alice-echo/mcp"
    async with _http(world, world.alice) as alice:
        async with AsyncExitStack() as held:
            for _ in range(HELD_BODIES):
                await held.enter_async_context(_unfinished_body(world, world.alice, path))
            refused = await _ping_until(alice, path, refused=True)  # the server has read the held bytes
            _refusal(refused, 429, "budget_exceeded", "body_bytes")
            assert refused.json()["error"]["data"]["limit"] == BODY_BYTES
            _refusal(await _padded_ping(alice, "/mcp"), 429, "budget_exceeded", "body_bytes")  # one budget
            with anyio.fail_after(WAIT_SECONDS):
                assert await call_echo(f"{world.gateway.url}/bob-echo/mcp", world.bob, "legacy") == "still served"
                assert await call_echo(f"{world.gateway.url}/bob-echo/mcp", world.bob, MODERN) == "still served"
                assert await call_echo(f"{world.gateway.url}/mcp", world.bob, MODERN) == "still served"
        await _ping_until(alice, path, refused=False)  # the server has seen the connections close
        with anyio.fail_after(WAIT_SECONDS):
            assert await call_echo(f"{world.gateway.url}{path}", world.alice, "legacy") == "still served"
            assert await call_echo(f"{world.gateway.url}{path}", world.alice, MODERN) == "still served"
