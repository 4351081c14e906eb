"""hivegate's lean path for a plain 2026-07-28 request: one JSON object in, one JSON object out.

The stateless revision needs no session, no stream and no task per request, so a request
that cannot produce a notification is served here instead of through the SDK's transport:
the same validation ladder (the SDK's own ``classify_inbound_request``, ``Mcp-Param-*``
validation and per-version surface validation), then the very handler registered on the
endpoint's SDK ``Server`` (an agent's, or the user-level endpoint's), then the SDK's own result
shaping (cache hints, the per-version result surface, ``resultType``, ``_meta`` serverInfo), both
through :func:`hivegate.mcp.sdk_bridge.run_handler`, serialized with orjson.

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

import logging
from collections.abc import Mapping
from typing import Any

import orjson
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    InboundLadderRejection,
    classify_inbound_request,
    find_duplicated_routing_header,
    validate_mcp_param_headers,
)
from mcp_types import HEADER_MISMATCH, INTERNAL_ERROR, INVALID_PARAMS, LOG_LEVEL_META_KEY, RequestId
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.types import Send

from hivegate.mcp.sdk_bridge import call_handler, run_handler, silent_session
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

dispatch = call_handler
"""Validate and run ``server``'s handler for one request, unshaped (:func:`hivegate.mcp.sdk_bridge.call_handler`)."""


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
    return decoded if target.lean_allowed(decoded, modern=True) else None


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
        result = await run_handler(target.surface.server, method, params, request_id, verdict.protocol_version)
        payload = {"jsonrpc": "2.0", "id": request_id, "result": result}
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
