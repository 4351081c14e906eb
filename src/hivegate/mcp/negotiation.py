"""Reply negotiation on the MCP endpoints: which of JSON and SSE a client accepts, and the adapters
that make any reply fit.

:func:`parse_accept` reads an ``Accept`` value with RFC 9110 §12.5.1 semantics (media ranges,
``type/*`` and ``*/*`` wildcards, ``q`` weights, ``q=0`` meaning "not acceptable", the most
specific matching range deciding; no ``Accept`` at all means anything is acceptable).
:func:`negotiate` turns that into a :class:`ReplyMode` for a request — or a 406 when neither
``application/json`` nor ``text/event-stream`` is acceptable — and rewrites the request's
``Accept`` to the canonical value the SDK understands, since the SDK insists on both types for
a POST and parses wildcards but not weights. :func:`adapt_send` then converts what the SDK or a
lean path answers into the one type the client takes: a JSON reply becomes one SSE ``message``
event (framed by sse-starlette, as the SDK frames its own; a batch reply one event per response),
an SSE reply becomes the JSON-RPC response it carries (parsed by httpx2's SSE decoder, the one
the SDK's client uses; the notifications before it have no place in a JSON reply and are dropped).

Only successful (200) replies are converted: an HTTP error keeps its JSON-RPC error body as JSON
(RFC 9110 §15.5.7 lets a server answer an error in a type the client did not ask for).

Spec: MCP 2025-03-26 … 2026-07-28 basic/transports#sending-messages-to-the-server (the server
answers a POSTed request with ``application/json`` or ``text/event-stream``); RFC 9110 §12.5.1.
"""

from __future__ import annotations

import enum
import functools
import math
from typing import Any, NamedTuple

import httpx2
import orjson
from sse_starlette import ServerSentEvent
from starlette.types import Message, Scope, Send

from hivegate.errors import InternalError, NotAcceptableError
from hivegate.mcp.rendering import jsonrpc_error_body

__all__ = ["Acceptable", "ReplyMode", "adapt_send", "negotiate", "parse_accept", "refuse_unstreamable"]

JSON_TYPE = "application/json"
SSE_TYPE = "text/event-stream"
_BOTH_TEXT = "application/json, text/event-stream"
_BOTH = _BOTH_TEXT.encode()
_SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]
_DROPPED_ON_REFRAME = frozenset({b"content-type", b"content-length", b"cache-control", b"connection"})
_ANY_BASE_URL = "http://gateway/"


class Acceptable(NamedTuple):
    """Whether a client accepts ``application/json`` (``json``) and ``text/event-stream`` (``sse``) replies."""

    json: bool
    sse: bool


class ReplyMode(enum.Enum):
    """What the client may be answered with: either type (``BOTH``), or only ``JSON`` or only ``SSE``."""

    BOTH = "both"
    JSON = "json"
    SSE = "sse"


_ANY = ReplyMode.BOTH  # a module global: enum attribute lookups cost on the hot path


def _weight(params: list[str]) -> float | None:
    """The ``q`` parameter of a media range (1 when absent); None when it is not a qvalue."""
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() != "q":
            continue
        try:
            weight = float(value.strip())
        except ValueError:
            return None
        if math.isnan(weight) or not 0.0 <= weight <= 1.0:
            return None
        return weight
    return 1.0


def _specificity(media_range: str, target: str) -> int:
    """How specifically ``media_range`` names ``target``: 2 exact, 1 ``type/*``, 0 ``*/*``, -1 not at all."""
    if media_range == target:
        return 2
    if media_range == "*/*":
        return 0
    kind, _, subtype = media_range.partition("/")
    if subtype == "*" and target.startswith(kind + "/"):
        return 1
    return -1


@functools.lru_cache(maxsize=512)
def parse_accept(accept: str | None) -> Acceptable:
    """Which of JSON and SSE an ``Accept`` value admits (RFC 9110 §12.5.1).

    Args:
        accept: the header value, or None when the request has no ``Accept`` (anything is
            acceptable then; an empty value is read the same way).

    Returns:
        For each type, whether the most specific media range matching it has a weight above 0
        (ties between ranges of the same specificity: the highest weight). A range whose ``q``
        is not a qvalue is ignored. Never raises.
    """
    if accept is None or not accept.strip():
        return Acceptable(json=True, sse=True)
    best: dict[str, tuple[int, float]] = {}
    for part in accept.split(","):
        media_range, *params = part.split(";")
        media_range = media_range.strip().lower()
        weight = _weight(params)
        if not media_range or weight is None:
            continue
        for target in (JSON_TYPE, SSE_TYPE):
            specificity = _specificity(media_range, target)
            if specificity < 0:
                continue
            current = best.get(target)
            if current is None or (specificity, weight) > current:
                best[target] = (specificity, weight)
    return Acceptable(
        json=best.get(JSON_TYPE, (0, 0.0))[1] > 0,
        sse=best.get(SSE_TYPE, (0, 0.0))[1] > 0,
    )


def _rewrite_accept(scope: Scope, value: bytes) -> None:
    headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"accept"]
    headers.append((b"accept", value))
    scope["headers"] = headers


def negotiate(scope: Scope, accept: str | None) -> ReplyMode:
    """The reply mode of a request; rewrites ``scope["headers"]``' ``Accept`` for the SDK.

    A POST gets ``application/json, text/event-stream`` (what the SDK requires), whatever the
    client sent; a GET (an SSE stream or nothing) gets ``text/event-stream``.

    Raises:
        NotAcceptableError: a POST accepting neither JSON nor SSE, or a GET not accepting SSE (406).
    """
    acceptable = parse_accept(accept)
    if scope["method"] == "GET":
        if not acceptable.sse:
            raise NotAcceptableError("Accept must admit text/event-stream")
        _rewrite_accept(scope, SSE_TYPE.encode())
        return ReplyMode.SSE
    if not acceptable.json and not acceptable.sse:
        raise NotAcceptableError("Accept must admit application/json or text/event-stream")
    if accept != _BOTH_TEXT:  # what the SDK's own client sends needs no rewrite
        _rewrite_accept(scope, _BOTH)
    if acceptable.json and acceptable.sse:
        return _ANY
    return ReplyMode.JSON if acceptable.json else ReplyMode.SSE


def refuse_unstreamable(mode: ReplyMode, decoded: Any) -> None:
    """Refuse a JSON-only ``subscriptions/listen``: its reply is a stream of notifications, never one object.

    Spec: MCP 2026-07-28 basic/utilities/subscriptions (the listen response is an SSE stream).

    Raises:
        NotAcceptableError: ``decoded`` is a listen request and ``mode`` is JSON only (406).
    """
    if mode is ReplyMode.JSON and isinstance(decoded, dict) and decoded.get("method") == "subscriptions/listen":
        raise NotAcceptableError("subscriptions/listen answers with text/event-stream only")


def _content_type(message: Message) -> bytes:
    for name, value in message.get("headers", ()):
        if name.lower() == b"content-type":
            return bytes(value).split(b";", 1)[0].strip().lower()
    return b""


def adapt_send(send: Send, mode: ReplyMode) -> Send:
    """Wrap ``send`` so a 200 reply reaches the client in a type ``mode`` admits (BOTH: unchanged)."""
    if mode is _ANY:
        return send
    wanted = b"text/event-stream" if mode is ReplyMode.SSE else b"application/json"
    convert = _json_as_sse if mode is ReplyMode.SSE else _sse_as_json
    held: Message | None = None
    chunks: list[bytes] = []
    done = False

    async def adapted(message: Message) -> None:
        nonlocal held, done
        if done:
            return  # the converted reply is complete; what the producer still sends has no place
        if message["type"] == "http.response.start":
            if message["status"] == 200 and _content_type(message) not in (wanted, b""):
                held = message
                return
            await send(message)
            return
        if held is None or message["type"] != "http.response.body":
            await send(message)
            return
        chunks.append(message.get("body", b""))
        if message.get("more_body", False):
            return
        done = True
        status, headers, body = convert(held, b"".join(chunks))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return adapted


def _kept_headers(start: Message) -> list[tuple[bytes, bytes]]:
    return [(k, v) for k, v in start["headers"] if k.lower() not in _DROPPED_ON_REFRAME]


def _json_as_sse(start: Message, body: bytes) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """A JSON reply as one SSE ``message`` event carrying the same JSON-RPC message; a batch reply
    (an array) as one event per response (Spec: MCP 2025-03-26 basic/transports, "one JSON-RPC
    response per each JSON-RPC request")."""
    if body.lstrip()[:1] == b"[":
        messages: list[Any] = orjson.loads(body)
        data = [orjson.dumps(message).decode() for message in messages]
    else:
        data = [body.decode("utf-8")]
    events = b"".join(ServerSentEvent(data=item, event="message").encode() for item in data)
    return 200, [*_kept_headers(start), *_SSE_HEADERS], events


def _sse_as_json(start: Message, body: bytes) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """The JSON-RPC response an SSE reply ends with, as a JSON body; a stream without one is a 500."""
    response = httpx2.Response(
        200, headers={"content-type": SSE_TYPE}, content=body, request=httpx2.Request("POST", _ANY_BASE_URL)
    )
    answer: Any = None
    for event in httpx2.EventSource(response):
        if not event.data:
            continue  # a priming event (Spec: MCP 2025-11-25 resumability) or keep-alive
        try:
            message = orjson.loads(event.data)
        except orjson.JSONDecodeError:
            continue
        if isinstance(message, dict) and "method" not in message and ("result" in message or "error" in message):
            answer = message
    headers = _kept_headers(start)
    if answer is None:
        error = InternalError("the reply stream ended without a response")
        payload = jsonrpc_error_body(error)
        status = error.http_status
    else:
        payload = orjson.dumps(answer)
        status = 200
    return (
        status,
        [*headers, (b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())],
        payload,
    )
