"""The lean paths answer every lean method exactly as the SDK's own dispatch of the same server.

In process, per method of ``FAST_METHODS`` (at 2026-07-28) and of ``LEGACY_FAST_METHODS`` (at
each handshake revision): one agent runtime, the request served once by hivegate's lean path
(:func:`hivegate.mcp.fastpath.serve_fast`, :func:`hivegate.mcp.legacy_fastpath.serve_legacy_fast`,
their JSON bodies captured from ``send``) and once by the SDK's serving loop
(``mcp.server.runner.serve_dual_era_loop`` over in-memory streams: the envelope opens a modern
connection, ``initialize`` a handshake one), and the two JSON-RPC responses compared whole.
Nothing is ignored: both carry the same ``result`` (or ``error``) and ``id``.

This is the check to run first on an SDK upgrade (docs/sdk-bridge.md): the lean paths reuse the
SDK's validation and result shaping through :mod:`hivegate.mcp.sdk_bridge`, and this proves
the reuse still adds up to what the SDK does.
"""

from __future__ import annotations

import tomllib
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.lowlevel.server import Server
from mcp.server.runner import serve_dual_era_loop
from mcp.shared.inbound import NAME_BEARING_METHODS
from mcp.shared.message import SessionMessage
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    PaginatedRequestParams,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_MODERN_VERSION
from starlette.types import Message

from hivegate.agents.loader import parse_agents
from hivegate.agents.registry import AgentRegistry
from hivegate.mcp.fastpath import FAST_METHODS, serve_fast
from hivegate.mcp.host import AgentHost
from hivegate.mcp.legacy_fastpath import LEGACY_FAST_METHODS, serve_legacy_fast
from hivegate.mcp.runtime import AgentRuntime
from hivegate.mcp.sdk_bridge import run_handler
from hivegate.settings import load_settings
from hivegate.storage.memory.agents import MemoryAgentStore

WAIT_SECONDS = 10

AGENT = """
[[agents]]
id = "parity"
name = "Parity"
description = "Answers in both eras."
version = "1.2.3"
owner = "alice"
auth = "none"
backend = { type = "python", callable = "parity_agent:reply" }
cache = { ttl_ms = 30000, scope = "public", methods = { "resources/read" = { ttl_ms = 5000, scope = "private" } } }

[[agents.skills]]
id = "shout"
name = "Shout"
description = "Say it loudly."
expose_as_tool = true

[[agents.prompts]]
name = "greet"
description = "Greet someone."
arguments = [{ name = "who", description = "Whom", required = true, completions = ["bob", "bea", "carl"] }]
messages = [{ role = "user", text = "Say hello to {who}" }]

[[agents.resources]]
uri = "parity://readme"
name = "readme"
mime_type = "text/markdown"
text = "# Parity"

[[agents.resource_templates]]
uri_template = "item://{code}"
name = "items"
text = "item {code}"
completions = { code = ["a1", "a2", "b1"] }
"""

REQUESTS: dict[str, dict[str, Any]] = {
    "server/discover": {},
    "ping": {},
    "tools/list": {},
    "tools/call": {"name": "parity", "arguments": {"message": "hello there"}},
    "resources/list": {},
    "resources/read": {"uri": "parity://readme"},
    "resources/templates/list": {},
    "prompts/list": {},
    "prompts/get": {"name": "greet", "arguments": {"who": "bob"}},
    "completion/complete": {
        "ref": {"type": "ref/prompt", "name": "greet"},
        "argument": {"name": "who", "value": "b"},
    },
}
"""One request per lean method (both sets are covered: see test_every_lean_method_has_a_request)."""

FAILING: dict[str, tuple[str, dict[str, Any]]] = {
    "unknown tool": ("tools/call", {"name": "nope", "arguments": {}}),
    "unknown resource": ("resources/read", {"uri": "parity://nope"}),
    "missing prompt argument": ("prompts/get", {"name": "greet", "arguments": {}}),
    "params of the wrong shape": ("prompts/get", {"name": "greet", "arguments": "who=bob"}),
}
"""Requests that fail (a handler's error, the params model's): the error objects must agree too."""

ENVELOPE = {
    PROTOCOL_VERSION_META_KEY: LATEST_MODERN_VERSION,
    CLIENT_INFO_META_KEY: {"name": "parity-test", "version": "1"},
    CLIENT_CAPABILITIES_META_KEY: {},
}


@asynccontextmanager
async def _agent(tmp_path: Path) -> AsyncGenerator[AgentRuntime]:
    """The parity agent's runtime, in a running host (entered and left in the test's own task)."""
    (tmp_path / "parity_agent.py").write_text(
        "def reply(invocation):\n    return 'you said: ' + invocation.message\n", encoding="utf-8"
    )
    registry = AgentRegistry(MemoryAgentStore())
    await registry.apply(parse_agents(tomllib.loads(AGENT), base_dir=tmp_path))
    host = AgentHost(registry, load_settings())
    async with host.running():
        found = await host.runtime("parity")
        assert found is not None
        yield found


class _Capture:
    """An ASGI ``send`` that keeps the response (status and JSON body)."""

    def __init__(self) -> None:
        self.status: int | None = None
        self.body = b""

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
        else:
            self.body += message.get("body", b"")

    def json(self) -> dict[str, Any]:
        return orjson.loads(self.body)


async def _lean_modern(runtime: AgentRuntime, method: str, params: dict[str, Any]) -> dict[str, Any]:
    decoded = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": ENVELOPE}}
    headers = {"mcp-protocol-version": LATEST_MODERN_VERSION, "mcp-method": method}
    if method in NAME_BEARING_METHODS and isinstance(params.get(NAME_BEARING_METHODS[method]), str):
        headers["mcp-name"] = params[NAME_BEARING_METHODS[method]]
    send = _Capture()
    await serve_fast(runtime, decoded, list(headers.items()), headers, send)
    return send.json()


async def _lean_legacy(runtime: AgentRuntime, version: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    send = _Capture()
    await serve_legacy_fast(runtime, message, version, {"mcp-session-id": "parity-session"}, send)
    assert send.status == 200
    return send.json()


async def _reply(inbound: MemoryObjectReceiveStream[SessionMessage], request_id: int) -> dict[str, Any]:
    async for item in inbound:
        message = item.message
        if not isinstance(message, JSONRPCNotification) and message.id == request_id:
            if isinstance(message, JSONRPCResponse):
                return {"jsonrpc": "2.0", "id": request_id, "result": message.result}
            return message.model_dump(by_alias=True, mode="json", exclude_none=True)
    raise AssertionError(f"the SDK closed the stream without answering request {request_id}")


async def _sdk(runtime: AgentRuntime, version: str | None, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return await _sdk_answer(runtime.surface.server, version, method, params)


async def _sdk_answer(server: Server[Any], version: str | None, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The SDK's answer over its own serving loop: modern when ``version`` is None, else after a handshake at it."""
    to_server: MemoryObjectSendStream[SessionMessage | Exception]
    to_server, server_reads = anyio.create_memory_object_stream[SessionMessage | Exception](8)
    server_writes, from_server = anyio.create_memory_object_stream[SessionMessage](8)
    with anyio.fail_after(WAIT_SECONDS):
        async with anyio.create_task_group() as tg, to_server, from_server:
            tg.start_soon(lambda: serve_dual_era_loop(server, server_reads, server_writes, lifespan_state={}))
            if version is None:
                params = {**params, "_meta": ENVELOPE}
            else:
                opening = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "p", "version": "1"}}
                await to_server.send(
                    SessionMessage(JSONRPCRequest(jsonrpc="2.0", id=0, method="initialize", params=opening))
                )
                initialized = await _reply(from_server, 0)
                assert initialized["result"]["protocolVersion"] == version
                await to_server.send(
                    SessionMessage(JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized"))
                )
            await to_server.send(SessionMessage(JSONRPCRequest(jsonrpc="2.0", id=1, method=method, params=params)))
            return await _reply(from_server, 1)
    raise AssertionError("unreachable: the task group returned without an answer")


def test_every_lean_method_has_a_request() -> None:
    assert set(FAST_METHODS) | set(LEGACY_FAST_METHODS) == set(REQUESTS)


@pytest.mark.parametrize("method", sorted(FAST_METHODS))
async def test_modern_lean_path_answers_as_the_sdk(tmp_path: Path, method: str) -> None:
    async with _agent(tmp_path) as runtime:
        lean = await _lean_modern(runtime, method, REQUESTS[method])
        sdk = await _sdk(runtime, None, method, REQUESTS[method])
    assert "result" in sdk, sdk
    assert lean == sdk


@pytest.mark.parametrize("version", HANDSHAKE_PROTOCOL_VERSIONS)
@pytest.mark.parametrize("method", sorted(LEGACY_FAST_METHODS))
async def test_legacy_lean_path_answers_as_the_sdk(tmp_path: Path, method: str, version: str) -> None:
    async with _agent(tmp_path) as runtime:
        lean = await _lean_legacy(runtime, version, method, REQUESTS[method])
        sdk = await _sdk(runtime, version, method, REQUESTS[method])
    assert "result" in sdk, sdk
    assert lean == sdk


@pytest.mark.parametrize("case", sorted(FAILING))
async def test_failures_are_worded_as_the_sdk_words_them(tmp_path: Path, case: str) -> None:
    method, params = FAILING[case]
    async with _agent(tmp_path) as runtime:
        modern = await _lean_modern(runtime, method, params), await _sdk(runtime, None, method, params)
        legacy = {
            version: (
                await _lean_legacy(runtime, version, method, params),
                await _sdk(runtime, version, method, params),
            )
            for version in HANDSHAKE_PROTOCOL_VERSIONS
        }
    assert "error" in modern[1], modern[1]
    assert modern[0] == modern[1]
    for version, (lean, sdk) in legacy.items():
        assert lean == sdk, version


_MODERN_ONLY = {"ttlMs": 5, "cacheScope": "private", "resultType": "complete"}
"""Result fields 2026-07-28 defines (SEP-2549, SEP-2322) and the handshake revisions do not."""


async def _undefined_fields(ctx: Any, params: Any) -> dict[str, Any]:
    return {"tools": [{"name": "t", "inputSchema": {"type": "object"}, "madeUp": 1}], "madeUp": 2, **_MODERN_ONLY}


@pytest.mark.parametrize("version", [*HANDSHAKE_PROTOCOL_VERSIONS, LATEST_MODERN_VERSION])
async def test_fields_the_revision_does_not_define_are_dropped_on_both_paths(version: str) -> None:
    """The SDK's per-version result sieve runs on the lean paths too (issue 8: the modern one skipped it)."""
    server = Server[Any]("sieve")
    server.add_request_handler("tools/list", PaginatedRequestParams, _undefined_fields)
    modern = version == LATEST_MODERN_VERSION
    params: dict[str, Any] = {"_meta": ENVELOPE} if modern else {}
    lean = await run_handler(server, "tools/list", params, 1, version)
    sdk = await _sdk_answer(server, None if modern else version, "tools/list", {})
    assert lean == sdk["result"]
    assert "madeUp" not in lean
    assert "madeUp" not in lean["tools"][0]
    for field in _MODERN_ONLY:
        assert (field in lean) is modern, field  # never on a handshake-era wire
