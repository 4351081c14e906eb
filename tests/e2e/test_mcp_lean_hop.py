"""The lean hop to a 2026-07-28 HTTP upstream (``backends/upstream_http.py``) through a running gateway,
against a scripted upstream on loopback: it speaks just enough MCP (``server/discover``, ``tools/list``)
for the gateway's SDK client to connect, and answers each ``tools/call`` as the test says.

Found while building the hop: a failed POST dropped the agent's upstream client, and two failures within
10 s of connecting started the restart back-off, so the next good call was refused. A POST's failure
is its own call's only: the 2026-07-28 wire has no connection to lose.
"""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import orjson
import pytest
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import TextContent

from tests.e2e.registry_cli import create_user_with_key, run_cli
from tests.gateway_process import GatewayProcess, run_gateway
from tests.upstreams.scripted_http import http_requests

TIMEOUT = 60
MODERN = "2026-07-28"
TOOLS = [{"name": name, "inputSchema": {"type": "object"}} for name in ("good", "broken", "bomb")]


class ScriptedUpstream:
    """Answers POSTs by JSON-RPC method; counts them. With ``valid_lists=False`` its ``tools/list`` result
    lacks the cache hints 2026-07-28 requires (``ttlMs``, ``cacheScope``)."""

    def __init__(self, *, valid_lists: bool = True) -> None:
        self.methods: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.valid_lists = valid_lists

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async for request_line, headers, body in http_requests(reader):
                if not request_line.startswith("POST"):
                    writer.write(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n")
                    continue
                message = orjson.loads(body)
                self.headers.append(headers)
                method = message.get("method", "")
                self.methods.append(method if method != "tools/call" else f"tools/call {message['params']['name']}")
                if "id" not in message:
                    writer.write(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n")
                elif method == "tools/call" and message["params"]["name"] == "broken":
                    # Declares more than it sends, then hangs up: the POST fails mid-body.
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{}")
                    await writer.drain()
                    return
                elif method == "tools/call" and message["params"]["name"] == "bomb":
                    # 256 MiB of zeros, gzip-compressed to about 256 KB, whatever the request's Accept-Encoding.
                    payload = orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"pad": ""}})
                    bomb = gzip.compress(payload[:-2] + b" " * (256 << 20) + payload[-2:], compresslevel=1)
                    head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: gzip\r\n"
                    writer.write(f"{head}content-length: {len(bomb)}\r\n\r\n".encode() + bomb)
                else:
                    self._answer(
                        writer,
                        message["id"],
                        self._result(method, self.valid_lists),
                        cookie=method == "server/discover",
                    )
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    @staticmethod
    def _result(method: str, valid_lists: bool) -> dict[str, Any] | None:
        hints = {"ttlMs": 0, "cacheScope": "private"}
        if method == "server/discover":
            return {"supportedVersions": [MODERN], "capabilities": {"tools": {}}, "resultType": "complete", **hints}
        if method == "tools/list":
            return {"tools": TOOLS, "resultType": "complete", **(hints if valid_lists else {})}
        if method == "tools/call":
            return {"content": [{"type": "text", "text": "ok"}], "resultType": "complete"}
        return None

    @staticmethod
    def _answer(writer: asyncio.StreamWriter, request_id: Any, result: dict[str, Any] | None, cookie: bool) -> None:
        if result is None:
            payload = {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "Method not found"}}
        else:
            payload = {"jsonrpc": "2.0", "id": request_id, "result": result}
        body = orjson.dumps(payload)
        extra = "set-cookie: sess=EVIL; Path=/\r\n" if cookie else ""
        head = f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{extra}content-length: {len(body)}\r\n\r\n"
        writer.write(head.encode() + body)


@asynccontextmanager
async def client_of(url: str, key: str, mode: str = MODERN) -> AsyncGenerator[McpClient]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=TIMEOUT) as http,
        McpClient(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client


@asynccontextmanager
async def fronted(
    upstream: ScriptedUpstream, folder: Path, mode: str = MODERN
) -> AsyncGenerator[tuple[McpClient, GatewayProcess]]:
    """A gateway whose agent ``scripted`` fronts ``upstream``, and an official client of that agent."""
    server = await asyncio.start_server(upstream.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        database_url = f"sqlite+aiosqlite:///{folder / 'hivegate.db'}"
        config = folder / "agents.toml"
        config.write_text(
            f'[[agents]]\nid = "scripted"\nname = "Scripted"\nowner = "alice"\n'
            f'backend = {{ type = "mcp", url = "http://127.0.0.1:{port}/mcp" }}\n',
            encoding="utf-8",
        )
        alice = await anyio.to_thread.run_sync(create_user_with_key, database_url, "alice")
        await anyio.to_thread.run_sync(run_cli, database_url, "agents", "apply", str(config))
        with run_gateway(None, database_url=database_url) as gateway:
            async with client_of(f"{gateway.url}/scripted/mcp", alice, mode) as client:
                yield client, gateway


async def test_a_failed_post_fails_its_own_call_and_the_next_call_goes_on(tmp_path: Path) -> None:
    upstream = ScriptedUpstream()
    async with fronted(upstream, tmp_path) as (client, _):
        with anyio.fail_after(TIMEOUT):
            first = await client.call_tool("good", {})
            for _ in range(2):
                with pytest.raises(MCPError) as failed:
                    await client.call_tool("broken", {})
                assert failed.value.error.data == {"code": "agent_service_unavailable"}
            after = await client.call_tool("good", {})
    for result in (first, after):
        block = result.content[0]
        assert isinstance(block, TextContent)
        assert block.text == "ok"
    assert upstream.methods.count("server/discover") == 1, upstream.methods  # the client was kept
    assert upstream.methods.count("tools/call broken") == 2


async def test_an_upstream_result_that_does_not_validate_is_not_the_callers_invalid_params(tmp_path: Path) -> None:
    """Found with this scripted upstream: its list result without the 2026-07-28 cache hints failed the
    SDK client's check, and the caller got -32602 "Invalid request parameters" for a request that was
    fine. It is the upstream's failure: ``agent_service_unavailable``."""
    async with fronted(ScriptedUpstream(valid_lists=False), tmp_path) as (client, _):
        with anyio.fail_after(TIMEOUT), pytest.raises(MCPError) as failed:
            await client.call_tool("good", {})
    assert failed.value.error.data == {"code": "agent_service_unavailable"}


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident memory (VmHWM), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


@pytest.mark.parametrize("mode", [MODERN, "legacy"])
async def test_a_compressed_bomb_is_refused_without_growing_the_gateway(tmp_path: Path, mode: str) -> None:
    """From the attack trial: the SDK client's transport counted the bytes on the wire, and a 1 GiB gzip
    bomb took 3.2 GiB of the gateway's memory. The gateway now asks for no encoding there and refuses a
    compressed answer unread; the lean hop counts decoded bytes. Here 256 MiB decompressed, against
    the default 8 MiB limit: both eras get ``agent_service_unavailable``, and the gateway's peak memory
    does not grow by the bomb."""
    async with fronted(ScriptedUpstream(), tmp_path, mode) as (client, gateway):
        pid = gateway.process.pid
        with anyio.fail_after(TIMEOUT):
            await client.call_tool("good", {})
            before = peak_rss_mib(pid)
            with pytest.raises(MCPError) as failed:
                await client.call_tool("bomb", {})
            assert failed.value.error.data == {"code": "agent_service_unavailable"}
            after = await client.call_tool("good", {})
        assert isinstance(after.content[0], TextContent)
        assert peak_rss_mib(pid) - before < 64, (before, peak_rss_mib(pid))


@pytest.mark.parametrize("mode", [MODERN, "legacy"])
async def test_an_upstreams_cookie_never_follows_a_caller(tmp_path: Path, mode: str) -> None:
    """From the attack trial: the SDK client's HTTP client kept an upstream's ``Set-Cookie`` and sent it
    with every later request of every caller of the agent. Neither path keeps one now."""
    upstream = ScriptedUpstream()  # its server/discover answer sets sess=EVIL
    async with fronted(upstream, tmp_path, mode) as (client, _):
        with anyio.fail_after(TIMEOUT):
            for _ in range(3):
                await client.call_tool("good", {})
    assert upstream.methods.count("tools/call good") == 3
    assert not [h for h in upstream.headers if "cookie" in h], upstream.headers
