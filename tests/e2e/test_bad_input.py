"""Bad input against a real hivegate server: raw HTTP, one test per class of mistake.

Every test asserts the HTTP status, the JSON-RPC error ``code`` and, where hivegate renders
the error itself, ``error.data.code``; that no body carries a Python traceback; and that
``/healthz`` still answers afterwards.

Both demo agents are exercised on the modern wire: ``echo`` (no SDK server behind it, so
plain 2026-07-28 requests take hivegate's lean path) and ``notes`` (an SDK server backend,
so they take the SDK transport).

Spec: MCP 2026-07-28 basic/transports (Streamable HTTP), SEP-2575, SEP-2243; MCP 2025-11-25
basic/transports; JSON-RPC 2.0 §5.1; /work/shared/reference/mcp-protocol.md §7, §8, §11.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from tests.gateway_process import GatewayProcess

MODERN = "2026-07-28"
LEGACY_VERSIONS = ["2025-03-26", "2025-06-18", "2025-11-25"]
ACCEPT = "application/json, text/event-stream"
JSON_HEADERS = {"Accept": ACCEPT, "Content-Type": "application/json"}
MAX_BODY_BYTES = 4 * 1024 * 1024
TIMEOUT_SECONDS = 15.0

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
HEADER_MISMATCH = -32020
UNSUPPORTED_PROTOCOL_VERSION = -32022

MODERN_PATHS = ["/echo/mcp", "/notes/mcp"]
"""``echo`` takes the lean path, ``notes`` the SDK transport (it has an SDK server backend)."""

_NAME_PARAM = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


# -- wire helpers ------------------------------------------------------------------------


def envelope(version: str = MODERN) -> dict[str, Any]:
    """The 2026-07-28 per-request ``_meta`` envelope (SEP-2575)."""
    return {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "bad-input-tests", "version": "0"},
    }


def modern_headers(method: str, params: dict[str, Any], version: str = MODERN) -> dict[str, str]:
    """``MCP-Protocol-Version``, ``Mcp-Method`` and (where SEP-2243 asks for it) ``Mcp-Name``."""
    headers = {**JSON_HEADERS, "MCP-Protocol-Version": version, "Mcp-Method": method}
    name_param = _NAME_PARAM.get(method)
    if name_param is not None and isinstance(params.get(name_param), str):
        headers["Mcp-Name"] = params[name_param]
    return headers


async def post_modern(
    client: httpx.AsyncClient,
    path: str,
    method: str,
    params: dict[str, Any] | None = None,
    *,
    request_id: int | str = 1,
    version: str = MODERN,
    meta: dict[str, Any] | None = None,
    with_meta: bool = True,
    headers: dict[str, str] | None = None,
    drop_headers: tuple[str, ...] = (),
) -> httpx.Response:
    """POST one well-formed 2026-07-28 request; ``headers`` override and ``drop_headers`` remove the defaults."""
    body_params = dict(params or {})
    if with_meta:
        body_params["_meta"] = meta if meta is not None else envelope(version)
    sent = {**modern_headers(method, body_params, version), **(headers or {})}
    for name in drop_headers:
        sent.pop(name, None)
    payload = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": body_params}
    return await client.post(path, content=json.dumps(payload), headers=sent)


def message_of(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message in a response (a JSON body, or the response event of an SSE body).

    Also checks the first rule of this file: no body ever shows a Python traceback.
    """
    text = response.text
    assert "Traceback" not in text, text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        messages: list[dict[str, Any]] = [
            json.loads(line[len("data:") :])
            for line in text.splitlines()
            if line.startswith("data:") and line[len("data:") :].strip()
        ]
        answers = [m for m in messages if "result" in m or "error" in m]
        assert answers, text
        return answers[-1]
    assert response.headers.get("content-type", "").startswith("application/json"), (response.status_code, text)
    decoded = json.loads(text)
    assert isinstance(decoded, dict), text
    return decoded


def assert_error(
    response: httpx.Response,
    status: int | None,
    code: int,
    *,
    data_code: str | None = None,
    request_id: Any = ...,
) -> dict[str, Any]:
    """Assert a JSON-RPC error response; ``status=None`` skips the status (legacy SSE answers are 200)."""
    message = message_of(response)
    if status is not None:
        assert response.status_code == status, (response.status_code, response.text)
    assert message.get("jsonrpc") == "2.0", message
    assert "result" not in message, message
    error: dict[str, Any] = message["error"]
    assert error["code"] == code, message
    if data_code is not None:
        assert isinstance(error.get("data"), dict), message
        assert error["data"]["code"] == data_code, message
    if request_id is not ...:
        assert message["id"] == request_id, message
    return error


def assert_result(response: httpx.Response) -> dict[str, Any]:
    message = message_of(response)
    assert response.status_code == 200, (response.status_code, response.text)
    assert "error" not in message, message
    result: dict[str, Any] = message["result"]
    return result


async def assert_healthy(client: httpx.AsyncClient) -> None:
    response = await client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def initialize_payload(version: str, request_id: int = 0) -> dict[str, Any]:
    """A handshake-era ``initialize`` request asking for ``version``."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }


@asynccontextmanager
async def legacy_session(client: httpx.AsyncClient, path: str, version: str) -> AsyncGenerator[dict[str, str], None]:
    """A handshake-era session on ``path``; yields the headers every later request sends, deletes it at exit."""
    initialize = initialize_payload(version, request_id=0)
    response = await client.post(path, content=json.dumps(initialize), headers=JSON_HEADERS)
    assert assert_result(response)["protocolVersion"] == version
    headers = {**JSON_HEADERS, "Mcp-Session-Id": response.headers["mcp-session-id"]}
    if version >= "2025-06-18":  # Spec: MCP 2025-06-18 basic/transports#protocol-version-header
        headers["MCP-Protocol-Version"] = version
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    acknowledged = await client.post(path, content=json.dumps(initialized), headers=headers)
    assert acknowledged.status_code == 202
    try:
        yield headers
    finally:
        await client.delete(path, headers=headers)


async def post_legacy(
    client: httpx.AsyncClient,
    path: str,
    headers: dict[str, str],
    method: str,
    params: dict[str, Any] | None = None,
    request_id: int = 7,
) -> httpx.Response:
    payload: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        payload["params"] = params
    return await client.post(path, content=json.dumps(payload), headers=headers)


@pytest.fixture
async def client(demo_gateway: GatewayProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=demo_gateway.url, timeout=TIMEOUT_SECONDS) as http:
        yield http


# -- one test per class of bad input ------------------------------------------------------


async def test_malformed_json_is_a_parse_error(client: httpx.AsyncClient) -> None:
    """JSON-RPC 2.0 §5.1: invalid JSON → -32700; HTTP 400 on both wires (reference §7, §11)."""
    bodies = [b"{bad", b"", b'{"jsonrpc": "2.0", "id": 1,', b"\xff\xfe{"]
    header_sets = {
        "modern": {**JSON_HEADERS, "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"},
        "legacy-header": {**JSON_HEADERS, "MCP-Protocol-Version": "2025-11-25"},
        "no-version-header": JSON_HEADERS,
    }
    for path in MODERN_PATHS:
        for label, headers in header_sets.items():
            for body in bodies:
                response = await client.post(path, content=body, headers=headers)
                assert response.status_code == 400, (path, label, body, response.text)
                assert_error(response, 400, PARSE_ERROR, request_id=None)
    async with legacy_session(client, "/echo/mcp", "2025-11-25") as session:
        assert_error(await client.post("/echo/mcp", content=b"{bad", headers=session), 400, PARSE_ERROR)
    await assert_healthy(client)


async def test_json_that_is_not_a_request_object_is_an_invalid_request(client: httpx.AsyncClient) -> None:
    """JSON-RPC 2.0 §5.1: valid JSON that is not a Request object → -32600 (reference §7: malformed envelope)."""
    bodies = [b"null", b"42", b'"tools/list"', b"{}", b'{"jsonrpc": "2.0"}', b'{"jsonrpc": "2.0", "id": 1}']
    for path in MODERN_PATHS:
        for headers in (
            {**JSON_HEADERS, "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"},
            JSON_HEADERS,
        ):
            for body in bodies:
                assert_error(await client.post(path, content=body, headers=headers), 400, INVALID_REQUEST)
    await assert_healthy(client)


async def test_batches_are_refused_on_every_revision(client: httpx.AsyncClient) -> None:
    """A JSON array → 400/-32600 ``batch_not_supported`` without a session and on every revision after
    2025-03-26 (whose sessions take batches: tests/e2e/test_wire_negotiation.py, issue 7 item 13)."""
    batch = json.dumps(
        [{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, {"jsonrpc": "2.0", "id": 2, "method": "prompts/list"}]
    ).encode()
    for path in MODERN_PATHS:
        for headers in (
            {**JSON_HEADERS, "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"},
            JSON_HEADERS,
        ):
            for body in (batch, b"[]", b"  \n[1]"):
                response = await client.post(path, content=body, headers=headers)
                assert_error(response, 400, INVALID_REQUEST, data_code="batch_not_supported", request_id=None)
        for version in LEGACY_VERSIONS[1:]:
            async with legacy_session(client, path, version) as session:
                for headers in (session, {**session, "MCP-Protocol-Version": version}):
                    response = await client.post(path, content=batch, headers=headers)
                    assert_error(response, 400, INVALID_REQUEST, data_code="batch_not_supported", request_id=None)
                # the session survives the refusal
                assert "tools" in assert_result(await post_legacy(client, path, session, "tools/list"))
    await assert_healthy(client)


async def test_wrong_content_type_is_415(client: httpx.AsyncClient) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": envelope()}})
    for path in MODERN_PATHS:
        for content_type in ("text/plain", "application/x-www-form-urlencoded", "application/jsonl", None):
            for extra in ({"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"}, {}):
                headers = {"Accept": ACCEPT, **extra}
                if content_type is not None:
                    headers["Content-Type"] = content_type
                response = await client.post(path, content=body, headers=headers)
                assert_error(response, 415, INVALID_REQUEST, data_code="unsupported_media_type", request_id=None)
    await assert_healthy(client)


async def test_wrong_accept_is_406(client: httpx.AsyncClient) -> None:
    """Spec: the client MUST accept application/json and text/event-stream (MCP 2026-07-28 basic/transports)."""
    for path in MODERN_PATHS:
        for accept in ("text/html", "image/png"):
            initialize = initialize_payload("2025-11-25", request_id=1)
            response = await client.post(
                path, content=json.dumps(initialize), headers={**JSON_HEADERS, "Accept": accept}
            )
            assert_error(response, 406, INVALID_REQUEST)
            response = await post_modern(client, path, "tools/list", headers={"Accept": accept})
            assert_error(response, 406, INVALID_REQUEST)
    await assert_healthy(client)


async def test_unknown_and_removed_methods(client: httpx.AsyncClient) -> None:
    """Modern: unknown or removed methods → 404/-32601 (reference §12.9 item 7); legacy sessions: -32601."""
    removed: list[tuple[str, dict[str, Any]]] = [
        ("initialize", initialize_payload(MODERN)["params"]),
        ("ping", {}),
        ("logging/setLevel", {"level": "info"}),
        ("resources/subscribe", {"uri": "hivegate://agent/config"}),
        ("resources/unsubscribe", {"uri": "hivegate://agent/config"}),
        ("no/such/method", {}),
    ]
    for path in MODERN_PATHS:
        for request_id, (method, params) in enumerate(removed, start=10):
            response = await post_modern(client, path, method, params, request_id=request_id)
            assert_error(response, 404, METHOD_NOT_FOUND, request_id=request_id)
        for version in ("2025-03-26", "2025-11-25"):
            async with legacy_session(client, path, version) as session:
                for method in ("no/such/method", "server/discover"):
                    response = await post_legacy(client, path, session, method, {}, request_id=3)
                    assert_error(response, None, METHOD_NOT_FOUND, request_id=3)
    await assert_healthy(client)


async def test_oversized_body_is_413(client: httpx.AsyncClient) -> None:
    """``server.max_body_bytes`` (4 MiB by default), declared by Content-Length or streamed chunked."""
    oversized = b" " * (MAX_BODY_BYTES + 1)
    modern = {**JSON_HEADERS, "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"}
    for headers in (modern, JSON_HEADERS):
        response = await client.post("/echo/mcp", content=oversized, headers=headers)
        assert_error(response, 413, INVALID_REQUEST, data_code="payload_too_large", request_id=None)

        async def chunks() -> AsyncIterator[bytes]:
            for _ in range(4):
                yield b" " * (1024 * 1024)
            yield b"  {}  "

        response = await client.post("/echo/mcp", content=chunks(), headers=headers)
        assert "content-length" not in response.request.headers
        assert_error(response, 413, INVALID_REQUEST, data_code="payload_too_large", request_id=None)
    await assert_healthy(client)


async def test_unknown_agent_without_credentials_is_401_like_any_protected_agent(client: httpx.AsyncClient) -> None:
    """An unknown agent answers an anonymous caller like an existing protected one, so existence does
    not leak (the 404 for a caller with credentials is in tests/e2e/test_auth_matrix.py)."""
    for path in ("/nobody/mcp", "/agents/nobody/mcp"):
        response = await post_modern(client, path, "tools/list")
        assert_error(response, 401, INVALID_REQUEST, data_code="unauthorized", request_id=None)
        assert f'oauth-protected-resource{path}"' in response.headers["www-authenticate"]
        initialize = initialize_payload("2025-11-25", request_id=1)
        response = await client.post(path, content=json.dumps(initialize), headers=JSON_HEADERS)
        assert_error(response, 401, INVALID_REQUEST, data_code="unauthorized", request_id=None)
        response = await client.get(path, headers={"Accept": "text/event-stream"})
        assert_error(response, 401, INVALID_REQUEST, data_code="unauthorized", request_id=None)
    await assert_healthy(client)


async def test_invalid_origin_is_403_and_invalid_host_is_421(client: httpx.AsyncClient) -> None:
    """Spec: MCP 2025-11-25 basic/transports#security-warning (Origin MUST be validated); reference §8.1."""
    for path in MODERN_PATHS:
        for origin in ("http://evil.example", "http://127.0.0.1.evil.example:80", "null"):
            response = await post_modern(client, path, "tools/list", headers={"Origin": origin})
            assert_error(response, 403, INVALID_REQUEST, data_code="forbidden_origin", request_id=None)
        for host in ("evil.example", "evil.example:8094", "127.0.0.1.evil.example:80"):
            response = await post_modern(client, path, "tools/list", headers={"Host": host})
            assert_error(response, 421, INVALID_REQUEST, data_code="invalid_host", request_id=None)
        # the allowed defaults still pass
        allowed = await post_modern(client, path, "tools/list", headers={"Origin": "http://localhost:5173"})
        assert "tools" in assert_result(allowed)
    await assert_healthy(client)


async def test_legacy_session_is_scoped_to_its_agent(client: httpx.AsyncClient) -> None:
    """Spec: MCP 2025-11-25 basic/transports#session-management: an unknown session → 404."""
    async with legacy_session(client, "/echo/mcp", "2025-11-25") as session:
        elsewhere = await post_legacy(client, "/notes/mcp", session, "tools/list")
        assert_error(elsewhere, 404, INVALID_REQUEST)
        stream = await client.get("/notes/mcp", headers={**session, "Accept": "text/event-stream"})
        assert_error(stream, 404, INVALID_REQUEST)
        ended = await client.delete("/notes/mcp", headers=session)
        assert_error(ended, 404, INVALID_REQUEST)
        home = await post_legacy(client, "/echo/mcp", session, "tools/list")
        assert [t["name"] for t in assert_result(home)["tools"]] == ["echo", "shout"]
    await assert_healthy(client)


async def test_modern_header_and_envelope_errors(client: httpx.AsyncClient) -> None:
    """SEP-2243 header checks (-32020), SEP-2575 version (-32022) and envelope (-32602), all HTTP 400."""
    for path in MODERN_PATHS:
        mismatched = await post_modern(client, path, "tools/list", headers={"Mcp-Method": "prompts/list"})
        assert_error(mismatched, 400, HEADER_MISMATCH, request_id=1)
        missing = await post_modern(client, path, "tools/list", drop_headers=("Mcp-Method",))
        assert_error(missing, 400, HEADER_MISMATCH, request_id=1)
        params = {"uri": "hivegate://agent/config"}
        wrong_name = await post_modern(client, path, "resources/read", params, headers={"Mcp-Name": "x://other"})
        assert_error(wrong_name, 400, HEADER_MISMATCH, request_id=1)
        no_name = await post_modern(client, path, "resources/read", params, drop_headers=("Mcp-Name",))
        assert_error(no_name, 400, HEADER_MISMATCH, request_id=1)
        body_differs = await post_modern(client, path, "tools/list", meta=envelope("2099-01-01"))
        assert_error(body_differs, 400, HEADER_MISMATCH, request_id=1)

        unknown = await post_modern(client, path, "tools/list", version="2099-01-01", request_id="v")
        error = assert_error(unknown, 400, UNSUPPORTED_PROTOCOL_VERSION, request_id="v")
        assert error["data"]["requested"] == "2099-01-01"
        assert MODERN in error["data"]["supported"]

        no_meta = await post_modern(client, path, "tools/list", with_meta=False, request_id=2)
        assert_error(no_meta, 400, INVALID_PARAMS, request_id=2)
        partial = {"io.modelcontextprotocol/protocolVersion": MODERN}
        no_capabilities = await post_modern(client, path, "tools/list", meta=partial, request_id=3)
        assert_error(no_capabilities, 400, INVALID_PARAMS, request_id=3)
    await assert_healthy(client)


async def test_invalid_cursor_is_invalid_params(client: httpx.AsyncClient) -> None:
    """Spec: MCP 2026-07-28 server/utilities/pagination: an invalid cursor SHOULD be -32602."""
    list_methods = ["tools/list", "resources/list", "resources/templates/list", "prompts/list"]
    cursors = ["garbage", "!!!", "MA", "MC4AAAAAAAAAAAAAAAAAAAAAAA", "é"]
    for path in MODERN_PATHS:
        for method in list_methods:
            for cursor in cursors:
                response = await post_modern(client, path, method, {"cursor": cursor})
                assert_error(response, 400, INVALID_PARAMS, request_id=1)
        async with legacy_session(client, path, "2025-11-25") as session:
            for method in list_methods:
                response = await post_legacy(client, path, session, method, {"cursor": "garbage"})
                assert_error(response, None, INVALID_PARAMS, request_id=7)
    await assert_healthy(client)


async def test_non_string_prompt_argument_values_are_invalid_params(client: httpx.AsyncClient) -> None:
    """Spec: MCP 2026-07-28 server/prompts: argument values are strings; anything else is -32602."""
    prompts = {"/echo/mcp": ("echo_twice", "phrase"), "/notes/mcp": ("summarize_note", "note_id")}
    bad_values: list[Any] = [3, None, True, ["12"], {"id": "12"}]
    for path, (prompt, argument) in prompts.items():
        for value in bad_values:
            params = {"name": prompt, "arguments": {argument: value}}
            assert_error(await post_modern(client, path, "prompts/get", params), 400, INVALID_PARAMS, request_id=1)
        async with legacy_session(client, path, "2025-11-25") as session:
            for value in bad_values:
                params = {"name": prompt, "arguments": {argument: value}}
                response = await post_legacy(client, path, session, "prompts/get", params)
                assert_error(response, None, INVALID_PARAMS, request_id=7)
    await assert_healthy(client)


async def test_tool_call_without_its_message_is_a_tool_error_result(client: httpx.AsyncClient) -> None:
    """Spec: MCP 2026-07-28 server/tools#error-handling: input validation errors are ``isError`` results."""
    bad_arguments: list[dict[str, Any]] = [{}, {"message": 5}, {"message": None}, {"context_id": "c1"}]
    for tool in ("echo", "shout"):
        for arguments in bad_arguments:
            response = await post_modern(client, "/echo/mcp", "tools/call", {"name": tool, "arguments": arguments})
            result = assert_result(response)
            assert result["isError"] is True
            assert result["content"][0]["type"] == "text"
        async with legacy_session(client, "/echo/mcp", "2025-11-25") as session:
            response = await post_legacy(client, "/echo/mcp", session, "tools/call", {"name": tool, "arguments": {}})
            result = assert_result(response)
            assert result["isError"] is True
    await assert_healthy(client)


@pytest.mark.parametrize("params", ["x", [1], 3])
async def test_params_that_are_not_an_object_echo_the_readable_id(client: httpx.AsyncClient, params: object) -> None:
    """Found by issue 8's attack trial: a request whose ``params`` is not an object was answered -32600 with
    ``id: null`` although its id was readable. JSON-RPC 2.0 §4.2 (params is a structured value) and §5
    (id is null only when it cannot be detected): -32600 with the request's id, on both eras, on the lean
    path (``echo``) and the SDK transport (``notes``)."""
    modern = {**JSON_HEADERS, "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"}
    for path in MODERN_PATHS:
        payload = {"jsonrpc": "2.0", "id": "req-9", "method": "tools/list", "params": params}
        response = await client.post(path, content=json.dumps(payload), headers=modern)
        assert_error(response, 400, INVALID_REQUEST, request_id="req-9")
        async with legacy_session(client, path, "2025-11-25") as session:
            payload = {"jsonrpc": "2.0", "id": 77, "method": "tools/list", "params": params}
            response = await client.post(path, content=json.dumps(payload), headers=session)
            assert_error(response, 400, INVALID_REQUEST, request_id=77)
    await assert_healthy(client)


async def test_valid_json_beyond_the_servers_numbers_is_an_invalid_request_not_a_parse_error(
    client: httpx.AsyncClient,
) -> None:
    """Found by issue 8's attack trial: an id of ``10**400`` is valid JSON (RFC 8259 §6 lets a parser limit
    the range of numbers) and was answered -32700 Parse error. It is -32600 (``id`` null: it cannot be
    represented), on both eras and both paths; the server keeps serving."""
    body = b'{"jsonrpc":"2.0","id":' + str(10**400).encode() + b',"method":"tools/list","params":{}}'
    modern = {**JSON_HEADERS, "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"}
    for path in MODERN_PATHS:
        assert_error(await client.post(path, content=body, headers=modern), 400, INVALID_REQUEST, request_id=None)
        async with legacy_session(client, path, "2025-11-25") as session:
            assert_error(await client.post(path, content=body, headers=session), 400, INVALID_REQUEST, request_id=None)
    await assert_healthy(client)
