"""Issue 7 item 12: reply negotiation — ``Accept`` parsing (RFC 9110 §12.5.1) and the JSON/SSE reply adapters.

Spec: MCP 2025-03-26 … 2026-07-28 basic/transports (a POSTed request is answered with
``application/json`` or ``text/event-stream``); RFC 9110 §12.5.1 (media ranges, weights, ``q=0``).
"""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.types import Message

from hivegate.errors import NotAcceptableError
from hivegate.mcp.negotiation import Acceptable, ReplyMode, adapt_send, negotiate, parse_accept

JSON = "application/json"
SSE = "text/event-stream"


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (None, (True, True)),
        ("", (True, True)),
        ("application/json, text/event-stream", (True, True)),
        ("application/json", (True, False)),
        ("text/event-stream", (False, True)),
        ("*/*", (True, True)),
        ("text/*", (False, True)),
        ("application/*", (True, False)),
        ("text/*, application/*", (True, True)),
        ("application/json;q=0, */*", (False, True)),
        ("*/*, text/event-stream;q=0", (True, False)),
        ("*/*;q=0", (False, False)),
        ("*/*;q=0, application/json;q=0.1", (True, False)),
        ("text/html", (False, False)),
        ("image/png, text/html;q=0.9", (False, False)),
        ("APPLICATION/JSON", (True, False)),
        (" application/json ; charset=utf-8 ; q=0.5 ", (True, False)),
        ("application/json;q=abc", (False, False)),
        ("application/json;q=2", (False, False)),
        ("text/event-stream;q=0.000", (False, False)),
        (",,;;,", (False, False)),
    ],
)
def test_accept_values(accept: str | None, expected: tuple[bool, bool]) -> None:
    """Issue 7 item 12: wildcards, weights and ``q=0`` as RFC 9110 §12.5.1 reads them."""
    assert parse_accept(accept) == Acceptable(*expected)


RANGES = ["application/json", "text/event-stream", "*/*", "text/*", "application/*", "text/html", "image/png"]
WEIGHTS = [None, "0", "0.5", "1", "0.001", "1.000"]


def _media_range(media_range: str, weight: str | None) -> str:
    return media_range if weight is None else f"{media_range};q={weight}"


media_ranges = st.builds(_media_range, st.sampled_from(RANGES), st.sampled_from(WEIGHTS))


@given(st.text())
def test_parse_accept_never_raises(accept: str) -> None:
    """Issue 7 item 12: any header text gets a verdict (the parser sits in front of every request)."""
    assert isinstance(parse_accept(accept), Acceptable)


@given(st.lists(media_ranges, min_size=1, max_size=6), st.randoms())
def test_order_does_not_matter(ranges: list[str], random: Any) -> None:
    """Issue 7 item 12: the most specific range decides, wherever it stands in the list."""
    shuffled = list(ranges)
    random.shuffle(shuffled)
    assert parse_accept(", ".join(ranges)) == parse_accept(", ".join(shuffled))


@given(st.lists(media_ranges, max_size=6), st.sampled_from([JSON, SSE]))
def test_an_exact_q0_range_refuses_and_an_exact_weighted_range_admits(ranges: list[str], target: str) -> None:
    """Issue 7 item 12: ``type/subtype;q=0`` makes it not acceptable over any wildcard (unless the same exact
    range is also listed with a weight); ``type/subtype;q=0.5`` makes it acceptable over a ``*/*;q=0``."""
    exact_listed = any(r.split(";")[0] == target for r in ranges)
    refused = parse_accept(", ".join([*ranges, f"{target};q=0"]))
    admitted = parse_accept(", ".join([*ranges, f"{target};q=0.5"]))
    if not exact_listed:
        assert not (refused.json if target == JSON else refused.sse)
    assert admitted.json if target == JSON else admitted.sse


@given(st.lists(media_ranges, min_size=1, max_size=6), st.sampled_from(["image/png", "text/html;q=1", "font/woff"]))
def test_unrelated_ranges_change_nothing(ranges: list[str], unrelated: str) -> None:
    assert parse_accept(", ".join(ranges)) == parse_accept(", ".join([*ranges, unrelated]))


def _scope(method: str, accept: str | None) -> dict[str, Any]:
    headers = [(b"content-type", b"application/json")]
    if accept is not None:
        headers.append((b"accept", accept.encode()))
    return {"type": "http", "method": method, "headers": headers}


def _accept_of(scope: dict[str, Any]) -> list[bytes]:
    return [v for k, v in scope["headers"] if k == b"accept"]


def test_negotiate_modes_and_the_accept_the_sdk_sees() -> None:
    """Issue 7 item 12: the SDK is handed the one ``Accept`` it understands; 406 only when nothing fits."""
    for accept, mode in (
        (None, ReplyMode.BOTH),
        ("*/*", ReplyMode.BOTH),
        ("application/json", ReplyMode.JSON),
        ("text/event-stream", ReplyMode.SSE),
        ("application/json;q=0, text/*", ReplyMode.SSE),
    ):
        scope = _scope("POST", accept)
        assert negotiate(scope, accept) is mode
        assert _accept_of(scope) == [b"application/json, text/event-stream"]
    for accept in ("text/html", "*/*;q=0", "application/json;q=0, text/event-stream;q=0"):
        with pytest.raises(NotAcceptableError) as refused:
            negotiate(_scope("POST", accept), accept)
        assert (refused.value.code, refused.value.http_status) == ("not_acceptable", 406)
    get = _scope("GET", "text/event-stream, application/json;q=0.5")
    assert negotiate(get, "text/event-stream, application/json;q=0.5") is ReplyMode.SSE
    assert _accept_of(get) == [b"text/event-stream"]
    with pytest.raises(NotAcceptableError):
        negotiate(_scope("GET", "application/json"), "application/json")


async def _run(mode: ReplyMode, sent: list[Message]) -> list[Message]:
    out: list[Message] = []

    async def send(message: Message) -> None:
        out.append(message)

    adapted = adapt_send(send, mode)
    for message in sent:
        await adapted(message)
    return out


def _start(status: int, content_type: bytes, *extra: tuple[bytes, bytes]) -> Message:
    return {"type": "http.response.start", "status": status, "headers": [(b"content-type", content_type), *extra]}


def _body(data: bytes, more: bool = False) -> Message:
    return {"type": "http.response.body", "body": data, "more_body": more}


def _events(body: bytes) -> list[httpx2.ServerSentEvent]:
    response = httpx2.Response(
        200, headers={"content-type": SSE}, content=body, request=httpx2.Request("POST", "http://t/")
    )
    return list(httpx2.EventSource(response))


jsonrpc_messages = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0"), "id": st.integers() | st.text(max_size=8)},
    optional={"result": st.dictionaries(st.text(max_size=6), st.text() | st.integers(), max_size=4)},
)


@given(jsonrpc_messages)
async def test_a_json_reply_reaches_an_sse_only_client_as_one_event(message: dict[str, Any]) -> None:
    """Issue 7 item 12: a JSON reply becomes one SSE ``message`` event carrying the same JSON-RPC message."""
    body = json.dumps(message).encode()
    session = (b"mcp-session-id", b"abc")
    out = await _run(ReplyMode.SSE, [_start(200, b"application/json", session), _body(body[:3], True), _body(body[3:])])
    assert out[0]["status"] == 200
    headers = dict(out[0]["headers"])
    assert headers[b"content-type"] == b"text/event-stream"
    assert headers[b"mcp-session-id"] == b"abc"
    assert b"content-length" not in headers
    (event,) = _events(b"".join(m.get("body", b"") for m in out[1:]))
    assert event.event == "message"
    assert json.loads(event.data) == message


async def test_an_sse_reply_reaches_a_json_only_client_as_its_response() -> None:
    """Issue 7 item 12: the response an SSE reply ends with becomes the JSON body; notifications and the
    priming event are dropped; the session header stays."""
    notification = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
    response = {"jsonrpc": "2.0", "id": 7, "result": {"ok": True}}
    stream = [
        _start(200, b"text/event-stream", (b"mcp-session-id", b"s1"), (b"cache-control", b"no-cache")),
        _body(b"id: 1\r\ndata: \r\nretry: 1000\r\n\r\n", True),
        _body(f"event: message\r\ndata: {json.dumps(notification)}\r\n\r\n: ping\r\n\r\n".encode(), True),
        _body(f"event: message\r\nid: 3\r\ndata: {json.dumps(response)}\r\n\r\n".encode(), True),
        _body(b""),
    ]
    out = await _run(ReplyMode.JSON, stream)
    assert out[0]["status"] == 200
    headers = dict(out[0]["headers"])
    assert headers[b"content-type"] == b"application/json"
    assert headers[b"mcp-session-id"] == b"s1"
    assert b"cache-control" not in headers
    assert json.loads(out[1]["body"]) == response
    assert int(headers[b"content-length"]) == len(out[1]["body"])


async def test_errors_and_acknowledgements_pass_unchanged() -> None:
    """Only 200 replies are converted: a 4xx keeps its JSON-RPC error body, a 202 stays empty."""
    error = _start(400, b"application/json")
    for mode in (ReplyMode.SSE, ReplyMode.JSON, ReplyMode.BOTH):
        sent = [error, _body(b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"x"}}')]
        assert await _run(mode, sent) == sent
        accepted = [{"type": "http.response.start", "status": 202, "headers": []}, _body(b"")]
        assert await _run(mode, accepted) == accepted


async def test_a_stream_without_a_response_is_a_jsonrpc_error() -> None:
    out = await _run(ReplyMode.JSON, [_start(200, b"text/event-stream"), _body(b": ping\r\n\r\n")])
    assert out[0]["status"] == 500
    message = json.loads(out[1]["body"])
    assert message["id"] is None
    assert message["error"]["data"]["code"] == "internal_error"
