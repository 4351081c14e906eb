"""JSON-RPC batches of a 2025-03-26 session: split at hivegate's layer, each element served alone.

The SDK (mcp 2.3) validates every POST body as one JSON-RPC message, so it cannot take a batch;
2025-03-26 is the one revision that allowed them. A batch POSTed in a session negotiated at that
revision is split here and each element is run through the endpoint's ordinary per-message path
(checks, lean path or SDK) with a JSON-only reply; the answers are gathered:

- the responses to the batch's requests, as one JSON array (200), in the batch's order;
- no response at all (only notifications and responses) → 202 with no body;
- an empty batch ``[]`` → one -32600 error object with ``id: null`` (JSON-RPC 2.0 §6); more
  than ``mcp.max_batch_messages`` elements → one -32600 ``batch_too_large`` (the elements are
  served in turn, so the cap bounds the work one POST asks for);
- an element that is not a JSON-RPC message → its -32600 error (``id: null``) in the array;
- ``initialize`` → its -32600 error in the array (Spec: MCP 2025-03-26 basic/lifecycle,
  "The initialization request MUST NOT be part of a JSON-RPC batch");
- an element refused for the whole request's sake (:data:`REQUEST_LEVEL_STATUSES`: the session
  is not found or not the caller's, the credential fails, the database is unavailable) → that
  refusal is the batch's answer, status and headers included, and no later element is served: a
  client learns that its session ended only from the 404 (2025-03-26 basic/transports
  #session-management), and a 401 or 503 carries its ``WWW-Authenticate`` or ``Retry-After``.

Spec: MCP 2025-03-26 basic/transports#sending-messages-to-the-server; JSON-RPC 2.0 §6.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from starlette.types import Message, Scope, Send

from hivegate.errors import GatewayError, InvalidRequestError, SessionNotFoundError
from hivegate.mcp.rendering import jsonrpc_error_body

__all__ = [
    "BATCH_ELEMENT",
    "BATCH_VERSION",
    "REQUEST_LEVEL_STATUSES",
    "BatchTooLargeError",
    "element_request",
    "refuse_ended_session",
    "serve_batch",
]

BATCH_VERSION = "2025-03-26"
"""The only revision whose sessions may POST batches."""

BATCH_ELEMENT = "hivegate.batch_element"
"""Scope key marking a request made from one element of a batch (so it is never split again)."""

REQUEST_LEVEL_STATUSES = frozenset({401, 403, 404, 429, 503})
"""Statuses of an element's answer that refuse the request, not the element: they answer the batch."""

ServeOne = Callable[[bytes, Send], Awaitable[None]]
"""Serve one message body through the per-message path, answering on the given ``send``."""


class _Captured:
    """A ``send`` that keeps one response (status and body) instead of sending it."""

    def __init__(self) -> None:
        self.status = 0
        self.content_type = b""
        self.start: Message | None = None
        self._chunks: list[bytes] = []

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.start = message
            self.status = message["status"]
            for name, value in message.get("headers", ()):
                if name.lower() == b"content-type":
                    self.content_type = bytes(value).split(b";", 1)[0].strip().lower()
        elif message["type"] == "http.response.body":
            self._chunks.append(message.get("body", b""))

    async def replay(self, send: Send) -> None:
        """Send the captured response as it was (status, headers, body)."""
        assert self.start is not None
        await send(self.start)
        await send({"type": "http.response.body", "body": b"".join(self._chunks)})

    def message(self) -> Any:
        """The JSON-RPC message answered, or None (202, or no JSON body)."""
        body = b"".join(self._chunks)
        if self.status == 202 or not body or self.content_type != b"application/json":
            return None
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            return None


def element_request(scope: Scope, headers: dict[str, str], body: bytes) -> tuple[Scope, dict[str, str]]:
    """The scope and headers of a POST carrying one batch element: the batch's headers, a JSON-only
    ``Accept`` (the answer goes into the array) and the element's ``Content-Length``."""
    element_headers = {**headers, "accept": "application/json", "content-length": str(len(body))}
    raw = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in element_headers.items()]
    return {**scope, "headers": raw, BATCH_ELEMENT: True}, element_headers


def refuse_ended_session(headers: dict[str, str], *, modern: bool, live: Callable[[str], bool]) -> None:
    """Before refusing a batch as ``batch_not_supported``: a handshake-era ``Mcp-Session-Id`` that names
    no live session gets the 404 a single request would (the client then starts a new session).

    Raises:
        SessionNotFoundError: the session ended or never existed (404, -32600).
    """
    session_id = headers.get("mcp-session-id")
    if session_id is not None and not modern and not live(session_id):
        raise SessionNotFoundError("Session not found")


def _error(exc: GatewayError, request_id: Any = None) -> Any:
    return orjson.loads(jsonrpc_error_body(exc, request_id))


def _valid_id(element: dict[str, Any]) -> Any:
    request_id = element.get("id")
    return request_id if isinstance(request_id, str | int) and not isinstance(request_id, bool) else None


class BatchTooLargeError(InvalidRequestError):
    """More messages in one batch than ``mcp.max_batch_messages`` (400, -32600)."""

    code = "batch_too_large"


async def serve_batch(elements: list[Any], serve_one: ServeOne, send: Send, *, max_messages: int) -> None:
    """Serve a 2025-03-26 batch (see the module docstring); ``serve_one`` runs one element, in turn.

    Raises:
        InvalidRequestError: the batch is empty (-32600, rendered with ``id: null``).
        BatchTooLargeError: it has more than ``max_messages`` elements (400, -32600).
        GatewayError: an element's check refused the whole request (a status in
            :data:`REQUEST_LEVEL_STATUSES`), re-raised to be rendered as the batch's answer.
    """
    if not elements:
        raise InvalidRequestError("Invalid request: an empty batch")
    if len(elements) > max_messages:
        raise BatchTooLargeError(f"Invalid request: a batch of at most {max_messages} messages")
    answers: list[Any] = []
    for element in elements:
        if isinstance(element, dict) and element.get("method") == "initialize":
            refusal = InvalidRequestError("Invalid request: initialize must not be part of a batch")
            answers.append(_error(refusal, _valid_id(element)))
            continue
        captured = _Captured()
        try:
            await serve_one(orjson.dumps(element), captured)
        except GatewayError as exc:
            if exc.http_status in REQUEST_LEVEL_STATUSES:
                raise
            answers.append(_error(exc))
            continue
        if captured.status in REQUEST_LEVEL_STATUSES:
            await captured.replay(send)
            return
        answer = captured.message()
        if answer is not None:
            answers.append(answer)
    if not answers:
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    body = orjson.dumps(answers)
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
