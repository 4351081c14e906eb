"""hivegate's error tree: every layer raises these; one renderer per wire plane turns them into responses.

::

    GatewayError                      code             HTTP  JSON-RPC
    ├── InvalidRequestError           invalid_request   400  -32600
    │   ├── ParseError                parse_error       400  -32700
    │   ├── BatchNotSupportedError    batch_not_supported 400 -32600
    │   ├── HeaderMismatchError       header_mismatch   400  -32020
    │   ├── PayloadTooLargeError      payload_too_large 413  -32600
    │   ├── UnsupportedMediaTypeError unsupported_media_type 415 -32600
    │   ├── UnknownEventIdError       unknown_event_id  400  -32600
    │   ├── RequestTimeoutError       request_timeout   408  -32600  (HTTP layer: the head came too slowly)
    │   └── HeadersTooLargeError      headers_too_large 431  -32600  (HTTP layer: head too large / too many)
    ├── InvalidParamsError            invalid_params    400  -32602
    │   ├── UnknownToolError          unknown_tool      400  -32602
    │   ├── UnknownPromptError        unknown_prompt    400  -32602
    │   ├── InvalidCursorError        invalid_cursor    400  -32602
    │   └── ResourceNotFoundError     resource_not_found 400 -32602 (-32002 before 2026-07-28)
    ├── MethodNotFoundError           method_not_found  404  -32601
    ├── NotFoundError                 not_found         404  -32600
    │   ├── AgentNotFoundError        agent_not_found   404  -32600
    │   └── SessionNotFoundError      session_not_found 404  -32600
    ├── AuthenticationError           unauthorized      401  -32600  (+ WWW-Authenticate, RFC 6750 §3)
    ├── PermissionDeniedError         permission_denied 403  -32600
    │   ├── ForbiddenOriginError      forbidden_origin  403  -32600
    │   ├── InsufficientScopeError    insufficient_scope 403 -32600  (+ WWW-Authenticate)
    │   └── McpDisabledError          mcp_disabled      403  -32600
    ├── ServiceUnavailableError       service_unavailable 503 -32603
    │   ├── AgentServiceUnavailableError agent_service_unavailable 503 -32603 (``data.code``)
    │   ├── CapacityExhaustedError    capacity_exhausted 503 -32603  (+ Retry-After)
    │   └── StoreUnavailableError     store_unavailable 503  -32603  (+ Retry-After)
    ├── ServiceTimeoutError           service_timeout   504  -32003  "Agent reply timeout" (``data.code``)
    ├── RateLimitedError              rate_limited      429  -32603  (+ Retry-After)
    │   └── BudgetExceededError       budget_exceeded   429  -32603  (+ Retry-After)
    ├── MisdirectedRequestError       invalid_host      421  -32600
    ├── NotAcceptableError            not_acceptable    406  -32600
    ├── AgentError                    agent_error       200  (an ``isError`` tool result)
    └── InternalError                 internal_error    500  -32603

Route code raises; it never builds error bodies itself. Tests assert ``code``, not messages.
On the OAuth plane a class's ``oauth_code`` is the RFC 6749 §5.2 ``error`` value (``server_error``
unless a class says otherwise; ``temporarily_unavailable`` for the 503s).
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "AgentError",
    "AgentNotFoundError",
    "AgentServiceUnavailableError",
    "AgentUnavailableError",
    "AuthenticationError",
    "BatchNotSupportedError",
    "BudgetExceededError",
    "CapacityExhaustedError",
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
    "MethodNotFoundError",
    "MisdirectedRequestError",
    "NotAcceptableError",
    "NotFoundError",
    "ParseError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "RateLimitedError",
    "RequestTimeoutError",
    "ResourceNotFoundError",
    "ServiceTimeoutError",
    "ServiceUnavailableError",
    "SessionNotFoundError",
    "StoreUnavailableError",
    "UnknownEventIdError",
    "UnknownPromptError",
    "UnknownToolError",
    "UnsupportedMediaTypeError",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
LEGACY_RESOURCE_NOT_FOUND = -32002
HEADER_MISMATCH = -32020
AGENT_REPLY_TIMEOUT = -32003
"""The original platform's JSON-RPC code for an agent that did not reply in time (implementation-defined range)."""

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
    code = "invalid_request"
    http_status = 400
    jsonrpc_code = INVALID_REQUEST


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


class MethodNotFoundError(GatewayError):
    code = "method_not_found"
    http_status = 404
    jsonrpc_code = METHOD_NOT_FOUND


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
    """The agent's backend cannot be loaded or started; details go to the server log only.

    ``data``: ``{"code": "agent_service_unavailable"}`` (so a JSON-RPC error rendered by the SDK carries
    the code too). Spec: the original platform's error catalogue (503 ``agent_service_unavailable``).
    """

    code = "agent_service_unavailable"

    def __init__(self, message: str = "The agent is unavailable.") -> None:
        super().__init__(message, data={"code": self.code})


AgentUnavailableError = AgentServiceUnavailableError
"""The former name, kept for the modules that still import it."""


class CapacityExhaustedError(ServiceUnavailableError):
    """A process-wide cap is reached (every caller is refused until room frees up); sent with ``Retry-After``.

    ``data``: ``{"budget": <what is exhausted, e.g. "sessions">, "limit": <the cap>}``.
    Spec: RFC 9110 §15.6.4 (503), §10.2.3 (Retry-After).
    """

    code = "capacity_exhausted"

    def __init__(self, message: str, *, retry_after_seconds: int, data: Any = None) -> None:
        super().__init__(message, data=data)
        self.retry_after_seconds = retry_after_seconds
        self.headers["Retry-After"] = str(retry_after_seconds)


class ServiceTimeoutError(GatewayError):
    """The agent did not reply within its ``invoke_timeout_seconds``; the backend call was cancelled.

    JSON-RPC -32003 "Agent reply timeout" with ``data``: ``{"code": "service_timeout", "timeout_seconds": <n>}``;
    504 where the plane has a status. Spec: the original platform's MCP tools/call timeout and error catalogue.
    """

    code = "service_timeout"
    http_status = 504
    jsonrpc_code = AGENT_REPLY_TIMEOUT

    def __init__(self, timeout_seconds: float) -> None:
        super().__init__("Agent reply timeout", data={"code": self.code, "timeout_seconds": timeout_seconds})
        self.timeout_seconds = timeout_seconds


class RateLimitedError(GatewayError):
    """The caller is over one of its own limits (others are still served); sent with ``Retry-After``.

    Spec: RFC 6585 §4 (429), RFC 9110 §10.2.3 (Retry-After).
    """

    code = "rate_limited"
    http_status = 429
    jsonrpc_code = INTERNAL_ERROR

    def __init__(self, message: str, *, retry_after_seconds: int, data: Any = None) -> None:
        super().__init__(message, data=data)
        self.retry_after_seconds = retry_after_seconds
        self.headers["Retry-After"] = str(retry_after_seconds)


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


class InternalError(GatewayError):
    code = "internal_error"
