"""hivegate's error tree: every layer raises these; one renderer per wire plane turns them into responses.

Each class declares its wire identity as class attributes: ``code`` (the stable snake_case id that
MCP renders as ``error.data.code`` and the OAuth plane as ``code``), ``http_status``,
``jsonrpc_code`` and ``oauth_code`` (the RFC 6749 §5.2 ``error`` value; ``server_error`` unless a
class says otherwise, ``temporarily_unavailable`` for the 503s). These attributes are the one
table: :func:`catalogue` reads them, and ``docs/errors.md`` (the catalogue, with the original
platform's names) is tested against it both ways (``tests/test_error_catalogue.py``).
:data:`OAUTH_ERRORS` lists the RFC ``error`` values the OAuth plane sends besides the classes'.

Route code raises; it never builds error bodies itself. Tests assert ``code``, not messages.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "OAUTH_ERRORS",
    "AgentError",
    "AgentNotFoundError",
    "AgentNotInvocableError",
    "AgentServiceUnavailableError",
    "AuthenticationError",
    "BatchNotSupportedError",
    "BudgetExceededError",
    "CapacityExhaustedError",
    "ConflictError",
    "ForbiddenOriginError",
    "GatewayError",
    "HeaderMismatchError",
    "HeadersTooLargeError",
    "InsufficientScopeError",
    "InternalError",
    "InvalidCursorError",
    "InvalidParamsError",
    "InvalidRequestError",
    "McpDisabledError",
    "MethodNotAllowedError",
    "MethodNotFoundError",
    "MisdirectedRequestError",
    "NotAcceptableError",
    "NotFoundError",
    "ParseError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "QuotaExceededError",
    "RateLimitedError",
    "RequestTimeoutError",
    "ResourceNotFoundError",
    "RetryLaterError",
    "ServiceTimeoutError",
    "ServiceUnavailableError",
    "SessionNotFoundError",
    "StoreUnavailableError",
    "UnknownEventIdError",
    "UnknownPromptError",
    "UnknownToolError",
    "UnsupportedMediaTypeError",
    "catalogue",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
LEGACY_RESOURCE_NOT_FOUND = -32002
AGENT_REPLY_TIMEOUT = -32003
"""The original platform's MCP code for an agent that did not reply in time (``"Agent reply timeout"``)."""
HEADER_MISMATCH = -32020

STORE_RETRY_AFTER_SECONDS = 5
"""``Retry-After`` of a :class:`StoreUnavailableError` response (RFC 9110 §10.2.3)."""


class GatewayError(Exception):
    """Root of hivegate's errors.

    Attributes:
        code: stable snake_case identifier (API contract; tests assert it).
        http_status: the status a plain HTTP rendering uses.
        jsonrpc_code: the JSON-RPC error code an MCP rendering uses.
        data: optional JSON-serialisable detail sent to the client (never internals).
        oauth_code: the RFC 6749 §5.2 ``error`` value the OAuth plane renders.
    """

    code: ClassVar[str] = "gateway_error"
    http_status: ClassVar[int] = 500
    jsonrpc_code: ClassVar[int] = INTERNAL_ERROR
    oauth_code: ClassVar[str] = "server_error"

    def __init__(self, message: str, *, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data
        self.headers: dict[str, str] = {}
        """Extra response headers (``WWW-Authenticate`` on 401/403 challenges)."""


class InvalidRequestError(GatewayError):
    """A malformed JSON-RPC message (-32600). ``request_id``: the message's id when it could be read,
    echoed in the error (JSON-RPC 2.0 §5: ``id`` is null only when it cannot be detected)."""

    code = "invalid_request"
    http_status = 400
    jsonrpc_code = INVALID_REQUEST

    def __init__(self, message: str, *, data: Any = None, request_id: str | int | None = None) -> None:
        super().__init__(message, data=data)
        self.request_id = request_id


class ParseError(InvalidRequestError):
    code = "parse_error"
    jsonrpc_code = PARSE_ERROR


class BatchNotSupportedError(InvalidRequestError):
    """A JSON array body. Spec: batching exists only in MCP 2025-03-26; hivegate answers -32600 on every revision."""

    code = "batch_not_supported"


class HeaderMismatchError(InvalidRequestError):
    """A routing header (``Mcp-Name``, ``Mcp-Param-*``) that cannot be read. Spec: SEP-2243 (-32020, HTTP 400)."""

    code = "header_mismatch"
    jsonrpc_code = HEADER_MISMATCH


class PayloadTooLargeError(InvalidRequestError):
    code = "payload_too_large"
    http_status = 413
    oauth_code = "invalid_request"


class QuotaExceededError(PayloadTooLargeError):
    """An upload would pass the caller's storage quota (``files.max_bytes_per_user`` or
    ``files.max_files_per_user``); nothing was stored. ``data``: ``{"quota": "bytes" | "files", "limit": <n>}``."""

    code = "quota_exceeded"


class UnsupportedMediaTypeError(InvalidRequestError):
    code = "unsupported_media_type"
    http_status = 415


class UnknownEventIdError(InvalidRequestError):
    """A ``Last-Event-ID`` that names no kept event of the session's streams for this caller
    (another session's, evicted, or never issued). Spec: MCP 2025-11-25
    basic/transports#resumability-and-redelivery."""

    code = "unknown_event_id"


class RequestTimeoutError(InvalidRequestError):
    """The request line and headers did not arrive within ``server.header_read_timeout_seconds``.

    Spec: RFC 9110 §15.5.9 (408 Request Timeout)."""

    code = "request_timeout"
    http_status = 408


class HeadersTooLargeError(InvalidRequestError):
    """The request head exceeds ``server.max_header_bytes`` or has more than ``server.max_headers`` fields.

    Spec: RFC 6585 §5 (431 Request Header Fields Too Large)."""

    code = "headers_too_large"
    http_status = 431


class InvalidParamsError(GatewayError):
    code = "invalid_params"
    http_status = 400
    jsonrpc_code = INVALID_PARAMS


class UnknownToolError(InvalidParamsError):
    code = "unknown_tool"


class UnknownPromptError(InvalidParamsError):
    code = "unknown_prompt"


class InvalidCursorError(InvalidParamsError):
    code = "invalid_cursor"


class ResourceNotFoundError(InvalidParamsError):
    """Spec: MCP 2026-07-28 SEP-2164: -32602 with ``data.uri``; -32002 on 2025-11-25 and earlier."""

    code = "resource_not_found"

    def __init__(self, uri: str) -> None:
        super().__init__(f"Resource not found: {uri}", data={"uri": uri})
        self.uri = uri


class ConflictError(GatewayError):
    """An idempotency key reused with a different payload (within its TTL); nothing was invoked.

    ``data``: ``{"code": "conflict", "param": "idempotency_key"}``. Spec: the original platform's 409
    ``conflict`` (product-surface §3.4 step 5); JSON-RPC -32602 with ``data.code`` on MCP and A2A.
    """

    code = "conflict"
    http_status = 409
    jsonrpc_code = INVALID_PARAMS

    def __init__(self, message: str = "this idempotency_key was used with a different payload") -> None:
        super().__init__(message, data={"code": self.code, "param": "idempotency_key"})


class MethodNotFoundError(GatewayError):
    code = "method_not_found"
    http_status = 404
    jsonrpc_code = METHOD_NOT_FOUND


class MethodNotAllowedError(GatewayError):
    """An HTTP method the path does not answer (RFC 9110 §15.5.6); ``headers`` carries ``Allow``."""

    code = "method_not_allowed"
    http_status = 405
    jsonrpc_code = INVALID_REQUEST
    oauth_code = "invalid_request"


class NotFoundError(GatewayError):
    code = "not_found"
    http_status = 404
    jsonrpc_code = INVALID_REQUEST


class AgentNotFoundError(NotFoundError):
    code = "agent_not_found"

    def __init__(self, agent_id: str) -> None:
        super().__init__(f"Agent not found: {agent_id}")
        self.agent_id = agent_id


class SessionNotFoundError(NotFoundError):
    code = "session_not_found"


class PermissionDeniedError(GatewayError):
    code = "permission_denied"
    http_status = 403
    jsonrpc_code = INVALID_REQUEST


class AuthenticationError(GatewayError):
    """No usable credential: missing (``oauth_error`` None), invalid or expired (``"invalid_token"``),
    or malformed / ambiguous (``"invalid_request"``). Spec: RFC 6750 §3.1; MCP authorization
    (2025-11-25) "Error Handling": invalid or expired tokens MUST be 401."""

    code = "unauthorized"
    http_status = 401
    jsonrpc_code = INVALID_REQUEST

    def __init__(self, message: str, *, oauth_error: str | None = None) -> None:
        super().__init__(message)
        self.oauth_error = oauth_error


class InsufficientScopeError(PermissionDeniedError):
    """A valid credential that does not cover this resource; ``scope`` is what it would need (RFC 6750 §3.1)."""

    code = "insufficient_scope"

    def __init__(self, message: str, *, scope: str) -> None:
        super().__init__(message)
        self.scope = scope


class ForbiddenOriginError(PermissionDeniedError):
    code = "forbidden_origin"


class McpDisabledError(PermissionDeniedError):
    """The agent exists and the caller may see it, but its MCP endpoint is switched off (``mcp_enabled = false``)."""

    code = "mcp_disabled"


class ServiceUnavailableError(GatewayError):
    code = "service_unavailable"
    http_status = 503
    jsonrpc_code = INTERNAL_ERROR
    oauth_code = "temporarily_unavailable"


class AgentServiceUnavailableError(ServiceUnavailableError):
    """The agent's backend cannot be loaded, started or reached for this call; details go to the server log only.

    ``data``: ``{"code": "agent_service_unavailable"}`` (so a JSON-RPC error rendered by the SDK carries
    the code too). Spec: the original platform's error catalogue (503 ``agent_service_unavailable``).
    """

    code = "agent_service_unavailable"

    def __init__(self, message: str = "The agent is unavailable.") -> None:
        super().__init__(message, data={"code": self.code})


class RetryLaterError(GatewayError):
    """Base of the refusals sent with ``Retry-After: retry_after_seconds`` (RFC 9110 §10.2.3); no code of its own."""

    def __init__(self, message: str, *, retry_after_seconds: int, data: Any = None) -> None:
        super().__init__(message, data=data)
        self.retry_after_seconds = retry_after_seconds
        self.headers["Retry-After"] = str(retry_after_seconds)


class CapacityExhaustedError(RetryLaterError, ServiceUnavailableError):
    """A process-wide cap is reached (every caller is refused until room frees up); sent with ``Retry-After``.

    ``data``: ``{"budget": <what is exhausted, e.g. "sessions">, "limit": <the cap>}``.
    Spec: RFC 9110 §15.6.4 (503), §10.2.3 (Retry-After).
    """

    code = "capacity_exhausted"


class RateLimitedError(RetryLaterError):
    """The caller is over one of its own limits (others are still served); sent with ``Retry-After``.

    Spec: RFC 6585 §4 (429), RFC 9110 §10.2.3 (Retry-After).
    """

    code = "rate_limited"
    http_status = 429
    jsonrpc_code = INTERNAL_ERROR


class BudgetExceededError(RateLimitedError):
    """The caller holds as many of a resource (sessions, streams) as one principal may at once.

    ``data``: ``{"budget": "sessions" | "listen_streams" | "get_streams", "limit": <per-principal cap>}``.
    """

    code = "budget_exceeded"


class StoreUnavailableError(ServiceUnavailableError):
    """The database failed or did not answer in time (refused, timed out, pool exhausted, locked, read-only, full).

    The client sees only the code and a generic message (503 with ``Retry-After``); ``database``
    (the URL without its password) and ``reason`` (the driver's one-line cause) are for the server
    log and the CLI, never for a response.
    """

    code = "store_unavailable"

    def __init__(self, *, database: str, reason: str) -> None:
        super().__init__("The gateway's database is unavailable; try again shortly.")
        self.database = database
        self.reason = reason
        self.headers["Retry-After"] = str(STORE_RETRY_AFTER_SECONDS)

    def __str__(self) -> str:
        return f"cannot use the database {self.database}: {self.reason}"


class MisdirectedRequestError(GatewayError):
    code = "invalid_host"
    http_status = 421
    jsonrpc_code = INVALID_REQUEST


class NotAcceptableError(GatewayError):
    code = "not_acceptable"
    http_status = 406
    jsonrpc_code = INVALID_REQUEST


class AgentError(GatewayError):
    """The agent itself failed; MCP renders this as a ``tools/call`` result with ``isError: true``."""

    code = "agent_error"
    http_status = 200
    jsonrpc_code = INTERNAL_ERROR


class AgentNotInvocableError(GatewayError):
    """The agent takes no messages: it has no invocable backend (an MCP server only). 501 on the REST
    plane (``POST /{agentId}/v1/invoke``); A2A refuses the same with ``UnsupportedOperationError``."""

    code = "agent_not_invocable"
    http_status = 501
    jsonrpc_code = INVALID_REQUEST


class ServiceTimeoutError(GatewayError):
    """The agent did not reply within its ``invoke_timeout_seconds``; the backend call was cancelled.

    JSON-RPC -32003 "Agent reply timeout" with ``data``: ``{"code": "service_timeout", "timeout_seconds": <n>}``;
    504 where the plane has a status. Spec: the original platform's MCP tools/call timeout and error
    catalogue (``service_timeout``, 504); RFC 9110 §15.6.5.
    """

    code = "service_timeout"
    http_status = 504
    jsonrpc_code = AGENT_REPLY_TIMEOUT

    def __init__(self, timeout_seconds: float) -> None:
        super().__init__("Agent reply timeout", data={"code": self.code, "timeout_seconds": timeout_seconds})
        self.timeout_seconds = timeout_seconds


class InternalError(GatewayError):
    """An unexpected failure; the client sees only this code and a generic message, the log has the cause."""

    code = "internal_error"


OAUTH_ERRORS: dict[str, str] = {
    "invalid_request": "RFC 6749 §4.1.2.1, §5.2; RFC 7009 §2.2.1; RFC 6750 §3.1",
    "invalid_token": "RFC 6750 §3.1",
    "insufficient_scope": "RFC 6750 §3.1",
    "invalid_client": "RFC 6749 §5.2",
    "invalid_grant": "RFC 6749 §5.2",
    "unauthorized_client": "RFC 6749 §4.1.2.1, §5.2",
    "unsupported_grant_type": "RFC 6749 §5.2",
    "unsupported_response_type": "RFC 6749 §4.1.2.1",
    "invalid_scope": "RFC 6749 §4.1.2.1, §5.2",
    "access_denied": "RFC 6749 §4.1.2.1",
    "invalid_target": "RFC 8707 §2",
    "invalid_redirect_uri": "RFC 7591 §3.2.2",
    "invalid_client_metadata": "RFC 7591 §3.2.2",
    "slow_down": "RFC 8628 §3.5",
    "not_found": "hivegate",
    "server_error": "RFC 6749 §4.1.2.1, §5.2",
    "temporarily_unavailable": "RFC 6749 §4.1.2.1",
}
"""The RFC ``error`` values hivegate sends (value → where it is defined): on the OAuth plane (the
classes' ``oauth_code``, the bodies its endpoints build, the official SDK's handlers' values) and in
``WWW-Authenticate`` bearer challenges (RFC 6750 §3.1)."""


def catalogue(root: type[GatewayError] = GatewayError) -> list[type[GatewayError]]:
    """Every class of the tree under ``root`` (inclusive) that declares its own ``code``, parents first.

    Reads the subclasses defined so far: classes outside this module (e.g. ``BackendLoadError``)
    count once their module is imported. Order: depth-first, siblings in definition order.
    """
    found = [root] if "code" in vars(root) else []
    for child in root.__subclasses__():
        found += [error for error in catalogue(child) if error not in found]
    return found
