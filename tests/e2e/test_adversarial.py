"""Adversarial input against a real hivegate server: requests that slipped past the gateway's checks.

Each test names the exact request, what the spec asks for, and checks that ``/healthz`` still
answers. ``echo`` takes hivegate's lean paths; ``notes`` (an SDK server backend) the SDK transport.

Spec: /work/shared/reference/mcp-protocol.md §7 (error codes and HTTP statuses), §8 (Streamable
HTTP, both eras); JSON-RPC 2.0 §4, §5.1; MCP 2025-11-25 basic (request ids).
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from tests.gateway_process import ROOT, GatewayProcess, run_gateway

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
ACCEPT = "application/json, text/event-stream"
JSON_HEADERS = {"Accept": ACCEPT, "Content-Type": "application/json"}
PATHS = ["/echo/mcp", "/notes/mcp"]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
HEADER_MISMATCH = -32020

INTERNAL_DETAIL = ("Traceback", "validation error", "pydantic", "JSONRPCRequest", "input_value", 'File "')


@pytest.fixture(scope="module")
def gateway() -> Iterator[GatewayProcess]:
    with run_gateway(ROOT / "examples" / "hivegate.toml") as running:
        yield running


@pytest.fixture
async def client(gateway: GatewayProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=gateway.url, timeout=15.0) as http:
        yield http
        health = await http.get("/healthz")
        assert health.status_code == 200


def envelope() -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "adversarial-tests", "version": "0"},
    }


def modern_headers(method: str, name: str | None = None) -> dict[str, str]:
    headers = {**JSON_HEADERS, "MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if name is not None:
        headers["Mcp-Name"] = name
    return headers


def message_of(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC answer (JSON body or the last answer event of an SSE body); no internal detail in it."""
    text = response.text
    for marker in INTERNAL_DETAIL:
        assert marker not in text, text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        answers = [
            json.loads(line[len("data:") :])
            for line in text.splitlines()
            if line.startswith("data:") and line[len("data:") :].strip()
        ]
        answers = [m for m in answers if "result" in m or "error" in m]
        assert answers, text
        return answers[-1]
    decoded = json.loads(text)
    assert isinstance(decoded, dict), text
    return decoded


def assert_error(response: httpx.Response, status: int | None, code: int) -> dict[str, Any]:
    message = message_of(response)
    if status is not None:
        assert response.status_code == status, (response.status_code, response.text)
    assert "error" in message, (response.status_code, response.text)
    assert message["error"]["code"] == code, (response.status_code, response.text)
    return message["error"]


@asynccontextmanager
async def legacy_session(client: httpx.AsyncClient, path: str) -> AsyncGenerator[dict[str, str]]:
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }
    response = await client.post(path, content=json.dumps(initialize), headers=JSON_HEADERS)
    assert response.status_code == 200, response.text
    headers = {**JSON_HEADERS, "Mcp-Session-Id": response.headers["mcp-session-id"], "MCP-Protocol-Version": LEGACY}
    acknowledged = await client.post(
        path, content=json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}), headers=headers
    )
    assert acknowledged.status_code == 202
    try:
        yield headers
    finally:
        await client.delete(path, headers=headers)


# -- handshake era: malformed messages must not reach the SDK's validation dump ------------------


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    "body",
    [
        {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": []},
        {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": [1]},
        {"jsonrpc": "2.0", "id": 7, "result": []},
        {"jsonrpc": "2.0", "id": 7, "error": 1},
        {"jsonrpc": "2.0", "id": {"a": 1}, "result": {}},
    ],
    ids=["params-empty-array", "params-array", "response-result-array", "response-error-int", "response-object-id"],
)
async def test_legacy_malformed_message_is_invalid_request_without_internal_detail(
    client: httpx.AsyncClient, path: str, body: dict[str, Any]
) -> None:
    """Reference §7: a malformed message is -32600/400; no pydantic dump (model names, input reprs) in the body.

    Observed: 400 -32602 "Validation error: 4 validation errors for union[JSONRPCRequest,…] … input_value=…
    For further information visit https://errors.pydantic.dev/…".
    """
    async with legacy_session(client, path) as headers:
        response = await client.post(path, content=json.dumps(body), headers=headers)
        message = message_of(response)
        assert response.status_code == 400, response.text
        expected = (INVALID_REQUEST, INVALID_PARAMS) if "method" in body else (INVALID_REQUEST,)
        assert message["error"]["code"] in expected, response.text


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    "request_id", [None, True, 1.5, {"a": 1}, [1]], ids=["null", "bool", "float", "object", "array"]
)
async def test_legacy_request_with_invalid_id_is_refused_not_dropped(
    client: httpx.AsyncClient, path: str, request_id: Any
) -> None:
    """MCP basic: a request id MUST be a string or integer (never null); JSON-RPC 2.0 §4.1: a message with an
    ``id`` member is not a notification. Such a request is -32600/400 (as on the 2026-07-28 wire).

    Observed: 202 Accepted with an empty body — the request is silently dropped and the client waits forever.
    """
    async with legacy_session(client, path) as headers:
        payload = {"jsonrpc": "2.0", "id": request_id, "method": "tools/list", "params": {}}
        response = await client.post(path, content=json.dumps(payload), headers=headers)
        assert response.status_code != 202, "a request with an invalid id was accepted as a notification"
        assert_error(response, 400, INVALID_REQUEST)


# -- 2026-07-28: NaN / Infinity are not JSON ----------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
async def test_modern_non_json_number_literals_are_a_parse_error(
    client: httpx.AsyncClient, path: str, literal: str
) -> None:
    """JSON-RPC 2.0 §5.1 / RFC 8259 §6: ``NaN`` and ``Infinity`` are not JSON → -32700/400 (reference §7).

    The handshake-era wire already answers -32700; the 2026-07-28 wire answered 200 and served the request.
    """
    meta = json.dumps(envelope())
    body = f'{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"_meta":{meta},"x":{literal}}}}}'
    response = await client.post(path, content=body, headers=modern_headers("tools/list"))
    assert_error(response, 400, PARSE_ERROR)


# -- era routing: duplicate MCP-Protocol-Version ------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
async def test_duplicate_protocol_version_header_is_refused_on_every_agent(
    client: httpx.AsyncClient, path: str
) -> None:
    """Reference §8.3: the SDK routes on the first ``MCP-Protocol-Version`` (here 2026-07-28: modern), and its
    ladder's first step refuses duplicated routing headers with -32020/400. hivegate routed on the *last*
    value, so ``echo`` served this request on the lean handshake-era path (200) while ``notes`` refused it.
    """
    async with legacy_session(client, path) as headers:
        sent = [(k, v) for k, v in headers.items() if k != "MCP-Protocol-Version"]
        sent += [("MCP-Protocol-Version", MODERN), ("MCP-Protocol-Version", LEGACY), ("Mcp-Method", "tools/list")]
        body = {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": envelope()}}
        response = await client.post(path, content=json.dumps(body), headers=sent)
        assert_error(response, 400, HEADER_MISMATCH)


# -- prompts: a client's extra argument is not an internal error ----------------------------------


async def test_backend_prompt_with_undeclared_argument_is_not_an_internal_error(client: httpx.AsyncClient) -> None:
    """Reference §7: -32603 is for internal errors; a bad prompt argument is the client's mistake (-32602),
    and hivegate's own prompts ignore undeclared arguments. Observed: 200 with -32603 "Internal error"
    (and a logged traceback per request) for the ``notes`` backend prompt.
    """
    params = {"name": "summarize_note", "arguments": {"note_id": "12", "extra": "x"}, "_meta": envelope()}
    body = {"jsonrpc": "2.0", "id": 5, "method": "prompts/get", "params": params}
    response = await client.post(
        "/notes/mcp", content=json.dumps(body), headers=modern_headers("prompts/get", "summarize_note")
    )
    message = message_of(response)
    if "error" in message:
        assert message["error"]["code"] == INVALID_PARAMS, response.text
        assert response.status_code == 400, response.text
    else:
        assert response.status_code == 200, response.text
