"""hivegate's lean path for a plain 2026-07-28 request: one JSON object in, one JSON object out.

The stateless revision needs no session, no stream and no task per request, so a request
that cannot produce a notification is served here instead of through the SDK's transport:
the same validation ladder (the SDK's own ``classify_inbound_request``, ``Mcp-Param-*``
validation and per-version surface validation), then the very handler registered on the
endpoint's SDK ``Server`` (an agent's, or the user-level endpoint's), then the SDK's result
shaping (cache hints, ``resultType``, ``_meta`` serverInfo), serialized with orjson.

Taken only when all hold: the ``MCP-Protocol-Version`` header names a modern revision, the
body is one JSON-RPC request (an object with an ``id``) for a method listed in
``FAST_METHODS``, it asks for neither progress (``_meta.progressToken``) nor log messages
(``_meta`` logLevel), and the endpoint allows it (:meth:`~hivegate.mcp.surface.EndpointTarget.lean_allowed`:
an agent without an SDK server backend, whose handlers may stream).
Anything else — notifications, ``subscriptions/listen``, unknown methods, malformed
envelopes the SDK words its own way — goes to the SDK path, so both paths answer alike.

Spec: MCP 2026-07-28 basic/transports (Streamable HTTP, modern era); SEP-2575 (envelope),
SEP-2243 (headers), SEP-2549 (cache hints), spec PR #3002 (serverInfo in results).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from typing import Any

import anyio
import orjson
from mcp.server.caching import apply_cache_hint
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.session import ServerSession
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    InboundLadderRejection,
    classify_inbound_request,
    find_duplicated_routing_header,
    validate_mcp_param_headers,
)
from mcp.shared.transport_context import TransportContext
from mcp_types import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    LOG_LEVEL_META_KEY,
    CacheableResult,
    RequestId,
)
from mcp_types import methods as surface
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError
from starlette.types import Send

from hivegate.mcp.surface import EndpointTarget

__all__ = ["FAST_METHODS", "dispatch", "fast_candidate", "respond_json", "serve_fast", "silent_session"]

logger = logging.getLogger(__name__)

FAST_METHODS = frozenset(
    {
        "server/discover",
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/read",
        "resources/templates/list",
        "prompts/list",
        "prompts/get",
        "completion/complete",
    }
)
_JSON_HEADERS = [(b"content-type", b"application/json")]
_SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"


class _SingleResponseContext:
    """The dispatch context of a request that cannot stream: no notifications, no server requests.

    Structurally a ``mcp.shared.dispatcher.DispatchContext``.
    """

    can_send_request = False

    def __init__(self, request_id: RequestId | None, headers: Mapping[str, str]) -> None:
        self.transport = TransportContext(kind="streamable-http", can_send_request=False, headers=headers)
        self.request_id = request_id
        self.message_metadata = None
        self.cancel_requested = anyio.Event()

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        raise NoBackChannelError(method)

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        return None

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        return None


def fast_candidate(target: EndpointTarget, headers: Mapping[str, str], decoded: Any) -> dict[str, Any] | None:
    """``decoded`` (the parsed body) if it can take the lean path, else None (the SDK path serves it)."""
    if headers.get("mcp-protocol-version") not in MODERN_PROTOCOL_VERSIONS:
        return None
    if not isinstance(decoded, dict) or decoded.get("method") not in FAST_METHODS or "id" not in decoded:
        return None
    request_id = decoded["id"]
    if isinstance(request_id, bool) or not isinstance(request_id, str | int) or decoded.get("jsonrpc") != "2.0":
        return None
    params = decoded.get("params")
    if params is not None and not isinstance(params, dict):
        return None
    meta = params.get("_meta") if params else None
    if isinstance(meta, dict) and ("progressToken" in meta or LOG_LEVEL_META_KEY in meta):
        return None
    return decoded if target.lean_allowed(decoded) else None


def _mcp_param_rejection(
    target: EndpointTarget, params: Mapping[str, Any], headers: Mapping[str, str]
) -> InboundLadderRejection | None:
    """Spec: SEP-2243: ``Mcp-Param-*`` headers must mirror the arguments their ``x-mcp-header`` names."""
    arguments = params.get("arguments") or {}
    if not isinstance(arguments, Mapping):
        return None
    schema = target.mcp_param_schema(params.get("name"))
    if schema is None:
        # Without an annotation there is nothing to mirror: unannotated Mcp-Param-* headers are ignored.
        return None
    return validate_mcp_param_headers(schema, arguments, headers)


@functools.cache
def silent_session(version: str) -> ServerSession:
    """A session that cannot send anything: no notifications, no server-to-client requests.

    Requests on the lean path carry no progress token and no log level, and their agents have
    no SDK server backend, so the handlers never send on ``ctx.session``; sharing one inert
    session per protocol version saves building a connection (four events) per request. Its
    capabilities are empty: nothing on this path may consult the client's capabilities.
    """
    connection = Connection.from_envelope(version, None, {})
    return ServerSession(_SingleResponseContext(None, {}), connection, request_meta=None)  # type: ignore[arg-type]  # a structural DispatchContext


async def dispatch(
    server: Server[Any], method: str, params: dict[str, Any], request_id: RequestId, version: str
) -> Any:
    """Validate ``params`` for ``method`` at ``version`` and run ``server``'s registered handler.

    The same steps as the SDK's ``ServerRunner``: per-version surface validation (unknown at this
    version → -32601), the handler's params model, then the handler itself.

    Raises:
        MCPError: a protocol error from validation or the handler.
        pydantic.ValidationError: the params do not validate (-32602 on the wire).
    """
    try:
        surface.validate_client_request(method, version, params)
    except KeyError:
        raise MCPError(-32601, "Method not found", data=method) from None
    entry = server.get_request_handler(method)
    if entry is None:
        raise MCPError(-32601, "Method not found", data=method)
    typed = entry.params_type.model_validate(params, by_name=False)
    meta = params.get("_meta")
    ctx: ServerRequestContext[Any, Any] = ServerRequestContext(
        session=silent_session(version),
        lifespan_context={},
        protocol_version=version,
        method=method,
        params=params,
        request_id=request_id,
        meta=meta,
    )
    return await entry.handler(ctx, typed)


def _shape(target: EndpointTarget, method: str, result: Any) -> dict[str, Any]:
    """The SDK's outbound shaping for a modern result: cache hints, ``resultType``, serverInfo stamp.

    Mirrors ``ServerRunner._serialize``: a hint fills only the fields the handler left unset,
    and never an ``input_required`` result.
    """
    hint = target.surface.server.cache_hints.get(method)
    if isinstance(result, CacheableResult):
        if hint is not None:
            result = apply_cache_hint(result, hint)
        dumped: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    elif isinstance(result, BaseModel):
        dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    else:
        dumped = dict(result)
        if hint is not None and dumped.get("resultType") != "input_required":
            dumped = {"ttlMs": hint.ttl_ms, "cacheScope": hint.scope, **dumped}
    dumped.setdefault("resultType", "complete")
    meta = dumped.get("_meta")
    if meta is None:
        dumped["_meta"] = {_SERVER_INFO_KEY: target.surface.server_info}
    elif isinstance(meta, dict) and meta.get(_SERVER_INFO_KEY) is None:
        dumped["_meta"] = {**meta, _SERVER_INFO_KEY: target.surface.server_info}
    return dumped


async def respond_json(
    send: Send, status: int, payload: dict[str, Any], extra_headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    """Send ``payload`` as the whole ``application/json`` response."""
    body = orjson.dumps(payload)
    headers = [*_JSON_HEADERS, (b"content-length", str(len(body)).encode()), *(extra_headers or ())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _error(send: Send, request_id: RequestId, code: int, message: str, data: Any = None) -> None:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    await respond_json(
        send, ERROR_CODE_HTTP_STATUS.get(code, 200), {"jsonrpc": "2.0", "id": request_id, "error": error}
    )


async def serve_fast(
    target: EndpointTarget,
    decoded: dict[str, Any],
    raw_headers: list[tuple[str, str]],
    headers: dict[str, str],
    send: Send,
) -> None:
    """Answer one modern request chosen by :func:`fast_candidate` with a single JSON response.

    ``raw_headers`` are the request's header lines (lower-case names, decoded); ``headers`` the
    same folded into a dict.
    """
    request_id: RequestId = decoded["id"]
    duplicated = find_duplicated_routing_header(raw_headers)
    if duplicated is not None:
        await _error(send, request_id, HEADER_MISMATCH, f"{duplicated} header appears more than once")
        return
    verdict = classify_inbound_request(decoded, headers=headers)
    if isinstance(verdict, InboundLadderRejection):
        await _error(send, request_id, verdict.code, verdict.message, verdict.data)
        return
    method: str = decoded["method"]
    if method == "tools/call":
        rejection = _mcp_param_rejection(target, decoded.get("params") or {}, headers)
        if rejection is not None:
            await _error(send, request_id, rejection.code, rejection.message, rejection.data)
            return
    try:
        params = decoded.get("params") or {}
        result = await dispatch(target.surface.server, method, params, request_id, verdict.protocol_version)
        payload = {"jsonrpc": "2.0", "id": request_id, "result": _shape(target, method, result)}
    except MCPError as exc:
        await _error(send, request_id, exc.code, exc.message, exc.data)
        return
    except ValidationError:
        await _error(send, request_id, INVALID_PARAMS, "Invalid request parameters", "")
        return
    except Exception:  # the wire boundary: internals never reach the client
        logger.exception("%s: %s failed on the lean path", target.label, method)
        await _error(send, request_id, INTERNAL_ERROR, "Internal server error")
        return
    await respond_json(send, 200, payload)
