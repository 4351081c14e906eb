"""The one renderer for MCP-plane errors raised before a request reaches the JSON-RPC layer.

Spec: JSON-RPC 2.0 §5.1 (error object; ``id`` is null when the request id is unknown).
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response

from hivegate.errors import GatewayError

__all__ = ["jsonrpc_error_body", "jsonrpc_error_response"]


def jsonrpc_error_body(exc: GatewayError, request_id: Any = None) -> bytes:
    """``{"jsonrpc":"2.0","id":…,"error":{"code","message","data"?}}`` with ``data.code`` = hivegate's error code."""
    data: dict[str, Any] = {"code": exc.code}
    if isinstance(exc.data, dict):
        data.update(exc.data)
    elif exc.data is not None:
        data["detail"] = exc.data
    error = {"code": exc.jsonrpc_code, "message": exc.message, "data": data}
    return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "error": error})


def jsonrpc_error_response(exc: GatewayError, request_id: Any = None) -> Response:
    """The HTTP response for ``exc``: its status, its extra headers and a JSON-RPC error body."""
    return Response(
        jsonrpc_error_body(exc, request_id),
        status_code=exc.http_status,
        media_type="application/json",
        headers=exc.headers or None,
    )
