"""The A2A plane's one error renderer: a :class:`~hivegate.errors.GatewayError` as an HTTP+JSON error response.

Body (A2A 1.0 §11.6, the ``google.rpc.Status`` shape of AIP-193)::

    {"error": {"code": 404, "status": "NOT_FOUND", "message": "...",
               "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                            "reason": "AGENT_NOT_FOUND", "domain": "hivegate",
                            "metadata": {"code": "agent_not_found"}}]}}

``metadata.code`` is the catalogue code (``docs/errors.md``); ``reason`` is the same in the
upper case ErrorInfo asks for. The error's ``headers`` are sent too.

On the JSON-RPC binding (:func:`a2a_jsonrpc_error_response`) the same error is a JSON-RPC error
object with the error's ``jsonrpc_code``, its message and ``data`` = ``[ErrorInfo]`` (A2A 1.0 §9.5:
``data`` is a list of typed details), sent with the error's HTTP status and headers (a refused
credential is a 401/403 with ``WWW-Authenticate``; the request's ``id`` when it was read, else null).
A refusal sent with ``Retry-After`` (``rate_limited``) also has ``retryAfterSeconds`` in the ErrorInfo's
``metadata`` (a string, as ErrorInfo's metadata values are).

Spec: A2A 1.0 §11.6 (HTTP+JSON error responses), google.rpc.Status / ErrorInfo.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from hivegate.errors import GatewayError, RetryLaterError

__all__ = ["ERROR_DOMAIN", "a2a_error_response", "a2a_jsonrpc_error_response"]

ERROR_DOMAIN = "hivegate"
"""``ErrorInfo.domain`` of hivegate's own errors (the A2A spec's errors use ``a2a-protocol.org``)."""

_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
"""HTTP status → ``google.rpc.Code`` name; any other status is ``INTERNAL`` (5xx) or ``FAILED_PRECONDITION``."""


def _error_info(error: GatewayError) -> dict[str, Any]:
    metadata = {"code": error.code}
    if isinstance(error, RetryLaterError):  # ErrorInfo metadata values are strings (google.rpc)
        metadata["retryAfterSeconds"] = str(error.retry_after_seconds)
    return {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": error.code.upper(),
        "domain": ERROR_DOMAIN,
        "metadata": metadata,
    }


def a2a_jsonrpc_error_response(error: GatewayError, request_id: object = None) -> JSONResponse:
    """``error`` as an A2A JSON-RPC error response (module docstring), with its status and headers;
    ``request_id`` is the request's ``id`` when it was read (a string or an integer), else null."""
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        request_id = None
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": error.jsonrpc_code, "message": error.message, "data": [_error_info(error)]},
    }
    return JSONResponse(body, status_code=error.http_status, headers=error.headers)


def a2a_error_response(error: GatewayError) -> JSONResponse:
    """``error`` as the A2A HTTP+JSON error response (module docstring), with its status and headers."""
    status = error.http_status
    name = _STATUS_NAMES.get(status, "INTERNAL" if status >= 500 else "FAILED_PRECONDITION")
    info = _error_info(error)
    body = {"error": {"code": status, "status": name, "message": error.message, "details": [info]}}
    return JSONResponse(body, status_code=status, headers=error.headers)
