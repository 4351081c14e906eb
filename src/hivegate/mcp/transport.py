"""Transport security and framing checks in front of every MCP endpoint.

Run before a request reaches the SDK or the lean path, so every refusal has the same shape
(a JSON-RPC error body, ``id: null``) and nothing of the request is processed:

- ``Host`` not allowed → 421; ``Origin`` present and not allowed → 403 (DNS-rebinding
  protection; Spec: MCP 2025-11-25 basic/transports#security-warning, "MUST validate Origin");
- ``Content-Type`` of a POST not JSON → 415;
- body larger than ``server.max_body_bytes`` → 413 (declared or streamed); a body whose bytes,
  charged as they arrive, would pass the caller's or the process's in-flight byte budget
  (``mcp.max_body_bytes_in_flight_*``, :mod:`hivegate.mcp.budgets`) → 429 / 503;
- a JSON-RPC batch → 400 (batching existed only in 2025-03-26; a 2025-03-26 session's batch is
  split by :mod:`hivegate.mcp.batch`); a body that is not JSON, or not a JSON-RPC message object
  (on the modern wire: a ``method`` that is not a string), → -32700 / -32600 with ``id: null``;
- an ``Mcp-Name`` / ``Mcp-Param-*`` header in the ``=?base64?…?=`` form whose payload is not
  ASCII (the SDK's decoder raises on it) → 400 / -32020.

Which reply type a client takes is decided in :mod:`hivegate.mcp.negotiation`.

Shared by the agent endpoints (:mod:`hivegate.mcp.routes`) and the user-level endpoint
(:mod:`hivegate.mcp.user_endpoint`).
"""

from __future__ import annotations

import fnmatch
import functools
import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import Message, Receive, Scope, Send

from hivegate.errors import (
    BatchNotSupportedError,
    ForbiddenOriginError,
    HeaderMismatchError,
    InvalidRequestError,
    MisdirectedRequestError,
    NotAcceptableError,
    ParseError,
    PayloadTooLargeError,
    UnsupportedMediaTypeError,
)
from hivegate.mcp.negotiation import parse_accept

if TYPE_CHECKING:
    from hivegate.mcp.budgets import Charge

__all__ = [
    "HostPolicy",
    "McpPost",
    "accepts_json_and_sse",
    "check_accept",
    "check_content_type",
    "check_encoded_headers",
    "check_jsonrpc_envelope",
    "check_modern_envelope",
    "decode_headers",
    "is_modern",
    "parse_json",
    "read_body",
    "read_mcp_post",
    "replay_receive",
    "request_headers",
    "without_session_header_on_error",
]


_VERDICT_CACHE_SIZE = 1024
_B64_SENTINEL = re.compile(r"=\?base64\?(.*)\?=", re.DOTALL)
"""SEP-2243's encoding of a header value that would not survive HTTP (as ``mcp.shared.inbound`` matches it)."""


class HostPolicy:
    """Allowed ``Host`` and ``Origin`` values; ``name:*`` matches any port and ``*`` anything."""

    def __init__(self, allowed_hosts: Sequence[str], allowed_origins: Sequence[str]) -> None:
        self._hosts = tuple(h.lower() for h in allowed_hosts)
        self._origins = tuple(o.lower() for o in allowed_origins)
        self._any_host = "*" in self._hosts
        self._any_origin = "*" in self._origins
        self._verdicts: dict[tuple[str, str], bool] = {}

    def _allowed(self, value: str, patterns: tuple[str, ...]) -> bool:
        key = (value, "h" if patterns is self._hosts else "o")
        verdict = self._verdicts.get(key)
        if verdict is None:
            verdict = self._match(value, patterns)
            if len(self._verdicts) < _VERDICT_CACHE_SIZE:  # bounded: Host/Origin values are client-chosen
                self._verdicts[key] = verdict
        return verdict

    @staticmethod
    def _match(value: str, patterns: tuple[str, ...]) -> bool:
        for pattern in patterns:
            if value == pattern:
                return True
            if pattern.endswith(":*"):
                base = pattern[:-2]
                head, sep, port = value.rpartition(":")
                if sep and head == base and port.isdigit():
                    return True
            elif "*" in pattern and fnmatch.fnmatchcase(value, pattern):
                return True
        return False

    def check(self, headers: dict[str, str]) -> None:
        """Raise if the request's ``Host`` or ``Origin`` is not allowed.

        Raises:
            MisdirectedRequestError: ``Host`` is missing or not allowed (421).
            ForbiddenOriginError: ``Origin`` is present and not allowed (403).
        """
        if not self._any_host:
            host = headers.get("host", "").lower()
            if not host or not self._allowed(host, self._hosts):
                raise MisdirectedRequestError("Invalid Host header")
        origin = headers.get("origin")
        if origin is not None and not self._any_origin and not self._allowed(origin.lower(), self._origins):
            raise ForbiddenOriginError("Invalid Origin header")


@functools.lru_cache(maxsize=256)
def _is_json_media_type(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() == "application/json"


def check_content_type(headers: dict[str, str]) -> None:
    """Raise unless a POST declares a JSON body.

    Raises:
        UnsupportedMediaTypeError: ``Content-Type`` is missing or not ``application/json`` (415).
    """
    if not _is_json_media_type(headers.get("content-type", "")):
        raise UnsupportedMediaTypeError("Content-Type must be application/json")


def accepts_json_and_sse(accept: str) -> bool:
    """Whether an ``Accept`` value admits both ``application/json`` and ``text/event-stream`` (RFC 9110 weights)."""
    acceptable = parse_accept(accept)
    return acceptable.json and acceptable.sse


def check_accept(headers: Mapping[str, str]) -> None:
    """Refuse a request that accepts neither reply type (see :func:`hivegate.mcp.negotiation.negotiate`).

    Raises:
        NotAcceptableError: neither ``application/json`` nor ``text/event-stream`` is acceptable (406).
    """
    acceptable = parse_accept(headers.get("accept"))
    if not acceptable.json and not acceptable.sse:
        raise NotAcceptableError("Accept must admit application/json or text/event-stream")


def check_modern_envelope(decoded: Any) -> None:
    """The envelope checks of a modern body before any dispatch: a ``method`` member must be a string,
    and a request's ``params`` an object.

    Everything else that is malformed the SDK's ladder words itself (-32600, ``id: null``); a
    non-string ``method`` would reach dict lookups by method name on the lean path first. A request
    whose ``params`` is not an object is refused here with its id echoed (JSON-RPC 2.0 §4.2, §5: the
    id is readable, so it is not null; the SDK's ladder answered ``id: null``).

    Raises:
        InvalidRequestError: ``decoded`` is an object whose ``method`` is not a string, or whose
            ``params`` is present and not an object (-32600).
    """
    if not isinstance(decoded, dict) or "method" not in decoded:
        return
    if not isinstance(decoded["method"], str):
        raise InvalidRequestError("Invalid request: 'method' must be a string", request_id=_readable_id(decoded))
    if "params" in decoded and not isinstance(decoded["params"], dict):
        raise InvalidRequestError("Invalid request: 'params' must be an object", request_id=_readable_id(decoded))


def _readable_id(message: dict[str, Any]) -> str | int | None:
    """The message's id when it is a valid JSON-RPC request id (string or integer), else None."""
    request_id = message.get("id")
    return request_id if _valid_id(request_id) else None


def check_encoded_headers(headers: Mapping[str, str]) -> None:
    """Refuse ``Mcp-Name`` / ``Mcp-Param-*`` values in the ``=?base64?…?=`` form whose payload is not ASCII.

    Spec: SEP-2243: a malformed encoded value never matches the body, so it is a header mismatch;
    checked once here, before either path decodes it (the SDK's decoder raises on non-ASCII).

    Raises:
        HeaderMismatchError: such a header (400, -32020).
    """
    for name, value in headers.items():
        if not value.startswith("=?") or (name != "mcp-name" and not name.startswith("mcp-param-")):
            continue  # the value test first: this runs on every modern request
        encoded = _B64_SENTINEL.fullmatch(value)
        if encoded is not None and not encoded.group(1).isascii():
            raise HeaderMismatchError(f"{name} header is not valid base64")


def check_jsonrpc_envelope(body: bytes) -> dict[str, Any]:
    """Refuse a body that is not JSON (-32700) or not one JSON-RPC message (-32600).

    Spec: JSON-RPC 2.0 §4 and §5.1. (The official SDK answers -32602 with a validation dump here.)

    Raises:
        ParseError: the body is not JSON.
        InvalidRequestError: it is JSON but not a request, notification or response object.

    Returns:
        The decoded message.
    """
    message = parse_json(body)
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        raise InvalidRequestError("Invalid request: not a JSON-RPC 2.0 message object")
    if "id" in message and not _valid_id(message["id"]):
        # Spec: MCP basic "Requests": the id MUST be a string or integer and MUST NOT be null.
        raise InvalidRequestError("Invalid request: 'id' must be a string or an integer")
    if "method" in message:
        if not isinstance(message["method"], str):
            raise InvalidRequestError("Invalid request: 'method' must be a string", request_id=message.get("id"))
        if "params" in message and not isinstance(message["params"], dict):
            raise InvalidRequestError("Invalid request: 'params' must be an object", request_id=message.get("id"))
    elif "id" not in message or not _valid_response_body(message):
        raise InvalidRequestError("Invalid request: neither a request, a notification nor a response")
    return message


def parse_json(body: bytes) -> Any:
    """Decode a request body as strict JSON (RFC 8259: no ``NaN`` / ``Infinity`` literals).

    orjson (the fast parser) refuses two kinds of valid JSON: a number beyond a 64-bit float (e.g.
    an id of ``10**400``) and a string with an unpaired surrogate escape (``"\\ud800"``). RFC 8259
    §6 and §8.2 let a parser limit these; such a body is valid JSON, so it is not a parse error but a
    request this server does not accept (-32600). Only a body orjson refuses is read a second time,
    by the standard library's parser, to tell the two apart (bounded by the body size limit).

    Raises:
        ParseError: the body is not JSON (-32700).
        InvalidRequestError: it is JSON with a number or string this server cannot represent (-32600).
    """
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        pass
    try:
        json.loads(body, parse_constant=_refuse_constant, parse_int=str, parse_float=str)  # validity only
    except (ValueError, RecursionError):  # not JSON (JSONDecodeError and UnicodeDecodeError are ValueErrors)
        raise ParseError("Parse error") from None
    raise InvalidRequestError(
        "Invalid request: a number beyond 64-bit floating point or an unpaired surrogate escape is not accepted"
    )


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # RFC 8259 §6: NaN and Infinity are not numbers


def _valid_id(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


def _valid_response_body(message: dict[str, Any]) -> bool:
    """A posted JSON-RPC response: exactly one of an object ``result`` or an ``error`` with code and message."""
    if ("result" in message) == ("error" in message):
        return False
    if "result" in message:
        return isinstance(message["result"], dict)
    error = message["error"]
    return (
        isinstance(error, dict)
        and isinstance(error.get("code"), int)
        and not isinstance(error.get("code"), bool)
        and isinstance(error.get("message"), str)
    )


async def read_body(
    scope: Scope, receive: Receive, limit_bytes: int, headers: dict[str, str], charge: Charge | None = None
) -> bytes:
    """Read the whole request body, refusing more than ``limit_bytes``.

    Args:
        charge: the request's in-flight byte charge (:meth:`hivegate.mcp.budgets.McpBudgets.body_charge`);
            each chunk is charged as it arrives, before it is kept. The caller releases it.

    Raises:
        PayloadTooLargeError: the declared or received size exceeds the limit (413).
        BudgetExceededError: the chunk would pass the caller's in-flight byte budget (429).
        CapacityExhaustedError: the chunk would pass the process's in-flight byte budget (503).
    """
    declared = headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit_bytes:
        raise PayloadTooLargeError(f"Request body exceeds {limit_bytes} bytes")
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > limit_bytes:
            raise PayloadTooLargeError(f"Request body exceeds {limit_bytes} bytes")
        if charge is not None:
            charge.add(len(chunk))
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def decode_headers(scope: Scope) -> list[tuple[str, str]]:
    """The request's header lines as ``(name, value)`` strings, without optional whitespace around values.

    RFC 9110 §5.5: OWS is not part of a field value, but uvicorn's httptools parser keeps
    trailing whitespace; the MCP routing headers must be compared without it (Spec: SEP-2243,
    "servers MUST tolerate optional whitespace"). When anything was stripped, ``scope["headers"]``
    is rewritten too, so the SDK path sees the same values.
    """
    pairs: list[tuple[str, str]] = []
    stripped = False
    for name, raw in scope["headers"]:
        value = raw.decode("latin-1")
        clean = value.strip(" \t")
        stripped = stripped or clean != value
        pairs.append((name.decode("latin-1"), clean))
    if stripped:
        scope["headers"] = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in pairs]
    return pairs


def replay_receive(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that yields ``body`` once, then defers to the real one (to see the disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def request_headers(scope: Scope) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """The request's header lines (:func:`decode_headers`) and the same folded into a dict.

    The first of repeated lines wins, as in the SDK's era routing (a repeated routing header is
    refused with -32020 on the modern wire).
    """
    pairs = decode_headers(scope)
    headers: dict[str, str] = {}
    for name, value in pairs:
        headers.setdefault(name, value)
    return pairs, headers


def is_modern(headers: Mapping[str, str]) -> bool:
    """The SDK's era routing rule: a handshake version or no ``MCP-Protocol-Version`` is the legacy era."""
    version = headers.get("mcp-protocol-version")
    return version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS


class McpPost(NamedTuple):
    """A checked POST body: ``decoded`` is the parsed JSON (modern), the checked JSON-RPC message
    (legacy) or, when batches are allowed, the list of a batch's raw elements; ``receive``
    replays ``body`` to whoever reads the request next."""

    body: bytes
    decoded: Any
    receive: Receive


async def read_mcp_post(
    scope: Scope,
    receive: Receive,
    headers: dict[str, str],
    max_body_bytes: int,
    *,
    modern: bool,
    allow_batch: bool = False,
    charge: Charge | None = None,
) -> McpPost:
    """Check and read the body of an MCP POST.

    Args:
        allow_batch: a JSON array is returned as a list (unchecked elements) instead of refused
            (a 2025-03-26 session's batch; Spec: MCP 2025-03-26 basic/transports).
        charge: the request's in-flight byte charge, as :func:`read_body`.

    Raises:
        UnsupportedMediaTypeError: not ``application/json`` (415).
        PayloadTooLargeError: larger than ``max_body_bytes`` (413).
        BudgetExceededError, CapacityExhaustedError: as :func:`read_body` (429 / 503).
        BatchNotSupportedError: a JSON-RPC batch where none is allowed (400).
        HeaderMismatchError: (modern) an undecodable ``Mcp-Name`` / ``Mcp-Param-*`` header (400).
        ParseError, InvalidRequestError: not JSON, or not one well-formed JSON-RPC message.
    """
    check_content_type(headers)
    body = await read_body(scope, receive, max_body_bytes, headers, charge)
    if body.lstrip()[:1] == b"[":
        if allow_batch and not modern:
            batch = parse_json(body)
            if isinstance(batch, list):
                return McpPost(body, batch, replay_receive(body, receive))
        raise BatchNotSupportedError(
            "JSON-RPC batches are not supported: send one request per POST "
            "(batching existed only in MCP 2025-03-26 and was removed in 2025-06-18)"
        )
    if modern:
        decoded: Any = parse_json(body)  # strict JSON: NaN / Infinity are -32700 here as on the legacy wire
        check_modern_envelope(decoded)
        check_encoded_headers(headers)
    else:
        decoded = check_jsonrpc_envelope(body)
    return McpPost(body, decoded, replay_receive(body, receive))


def without_session_header_on_error(send: Send) -> Send:
    """Drop the ``Mcp-Session-Id`` the SDK mints on a refused opening request: no such session exists."""

    async def filtered(message: Message) -> None:
        if message["type"] == "http.response.start" and message["status"] >= 400:
            message = {**message, "headers": [(k, v) for k, v in message["headers"] if k.lower() != b"mcp-session-id"]}
        await send(message)

    return filtered
