"""The lean hop to a 2026-07-28 HTTP upstream (``backends.upstream_http.UpstreamPost``) against a scripted
upstream on loopback (a fake HTTP server that answers each request as the test says, not a mock).

What it sends: the envelope and headers the SDK client sends (Spec: MCP 2026-07-28 basic/transports,
SEP-2243 ``Mcp-Method``/``Mcp-Name``/``Mcp-Param-*``, SEP-2575 ``_meta`` envelope) and the agent's own
headers. How it reads an answer: as the SDK client's Streamable HTTP transport does (a bare 404 is
method not found, another bare error status an internal error, 202/redirect/odd content type an
invalid request, anything not the response to this request a parse error), with the agent's result
limit and timeout.
"""

from __future__ import annotations

import asyncio
import gc
import socket
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR

from hivegate.backends.upstream_http import ResultTooLargeError, UpstreamPost
from tests.upstreams.scripted_http import http_requests

TIMEOUT = 10
VERSION = "2026-07-28"
Answer = Callable[[dict[str, str], bytes, asyncio.StreamWriter], Awaitable[None]]


class Upstream:
    """A loopback HTTP/1.1 server whose answer to each POST is ``answer``; it records what it was sent."""

    def __init__(self) -> None:
        self.answer: Answer = ok({"content": [{"type": "text", "text": "hi"}]})
        self.seen: list[tuple[dict[str, str], dict[str, Any]]] = []
        self.url = ""

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async for _, headers, body in http_requests(reader):
                self.seen.append((headers, orjson.loads(body)))
                await self.answer(headers, body, writer)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()


@asynccontextmanager
async def upstream() -> AsyncGenerator[Upstream]:
    fake = Upstream()
    server = await asyncio.start_server(fake.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    fake.url = f"http://127.0.0.1:{port}/mcp"
    async with server:
        yield fake


def raw(status: str, headers: dict[str, str], body: bytes) -> Answer:
    async def answer(_: dict[str, str], __: bytes, writer: asyncio.StreamWriter) -> None:
        lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in headers.items()), f"content-length: {len(body)}"]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)

    return answer


def request_id(body: bytes) -> Any:
    return orjson.loads(body)["id"]


def ok(result: dict[str, Any], *, content_type: str = "application/json") -> Answer:
    async def answer(_: dict[str, str], body: bytes, writer: asyncio.StreamWriter) -> None:
        payload = orjson.dumps(
            {"jsonrpc": "2.0", "id": request_id(body), "result": {"resultType": "complete", **result}}
        )
        await raw("200 OK", {"content-type": content_type}, payload)({}, body, writer)

    return answer


@asynccontextmanager
async def hop(fake: Upstream, **options: Any) -> AsyncGenerator[UpstreamPost]:
    settings_: dict[str, Any] = {"timeout_seconds": 5.0, "max_result_bytes": 65_536, "on_cut": lambda: None}
    settings_.update(options)
    headers = {"x-agent": "agent's own"}
    async with UpstreamPost(fake.url, VERSION, headers, {"name": "hivegate", "version": "0"}, **settings_) as post:
        yield post


async def test_a_call_carries_the_envelope_the_headers_and_the_agents_own_headers() -> None:
    schema = {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}
    async with upstream() as fake, hop(fake) as post:
        with anyio.fail_after(TIMEOUT):
            params = {"name": "weather", "arguments": {"region": "eu-west"}, "_meta": {"k": "v"}}
            result = await post.request("tools/call", params, schema)
    assert isinstance(result, types.CallToolResult)
    headers, sent = fake.seen[0]
    assert headers["mcp-protocol-version"] == VERSION
    assert headers["mcp-method"] == "tools/call"
    assert headers["mcp-name"] == "weather"
    assert headers["mcp-param-region"] == "eu-west"
    assert headers["x-agent"] == "agent's own"
    assert headers["accept"] == "application/json, text/event-stream"
    assert sent["method"] == "tools/call"
    assert sent["params"]["arguments"] == {"region": "eu-west"}
    meta = sent["params"]["_meta"]
    assert meta["k"] == "v"
    assert meta["io.modelcontextprotocol/protocolVersion"] == VERSION
    assert meta["io.modelcontextprotocol/clientInfo"] == {"name": "hivegate", "version": "0"}
    assert meta["io.modelcontextprotocol/clientCapabilities"] == {}


async def test_each_request_has_its_own_id_and_a_reused_connection_serves_many() -> None:
    async with upstream() as fake, hop(fake) as post:
        with anyio.fail_after(TIMEOUT):
            for _ in range(20):
                await post.request("tools/call", {"name": "t", "arguments": {}})
    ids = [sent["id"] for _, sent in fake.seen]
    assert len(set(ids)) == 20


@pytest.mark.parametrize(
    ("answer", "code"),
    [
        (raw("404 Not Found", {}, b""), METHOD_NOT_FOUND),
        (raw("500 Internal Server Error", {"content-type": "text/plain"}, b"boom"), INTERNAL_ERROR),
        (raw("202 Accepted", {}, b""), INVALID_REQUEST),
        (raw("302 Found", {"location": "http://127.0.0.1:9/elsewhere"}, b""), INVALID_REQUEST),
        (raw("200 OK", {"content-type": "text/plain"}, b"hello"), INVALID_REQUEST),
        (raw("200 OK", {"content-type": "application/json"}, b"{not json"), PARSE_ERROR),
        (raw("200 OK", {"content-type": "application/json"}, b'{"jsonrpc":"2.0","id":999,"result":{}}'), PARSE_ERROR),
        (ok({"content": "not a list"}), PARSE_ERROR),
        (raw("200 OK", {"content-type": "text/event-stream"}, b"event: message\ndata: {}\n\n"), PARSE_ERROR),
    ],
    ids=["404", "500", "202", "redirect", "text/plain", "garbage", "another id", "invalid result", "sse without it"],
)
async def test_an_answer_that_is_not_a_result_is_the_sdk_clients_error(answer: Answer, code: int) -> None:
    async with upstream() as fake, hop(fake) as post:
        fake.answer = answer
        with anyio.fail_after(TIMEOUT), pytest.raises(MCPError) as raised:
            await post.request("tools/call", {"name": "t", "arguments": {}})
    assert raised.value.error.code == code


async def test_the_upstreams_json_rpc_error_passes_through_at_any_status() -> None:
    async def answer(_: dict[str, str], body: bytes, writer: asyncio.StreamWriter) -> None:
        error = {"code": -32602, "message": "Unknown tool: t", "data": {"name": "t"}}
        payload = orjson.dumps({"jsonrpc": "2.0", "id": request_id(body), "error": error})
        await raw("400 Bad Request", {"content-type": "application/json"}, payload)({}, body, writer)

    async with upstream() as fake, hop(fake) as post:
        fake.answer = answer
        with anyio.fail_after(TIMEOUT), pytest.raises(MCPError) as raised:
            await post.request("tools/call", {"name": "t", "arguments": {}})
    assert (raised.value.error.code, raised.value.error.message) == (-32602, "Unknown tool: t")
    assert raised.value.error.data == {"name": "t"}


async def test_an_sse_answer_passes_over_what_comes_before_the_response() -> None:
    async def answer(_: dict[str, str], body: bytes, writer: asyncio.StreamWriter) -> None:
        note = orjson.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info"}})
        response = {"jsonrpc": "2.0", "id": request_id(body), "result": {"content": [], "resultType": "complete"}}
        events = (
            b"event: message\ndata: " + note + b"\n\n" + b"event: message\ndata: " + orjson.dumps(response) + b"\n\n"
        )
        await raw("200 OK", {"content-type": "text/event-stream"}, events)({}, body, writer)

    async with upstream() as fake, hop(fake) as post:
        fake.answer = answer
        with anyio.fail_after(TIMEOUT):
            result = await post.request("tools/call", {"name": "t", "arguments": {}})
    assert isinstance(result, types.CallToolResult)
    assert result.content == []


async def test_an_input_required_answer_is_an_input_required_result() -> None:
    async with upstream() as fake, hop(fake) as post:
        fake.answer = ok({"resultType": "input_required", "inputRequests": {}, "requestState": "s"})
        with anyio.fail_after(TIMEOUT):
            result = await post.request("tools/call", {"name": "t", "arguments": {}})
    assert isinstance(result, types.InputRequiredResult)


async def test_an_answer_declared_past_the_limit_is_cut_off_unread() -> None:
    """The upstream declares 5 MB and sends none of it: the hop does not wait for it."""
    cuts: list[int] = []

    async def answer(_: dict[str, str], __: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 5000000\r\n\r\n")

    async with upstream() as fake, hop(fake, on_cut=lambda: cuts.append(1)) as post:
        fake.answer = answer
        with anyio.fail_after(TIMEOUT), pytest.raises(ResultTooLargeError):
            await post.request("tools/call", {"name": "t", "arguments": {}})
    assert cuts == [1]


async def test_a_chunked_answer_past_the_limit_is_cut_off() -> None:
    async def answer(_: dict[str, str], __: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n")
        chunk = b"x" * 65_536
        for _chunk in range(80):  # 5 MB, unless the reader stops first
            writer.write(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
            await writer.drain()

    async with upstream() as fake, hop(fake) as post:
        fake.answer = answer
        with anyio.fail_after(TIMEOUT), pytest.raises(ResultTooLargeError):
            await post.request("tools/call", {"name": "t", "arguments": {}})


async def test_an_upstream_that_never_answers_a_read_times_out_and_a_tool_call_waits() -> None:
    """``timeout_seconds`` bounds each read of an answer, but a ``tools/call``'s, which the agent's invoke
    timeout bounds (docs/backends.md): a tool may work longer than ``timeout_seconds`` before it answers."""

    async def answer(_: dict[str, str], __: bytes, writer: asyncio.StreamWriter) -> None:
        await asyncio.Event().wait()  # until the connection goes

    async with upstream() as fake, hop(fake, timeout_seconds=0.3) as post:
        fake.answer = answer
        with anyio.fail_after(TIMEOUT), pytest.raises(TimeoutError):
            await post.request("resources/read", {"uri": "file:///x"})
        with anyio.move_on_after(1.0) as waited:  # more than three times timeout_seconds
            await post.request("tools/call", {"name": "t", "arguments": {}})
    assert waited.cancelled_caught, "the tool call ended before the caller gave up on it"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.binary(max_size=300), content_type=st.sampled_from(["application/json", "text/event-stream"]))
def test_any_answer_body_is_a_result_or_a_clear_error(body: bytes, content_type: str) -> None:
    """Hostile bytes from the upstream end in a validated result or an MCPError, never another exception."""

    async def run() -> None:
        async with upstream() as fake, hop(fake) as post:
            fake.answer = raw("200 OK", {"content-type": content_type}, body)
            with anyio.fail_after(TIMEOUT):
                try:
                    result = await post.request("tools/call", {"name": "t", "arguments": {}})
                except MCPError:
                    return
            assert isinstance(result, types.CallToolResult | types.InputRequiredResult)

    asyncio.run(run())


async def test_the_environments_proxy_is_used_as_the_sdk_clients_httpx2_uses_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """HTTP_PROXY names the scripted server; the upstream's own address has nothing listening: the call
    answers only if it went through the proxy (a forward proxy gets the absolute URL)."""
    async with upstream() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url.removesuffix("/mcp"))
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        nowhere = Upstream()
        with socket.socket() as unused:  # a loopback port with nothing listening: only the proxy answers
            unused.bind(("127.0.0.1", 0))
            nowhere.url = f"http://127.0.0.1:{unused.getsockname()[1]}/mcp"
        async with hop(nowhere) as post:
            with anyio.fail_after(TIMEOUT):
                result = await post.request("tools/call", {"name": "t", "arguments": {}})
    assert isinstance(result, types.CallToolResult)
    assert len(proxy.seen) == 1


async def test_a_2026_result_without_its_result_type_is_refused_as_the_sdk_client_refuses_it() -> None:
    """Spec: MCP 2026-07-28 (``Result.resultType`` is required of servers); the SDK client checks each
    result against its version's surface (``validate_server_result``), and so does the hop."""

    async def answer(_: dict[str, str], body: bytes, writer: asyncio.StreamWriter) -> None:
        payload = orjson.dumps({"jsonrpc": "2.0", "id": request_id(body), "result": {"content": []}})
        await raw("200 OK", {"content-type": "application/json"}, payload)({}, body, writer)

    async with upstream() as fake, hop(fake) as post:
        fake.answer = answer
        with anyio.fail_after(TIMEOUT), pytest.raises(MCPError) as raised:
            await post.request("tools/call", {"name": "t", "arguments": {}})
    assert raised.value.error.code == PARSE_ERROR


def annotated_schema() -> dict[str, Any]:
    return {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}


def plain_schema() -> dict[str, Any]:
    return {"type": "object", "properties": {"region": {"type": "string"}}}


async def test_each_tool_gets_its_own_mcp_param_headers_across_listings() -> None:
    """From the attack trial: the header maps were cached by ``id()`` of the schema; each listing makes new
    schema objects, a freed schema's id is reused, and a tool got another tool's map (an Mcp-Param header
    missing, or one it must not have). Here every call comes after a new listing of its tool."""
    async with upstream() as fake, hop(fake) as post:
        for round_ in range(40):
            name, schema = ("hdr", annotated_schema()) if round_ % 2 == 0 else ("plain", plain_schema())
            with anyio.fail_after(TIMEOUT):
                await post.request("tools/call", {"name": name, "arguments": {"region": "eu"}}, schema)
            del schema
            gc.collect()  # the listing's old schema objects go, and their ids are free for the next
    for headers, sent in fake.seen:
        if sent["params"]["name"] == "hdr":
            assert headers.get("mcp-param-region") == "eu"
        else:
            assert "mcp-param-region" not in headers


async def test_calls_past_the_pool_wait_for_a_connection_instead_of_timing_out() -> None:
    """From the attack trial: past the pool's 100 connections, a call waited for one only
    ``timeout_seconds`` and failed as a timeout though the upstream was healthy. It now waits (a
    ``tools/call`` is bounded by the agent's invoke timeout)."""
    full = asyncio.Event()

    async def answer(headers: dict[str, str], body: bytes, writer: asyncio.StreamWriter) -> None:
        if len(fake.seen) >= 100:
            full.set()
        await full.wait()
        await asyncio.sleep(0.5)  # every connection stays busy past timeout_seconds
        await ok({"content": []})(headers, body, writer)

    async with upstream() as fake, hop(fake, timeout_seconds=0.2) as post:
        fake.answer = answer
        results: list[object] = []

        async def call() -> None:
            results.append(await post.request("tools/call", {"name": "t", "arguments": {}}))

        with anyio.fail_after(TIMEOUT):
            async with anyio.create_task_group() as tasks:
                for _ in range(120):
                    tasks.start_soon(call)
    assert len(results) == 120
