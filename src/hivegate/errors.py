"""hivegate's error tree: every layer raises these; one renderer per wire plane turns them into responses.

::

    GatewayError                      code             HTTP  JSON-RPC
    ├── InvalidRequestError           invalid_request   400  -32600
    │   ├── ParseError                parse_error       400  -32700
    │   ├── BatchNotSupportedError    batch_not_supported 400 -32600
    │   ├── PayloadTooLargeError      payload_too_large 413  -32600
    │   ├── UnsupportedMediaTypeError unsupported_media_type 415 -32600
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
    │   └── AgentUnavailableError     agent_unavailable 503  -32603
    ├── MisdirectedRequestError       invalid_host      421  -32600
    ├── NotAcceptableError            not_acceptable    406  -32600
    ├── AgentError                    agent_error       200  (an ``isError`` tool result)
    └── InternalError                 internal_error    500  -32603

Route code raises; it never builds error bodies itself. Tests assert ``code``, not messages.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "AgentError",
    "AgentNotFoundError",
    "AgentUnavailableError",
    "AuthenticationError",
    "BatchNotSupportedError",
    "ForbiddenOriginError",
    "GatewayError",
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
    "RequestTimeoutError",
    "ResourceNotFoundError",
    "ServiceUnavailableError",
    "SessionNotFoundError",
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


class GatewayError(Exception):
    """Root of hivegate's errors.

    Attributes:
        code: stable snake_case identifier (API contract; tests assert it).
        http_status: the status a plain HTTP rendering uses.
        jsonrpc_code: the JSON-RPC error code an MCP rendering uses.
        data: optional JSON-serialisable detail sent to the client (never internals).
    """

    code: ClassVar[str] = "gateway_error"
    http_status: ClassVar[int] = 500
    jsonrpc_code: ClassVar[int] = INTERNAL_ERROR

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


class PayloadTooLargeError(InvalidRequestError):
    code = "payload_too_large"
    http_status = 413


class UnsupportedMediaTypeError(InvalidRequestError):
    code = "unsupported_media_type"
    http_status = 415


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


class AgentUnavailableError(ServiceUnavailableError):
    """The agent's backend cannot be loaded or started; details go to the server log only."""

    code = "agent_unavailable"


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
