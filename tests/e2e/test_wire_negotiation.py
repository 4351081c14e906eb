"""Issue 7 items 12 and 13 against a real server: Accept negotiation on every revision, 2025-03-26 batches.

Endpoints: ``echo`` (lean paths), ``notes`` (an SDK server backend), ``keyed-notes`` with a ``bak_``
key and the user-level ``/mcp`` with an ``oag_`` key (:mod:`tests.e2e.wire_gateway`).

Spec: MCP 2025-03-26 … 2026-07-28 basic/transports#sending-messages-to-the-server; RFC 9110
§12.5.1; MCP 2025-03-26 basic/transports (batches), basic/lifecycle (no ``initialize`` in a batch);
JSON-RPC 2.0 §6.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.e2e.wire_gateway import WireWorld, wire_gateway

MODERN = "2026-07-28"
BOTH = "application/json, text/event-stream"
TIMEOUT_SECONDS = 15.0
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "negotiation-tests", "version": "0"},
}


@dataclass(frozen=True)
class Endpoint:
    path: str
    key: str | None


ENDPOINTS = [
    Endpoint("/echo/mcp", None),
    Endpoint("/notes/mcp", None),
    Endpoint("/keyed-notes/mcp", "bak_notes"),
    Endpoint("/mcp", "oag"),
]
ERAS = [MODERN, "2025-03-26", "2025-06-18", "2025-11-25"]
ACCEPTS: list[tuple[str | None, set[str]]] = [
    ("text/event-stream", {"sse"}),
    ("application/json", {"json"}),
    (BOTH, {"json", "sse"}),
    ("*/*", {"json", "sse"}),
    (None, {"json", "sse"}),
    ("text/*", {"sse"}),
    ("application/*", {"json"}),
    ("application/json;q=0, */*", {"sse"}),
    ("text/event-stream;q=0, */*;q=0.2", {"json"}),
    ("application/json;q=0.9, text/event-stream;q=0.1", {"json", "sse"}),
]
"""Each ``Accept`` and the reply types it admits."""
REFUSED = ["text/html", "*/*;q=0", "application/json;q=0, text/event-stream;q=0", "image/*"]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WireWorld]:
    with wire_gateway(tmp_path_factory.mktemp("negotiation")) as running:
        yield running


def _credentials(world: WireWorld, endpoint: Endpoint) -> dict[str, str]:
    if endpoint.key is None:
        return {}
    key = world.keys[endpoint.key]
    return {"Authorization": f"Bearer {key}"} if endpoint.key == "oag" else {"X-Agent-API-Key": key}


def _kind(response: httpx.Response) -> str:
    content_type = response.headers.get("content-type", "")
    if content_type.startswith("text/event-stream"):
        return "sse"
    assert content_type.startswith("application/json"), (response.status_code, content_type, response.text)
    return "json"


def _answer(response: httpx.Response) -> Any:
    """The JSON-RPC answer of a reply: the JSON body, or the last response event of an SSE body."""
    if _kind(response) == "json":
        return response.json()
    events = [
        json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:") and line[5:].strip()
    ]
    answers = [m for m in events if "result" in m or "error" in m]
    assert answers, response.text
    return answers[-1]


def _session(client: httpx.Client, path: str, base: dict[str, str], version: str, accept: str | None) -> dict[str, str]:
    """Open a handshake-era session with ``accept`` on every request; the headers that continue it."""
    headers = {**base, "Content-Type": "application/json"}
    if accept is not None:
        headers["Accept"] = accept
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }
    response = client.post(path, json=initialize, headers=headers)
    assert response.status_code == 200, response.text
    assert _answer(response)["result"]["protocolVersion"] == version
    headers["Mcp-Session-Id"] = response.headers["mcp-session-id"]
    if version >= "2025-06-18":
        headers["MCP-Protocol-Version"] = version
    acknowledged = client.post(path, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    assert acknowledged.status_code == 202, acknowledged.text
    return headers


def _request(method: str, request_id: int, era: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    body_params = dict(params or {})
    if era == MODERN:
        body_params["_meta"] = {**META, **body_params.get("_meta", {})}
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if body_params:
        message["params"] = body_params
    return message


def _era_headers(
    client: httpx.Client, endpoint: Endpoint, base: dict[str, str], era: str, accept: str | None
) -> dict[str, str]:
    if era != MODERN:
        return _session(client, endpoint.path, base, era, accept)
    headers = {**base, "Content-Type": "application/json", "MCP-Protocol-Version": MODERN}
    if accept is not None:
        headers["Accept"] = accept
    return headers


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=lambda e: e.path)
def test_every_revision_answers_in_a_type_the_client_accepts(world: WireWorld, endpoint: Endpoint) -> None:
    """Issue 7 item 12: on every revision, lean path and SDK path alike, ``initialize`` and requests (with and
    without progress) are answered in a type the ``Accept`` admits: SSE-only → SSE, JSON-only → JSON,
    wildcards and weights honoured (``q=0`` excludes)."""
    base = _credentials(world, endpoint)
    with httpx.Client(base_url=world.url, timeout=TIMEOUT_SECONDS) as client:
        for era in ERAS:
            for accept, admitted in ACCEPTS:
                headers = _era_headers(client, endpoint, base, era, accept)  # legacy: initialize with this Accept
                for request_id, params in enumerate(({}, {"_meta": {"progressToken": "p"}}), start=1):
                    message = _request("resources/list", request_id, era, params)
                    sent = {**headers, "Mcp-Method": "resources/list"} if era == MODERN else headers
                    response = client.post(endpoint.path, json=message, headers=sent)
                    context = (era, accept, params, response.status_code, response.text[:300])
                    assert response.status_code == 200, context
                    assert _kind(response) in admitted, context
                    answer = _answer(response)
                    assert answer["id"] == request_id, context
                    assert "resources" in answer["result"], context
                if era != MODERN:
                    client.delete(endpoint.path, headers=headers)


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=lambda e: e.path)
def test_406_only_when_neither_type_is_acceptable(world: WireWorld, endpoint: Endpoint) -> None:
    """Issue 7 item 12: 406 with a JSON-RPC body when neither JSON nor SSE is acceptable, on both eras;
    a JSON-only ``subscriptions/listen`` is 406 too (its reply is a stream)."""
    base = _credentials(world, endpoint)
    with httpx.Client(base_url=world.url, timeout=TIMEOUT_SECONDS) as client:
        session = _session(client, endpoint.path, base, "2025-11-25", BOTH)
        for accept in REFUSED:
            for era, headers in (
                (MODERN, {**base, "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"}),
                ("2025-11-25", session),
            ):
                message = _request("tools/list", 1, era)
                response = client.post(
                    endpoint.path,
                    json=message,
                    headers={**headers, "Content-Type": "application/json", "Accept": accept},
                )
                assert response.status_code == 406, (era, accept, response.text)
                error = response.json()
                assert error["id"] is None
                assert error["error"]["data"]["code"] == "not_acceptable"
        listen = _request("subscriptions/listen", 1, MODERN)
        headers = {
            **base,
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": "subscriptions/listen",
            "Accept": "application/json",
        }
        response = client.post(endpoint.path, json=listen, headers={**headers, "Content-Type": "application/json"})
        assert response.status_code == 406, response.text
        client.delete(endpoint.path, headers=session)


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=lambda e: e.path)
def test_a_2025_03_26_session_takes_batches(world: WireWorld, endpoint: Endpoint) -> None:
    """Issue 7 item 13: in a 2025-03-26 session a batch gets the responses to its requests as an array
    (none for notifications; -32600 for an element that is not a message and for ``initialize``),
    an all-notification batch gets 202, ``[]`` one -32600 with ``id: null``; later revisions refuse."""
    base = _credentials(world, endpoint)
    with httpx.Client(base_url=world.url, timeout=TIMEOUT_SECONDS) as client:
        session = _session(client, endpoint.path, base, "2025-03-26", BOTH)
        batch: list[Any] = [
            {"jsonrpc": "2.0", "id": 1, "method": "resources/list"},
            {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
            {"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {}},
            5,
            {"jsonrpc": "2.0", "id": "three", "method": "ping"},
            {"jsonrpc": "2.0", "id": 4, "method": "resources/list", "params": {"_meta": {"progressToken": "t"}}},
            {"jsonrpc": "2.0", "id": 5, "method": "no/such/method"},
        ]
        response = client.post(endpoint.path, content=json.dumps(batch), headers=session)
        assert response.status_code == 200, response.text
        answers = response.json()
        assert isinstance(answers, list), answers
        by_id = {json.dumps(a.get("id")): a for a in answers}
        assert len(answers) == 6, answers  # no answer for the notification
        assert "resources" in by_id["1"]["result"]
        assert by_id["2"]["error"]["code"] == -32600
        assert by_id["null"]["error"]["code"] == -32600
        assert by_id['"three"']["result"] == {}
        assert "resources" in by_id["4"]["result"]
        assert by_id["5"]["error"]["code"] == -32601
        notifications = [{"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}] * 2
        acknowledged = client.post(endpoint.path, content=json.dumps(notifications), headers=session)
        assert acknowledged.status_code == 202, acknowledged.text
        empty = client.post(endpoint.path, content=b"[]", headers=session)
        assert empty.status_code == 400, empty.text
        assert empty.json()["id"] is None
        assert empty.json()["error"]["code"] == -32600
        too_many = [{"jsonrpc": "2.0", "id": i, "method": "ping"} for i in range(65)]  # mcp.max_batch_messages: 64
        refused_size = client.post(endpoint.path, content=json.dumps(too_many), headers=session)
        assert refused_size.status_code == 400, refused_size.text
        assert refused_size.json()["error"]["data"]["code"] == "batch_too_large"
        assert len(client.post(endpoint.path, content=json.dumps(too_many[:64]), headers=session).json()) == 64
        two = [batch[0], {"jsonrpc": "2.0", "id": 2, "method": "ping"}]
        sse_only = client.post(
            endpoint.path, content=json.dumps(two), headers={**session, "Accept": "text/event-stream"}
        )
        assert _kind(sse_only) == "sse", sse_only.text
        events = [json.loads(line[5:]) for line in sse_only.text.splitlines() if line.startswith("data:")]
        assert [event["id"] for event in events] == [1, 2], events  # one event per response
        client.delete(endpoint.path, headers=session)
        later = _session(client, endpoint.path, base, "2025-11-25", BOTH)
        refused = client.post(endpoint.path, content=json.dumps(batch[:1]), headers=later)
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["data"]["code"] == "batch_not_supported"
        client.delete(endpoint.path, headers=later)
