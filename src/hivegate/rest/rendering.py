"""The REST plane's one renderer: errors, blocking replies and SSE frames of ``/{agentId}/v1/invoke``.

Shapes (the original platform's, ``docs/rest.md``):

- error: the OpenAPI gateway's envelope ``{"success": false, "error": {"type", "code", "message",
  "param"?}}`` with the catalogue's ``code`` and HTTP status (``docs/errors.md``) and the error's
  headers (``WWW-Authenticate``, ``Retry-After``, ``Allow``);
- blocking reply: ``{"message": "ok", "text", "context_id", "is_error"}`` (the rest-invoke page);
  an agent failure adds ``"error"`` and ``"code": "agent_error"``; a reply with more than text adds
  ``"parts"``;
- SSE: unnamed ``data:`` frames switched on ``type``: ``delta`` ``{text}``, ``status`` ``{text}`` (what
  the agent is doing, not part of the reply), ``error`` ``{code,
  status_code, message}`` (a call that failed in the gateway), then one ``done`` ``{text,
  context_id, is_error, error?, code?}``.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson
from sse_starlette import ServerSentEvent
from starlette.responses import Response

from hivegate.calls.events import CallFailed, CallOutcome, FinalResult
from hivegate.errors import GatewayError

__all__ = [
    "delta_frame",
    "done_frames",
    "invoke_reply",
    "rest_error_body",
    "rest_error_response",
    "status_frame",
]

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
}
"""HTTP status → the envelope's ``type`` slug (the original's RFC 9457-style names); else ``api_error``."""

_JSON = "application/json"


def _json(body: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(body), status_code=status, headers=headers, media_type=_JSON)


def rest_error_body(error: GatewayError) -> dict[str, Any]:
    """The envelope of ``error`` (module docstring); ``param`` when the error names a body field."""
    detail: dict[str, Any] = {
        "type": _TYPES.get(error.http_status, "api_error"),
        "code": error.code,
        "message": error.message,
    }
    if isinstance(error.data, dict) and isinstance(error.data.get("param"), str):
        detail["param"] = error.data["param"]
    return {"success": False, "error": detail}


def rest_error_response(error: GatewayError) -> Response:
    """``error`` as the REST plane's error response: its status, the envelope, its headers."""
    return _json(rest_error_body(error), error.http_status, error.headers)


def _failure(failed: CallFailed) -> dict[str, Any]:
    return {"error": failed.error.message, "code": failed.error.code}


def invoke_reply(outcome: CallOutcome, context_id: str) -> Response:
    """The blocking answer: 200 with the reply (or the agent's failure), else the gateway error's response."""
    if isinstance(outcome, CallFailed):
        if not outcome.agent_failed:
            return rest_error_response(outcome.error)
        text = outcome.error.message
        return _json({"message": "ok", "text": text, "context_id": context_id, "is_error": True, **_failure(outcome)})
    return _json(
        {"message": "ok", "text": outcome.text, "context_id": context_id, "is_error": False, **_parts(outcome)}
    )


def _parts(outcome: FinalResult) -> dict[str, Any]:
    """``parts`` of a reply that had more than text (:class:`~hivegate.calls.events.Reply`): each
    ``{"kind": "text", "text"}``, ``{"kind": "data", "data"}`` or ``{"kind": "file", "name", "media_type",
    "bytes_base64" | "url"}``; nothing for a text reply."""
    if not outcome.parts:
        return {}
    out: list[dict[str, Any]] = []
    for part in outcome.parts:
        if part.kind == "text":
            out.append({"kind": "text", "text": part.text})
        elif part.kind == "data":
            out.append({"kind": "data", "data": part.data})
        else:
            item: dict[str, Any] = {"kind": "file", "name": part.name, "media_type": part.media_type}
            if part.content is not None:
                item["bytes_base64"] = base64.b64encode(part.content).decode()
            else:
                item["url"] = part.uri
            out.append(item)
    return {"parts": out}


def _frame(body: dict[str, Any]) -> ServerSentEvent:
    return ServerSentEvent(data=orjson.dumps(body).decode())


def delta_frame(text: str) -> ServerSentEvent:
    """One reply delta."""
    return _frame({"type": "delta", "text": text})


def status_frame(text: str) -> ServerSentEvent:
    """A note of what the agent is doing (not part of the reply)."""
    return _frame({"type": "status", "text": text})


def done_frames(outcome: CallOutcome, context_id: str, streamed: str) -> list[ServerSentEvent]:
    """The closing frames: ``done`` alone, or ``error`` then ``done`` for a failure of the gateway's call.

    Args:
        streamed: the deltas sent so far, joined (``done.text`` of a call that failed in the gateway).
    """
    if not isinstance(outcome, CallFailed):
        done_ok = {"type": "done", "text": outcome.text, "context_id": context_id, "is_error": False}
        return [_frame({**done_ok, **_parts(outcome)})]
    done = {"type": "done", "context_id": context_id, "is_error": True, **_failure(outcome)}
    if outcome.agent_failed:
        return [_frame({**done, "text": outcome.error.message})]
    error = outcome.error
    status = {"type": "error", "code": error.code, "status_code": error.http_status, "message": error.message}
    return [_frame(status), _frame({**done, "text": streamed})]
