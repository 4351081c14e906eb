"""The lean legacy path answers in-session requests exactly as the SDK path does (JSON instead of SSE).

Two real servers with the demo agents (lean paths on / off) each get one handshake-era session
and the same requests; the JSON-RPC messages must be equal, and the lean server must answer with
``application/json`` (proof the lean path served it) while the session stays usable on the SDK path.

Spec: MCP 2025-11-25 basic/transports#sending-messages-to-the-server (a POSTed request may be
answered with one JSON object).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.gateway_process import ROOT, GatewayProcess, run_gateway

VERSION = "2025-11-25"
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}

REQUESTS: dict[str, tuple[str, dict[str, Any]]] = {
    "ping": ("ping", {}),
    "tools/list": ("tools/list", {}),
    "tools/call": ("tools/call", {"name": "echo", "arguments": {"message": "hi there"}}),
    "tools/call skill": ("tools/call", {"name": "shout", "arguments": {"message": "x"}}),
    "tools/call missing message": ("tools/call", {"name": "echo", "arguments": {}}),
    "tools/call unknown tool": ("tools/call", {"name": "nope", "arguments": {}}),
    "tools/call bad arguments": ("tools/call", {"name": "echo", "arguments": 3}),
    "resources/list": ("resources/list", {}),
    "resources/templates/list": ("resources/templates/list", {}),
    "resources/read": ("resources/read", {"uri": "echo://readme"}),
    "resources/read missing": ("resources/read", {"uri": "echo://nope"}),
    "prompts/list": ("prompts/list", {}),
    "prompts/get": ("prompts/get", {"name": "echo_twice", "arguments": {"phrase": "a"}}),
    "prompts/get missing argument": ("prompts/get", {"name": "echo_twice"}),
    "completion": (
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "echo_twice"}, "argument": {"name": "phrase", "value": "h"}},
    ),
    "bad cursor": ("tools/list", {"cursor": "forged"}),
}


def _messages(response: httpx.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a response, whether one JSON object or an SSE stream."""
    if response.headers["content-type"].startswith("application/json"):
        return [response.json()]
    return [
        json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:") and line[5:].strip()
    ]


def _open_session(client: httpx.Client, url: str) -> dict[str, str]:
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "parity", "version": "0"}},
    }
    opened = client.post(url, json=initialize, headers=HEADERS)
    assert opened.status_code == 200, opened.text
    session = {**HEADERS, "Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": VERSION}
    ready = client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
    assert ready.status_code == 202
    return session


@pytest.fixture(scope="module")
def sessions() -> Iterator[list[tuple[GatewayProcess, dict[str, str]]]]:
    config = ROOT / "examples" / "hivegate.toml"
    with (
        run_gateway(config, env={"HIVEGATE_MCP__FAST_PATH": "true"}) as lean,
        run_gateway(config, env={"HIVEGATE_MCP__FAST_PATH": "false"}) as sdk,
        httpx.Client(timeout=10) as client,
    ):
        yield [(gateway, _open_session(client, f"{gateway.url}/echo/mcp")) for gateway in (lean, sdk)]


@pytest.mark.parametrize("case", sorted(REQUESTS))
def test_lean_legacy_path_matches_sdk_path(sessions: list[tuple[GatewayProcess, dict[str, str]]], case: str) -> None:
    method, params = REQUESTS[case]
    answers: list[list[dict[str, Any]]] = []
    content_types: list[str] = []
    for gateway, headers in sessions:
        body = {"jsonrpc": "2.0", "id": 5, "method": method, "params": params}
        response = httpx.post(f"{gateway.url}/echo/mcp", json=body, headers=headers, timeout=10)
        assert response.status_code == 200, response.text
        assert response.headers["mcp-session-id"] == headers["Mcp-Session-Id"]
        answers.append(_messages(response))
        content_types.append(response.headers["content-type"])
    assert answers[0] == answers[1]
    assert content_types[0].startswith("application/json")
    assert content_types[1].startswith("text/event-stream")


def test_non_object_params_and_sessionless_get(sessions: list[tuple[GatewayProcess, dict[str, str]]]) -> None:
    gateway, headers = sessions[0]
    url = f"{gateway.url}/echo/mcp"
    bad = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": 5}, headers=headers)
    assert bad.status_code == 400
    assert bad.json()["error"]["code"] == -32600
    odd_meta = httpx.post(
        url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": 5}}, headers=headers
    )
    assert odd_meta.status_code == 200  # declined by the lean path; the SDK answers with a JSON-RPC error
    assert _messages(odd_meta)[0]["error"]["code"] == -32602
    get = httpx.get(url, headers={"Accept": "text/event-stream"}, timeout=10)
    assert get.status_code >= 400
    assert "mcp-session-id" not in get.headers


def test_progress_still_streams_and_session_ends_on_delete(
    sessions: list[tuple[GatewayProcess, dict[str, str]]],
) -> None:
    gateway, headers = sessions[0]
    url = f"{gateway.url}/echo/mcp"
    body = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"message": "a b"}, "_meta": {"progressToken": "p"}},
    }
    streamed = httpx.post(url, json=body, headers=headers, timeout=10)
    assert streamed.headers["content-type"].startswith("text/event-stream")
    methods = [m.get("method") for m in _messages(streamed)]
    assert methods == ["notifications/progress", "notifications/progress", None]

    ended = httpx.delete(url, headers=headers, timeout=10)
    assert ended.status_code == 200
    after = httpx.post(url, json={"jsonrpc": "2.0", "id": 10, "method": "ping"}, headers=headers, timeout=10)
    assert after.status_code == 404


def test_uninitialized_session_is_left_to_the_sdk(sessions: list[tuple[GatewayProcess, dict[str, str]]]) -> None:
    """A session whose client never sent notifications/initialized is not served by the lean path."""
    gateway, _ = sessions[0]
    url = f"{gateway.url}/echo/mcp"
    with httpx.Client(timeout=10) as client:
        initialize = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}},
        }
        opened = client.post(url, json=initialize, headers=HEADERS)
        headers = {**HEADERS, "Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": VERSION}
        response = client.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers=headers)
    assert response.headers["content-type"].startswith("text/event-stream")
