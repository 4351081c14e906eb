"""hivegate's lean path for a plain request inside an initialized handshake-era session.

The SDK owns handshake-era sessions: ``initialize``, ``notifications/initialized``, the GET
stream, ``DELETE``, SSE replies with progress, resumability. Once a session is initialized,
a request that cannot produce a notification (no ``progressToken``), that the endpoint allows
(an agent without an SDK server backend; on ``/mcp``, a call of such an agent), in a session
of the caller, is answered here with one ``application/json`` object — which the
handshake-era transport allows for any POSTed request (Spec: MCP 2025-11-25
basic/transports#sending-messages-to-the-server, "either text/event-stream … or
application/json") — by the very handler registered on the endpoint's SDK ``Server``, shaped by
the SDK's own result shaping with its per-version result surface (no 2026 fields reach a legacy
client): :func:`hivegate.mcp.sdk_bridge.run_handler`.

A request is served here only while the SDK still holds the session and has seen it
initialized (:class:`hivegate.mcp.legacy_sessions.LegacySessions`), so an expired or deleted
session is still answered 404 by the SDK; serving a request here counts as session activity.

**One-shot requests** are served here too: a request with no ``Mcp-Session-Id``, no
``MCP-Protocol-Version``, no 2026-07-28 ``_meta`` envelope and no ``initialize`` — a script
calling ``POST /{agentId}/mcp`` as the original platform's documentation shows — is answered at
the newest handshake revision (:data:`ONE_SHOT_VERSION`) with one JSON object, as if a session
had just been opened for it and closed again. No session is created; progress and log
notifications have nowhere to go and are dropped; a server-to-client request fails
(``NoBackChannelError``). See docs/protocol-support.md, "Requests without a session".
"""

from __future__ import annotations

import logging
from typing import Any

from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, PROTOCOL_VERSION_META_KEY, RequestId
from mcp_types.version import LATEST_HANDSHAKE_VERSION
from pydantic import ValidationError
from starlette.types import Send

from hivegate.mcp.fastpath import FAST_METHODS, respond_json
from hivegate.mcp.sdk_bridge import run_handler
from hivegate.mcp.session_context import session_scope
from hivegate.mcp.surface import EndpointTarget

__all__ = [
    "LEGACY_FAST_METHODS",
    "ONE_SHOT_VERSION",
    "legacy_candidate",
    "oneshot_candidate",
    "serve_legacy_fast",
    "serve_oneshot",
]

logger = logging.getLogger(__name__)

LEGACY_FAST_METHODS = (FAST_METHODS - {"server/discover"}) | {"ping"}
"""The lean 2026-07-28 path's methods as the handshake era names them (no discovery; ``ping`` exists)."""

ONE_SHOT_VERSION = LATEST_HANDSHAKE_VERSION
"""The revision a request without a session is answered at (Spec: MCP 2025-11-25)."""


def legacy_candidate(
    target: EndpointTarget, headers: dict[str, str], message: dict[str, Any], owner: str | None
) -> str | None:
    """The session's negotiated version if ``message`` can take the lean legacy path, else None.

    Only in a session of ``owner`` (:meth:`~hivegate.mcp.surface.McpSurface.owner` of the caller):
    any other session is left to the SDK, which answers it 404 as an unknown one.
    """
    session_id = headers.get("mcp-session-id")
    if session_id is None:
        return None
    if message.get("method") not in LEGACY_FAST_METHODS or "id" not in message:
        return None
    request_id = message["id"]
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return None
    params = message.get("params")
    if params is not None:
        meta = params.get("_meta") if isinstance(params, dict) else None
        if not isinstance(params, dict) or (
            meta is not None and (not isinstance(meta, dict) or "progressToken" in meta)
        ):
            return None
    sessions = target.surface.sessions
    if not sessions.belongs_to(session_id, owner) or not target.lean_allowed(message, modern=False):
        return None
    return sessions.ready_version(session_id)


async def _answer(
    server: Server[Any], agent: str, method: str, params: dict[str, Any], request_id: RequestId, version: str
) -> dict[str, Any]:
    """The JSON-RPC response of one request run by ``server``'s handler at ``version`` (never raises)."""
    try:
        result = await run_handler(server, method, params, request_id, version)
        return {"jsonrpc": "2.0", "id": request_id, "result": result}
    except MCPError as exc:
        return {"jsonrpc": "2.0", "id": request_id, "error": exc.error.model_dump(mode="json", exclude_none=True)}
    except ValidationError:
        return {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {"code": INVALID_PARAMS, "message": "Invalid request parameters", "data": ""},
        }
    except Exception:  # the wire boundary: internals never reach the client
        logger.exception("%s: %s failed on the lean legacy path", agent, method)
        return {"jsonrpc": "2.0", "id": request_id, "error": {"code": INTERNAL_ERROR, "message": "Internal error"}}


async def serve_legacy_fast(
    target: EndpointTarget, message: dict[str, Any], version: str, headers: dict[str, str], send: Send
) -> None:
    """Answer one in-session request chosen by :func:`legacy_candidate` with a single JSON response."""
    session_id = headers["mcp-session-id"]
    session_header = [(b"mcp-session-id", session_id.encode("latin-1"))]
    sessions = target.surface.sessions
    sessions.touch(session_id)
    params = message.get("params") or {}
    with session_scope(session_id):
        payload = await _answer(target.surface.server, target.label, message["method"], params, message["id"], version)
    sessions.touch(session_id)
    await respond_json(send, 200, payload, session_header)


def oneshot_candidate(headers: dict[str, str], message: dict[str, Any]) -> bool:
    """Whether a checked handshake-era ``message`` is a one-shot request (see the module docstring).

    Only the methods of :data:`LEGACY_FAST_METHODS`; anything else (``initialize``, notifications,
    ``resources/subscribe``, unknown methods) goes to the SDK, which asks for a session.
    """
    if "mcp-session-id" in headers or "mcp-protocol-version" in headers:
        return False
    if message.get("method") not in LEGACY_FAST_METHODS or "id" not in message:
        return False
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return not (isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta)


async def serve_oneshot(server: Server[Any], agent: str, message: dict[str, Any], send: Send) -> None:
    """Answer a request chosen by :func:`oneshot_candidate` at :data:`ONE_SHOT_VERSION`, as one JSON object.

    Args:
        server: the SDK server whose handlers serve it (an agent's, or the user-level endpoint's).
        agent: who serves it, for the log.
    """
    params = message.get("params") or {}
    payload = await _answer(server, agent, message["method"], params, message["id"], ONE_SHOT_VERSION)
    await respond_json(send, 200, payload)
