"""The one conversion of hivegate's errors for the SDK: what a handler raises becomes an ``MCPError``.

Every handler registered on an endpoint's SDK ``Server`` (the agents' and the user-level
endpoint's; the same handlers serve the lean paths) is wrapped by :func:`guarded`:

- a :class:`~hivegate.errors.GatewayError` becomes the JSON-RPC error of its code, era-aware
  (:func:`to_mcp_error`: resource not found is -32602 on 2026-07-28, -32002 before; SEP-2164);
- an ``MCPError`` or a params ``ValidationError`` passes unchanged (the SDK words them);
- anything else is logged with its traceback and hidden behind -32603 "Internal error".
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from hivegate.errors import INTERNAL_ERROR, LEGACY_RESOURCE_NOT_FOUND, GatewayError, ResourceNotFoundError

__all__ = ["guarded", "to_mcp_error"]

logger = logging.getLogger(__name__)

H = TypeVar("H", bound=Callable[..., Awaitable[Any]])


def to_mcp_error(exc: GatewayError, protocol_version: str) -> MCPError:
    """Render a gateway error as the JSON-RPC error of the request's protocol era."""
    code = exc.jsonrpc_code
    if isinstance(exc, ResourceNotFoundError) and protocol_version not in MODERN_PROTOCOL_VERSIONS:
        code = LEGACY_RESOURCE_NOT_FOUND
    return MCPError(code, exc.message, data=exc.data)


def guarded(describe: Callable[[Any], str]) -> Callable[[H], H]:
    """A decorator for handler methods ``(self, ctx, params)``: see the module docstring.

    Args:
        describe: who serves the request, from the handler's ``self`` (for the log).
    """

    def decorate(handler: H) -> H:
        @functools.wraps(handler)
        async def wrapper(self: Any, ctx: ServerRequestContext[Any, Any], params: Any) -> Any:
            try:
                return await handler(self, ctx, params)
            except GatewayError as exc:
                raise to_mcp_error(exc, ctx.protocol_version) from None
            except (MCPError, ValidationError):
                raise
            except Exception:
                logger.exception("%s: %s failed", describe(self), ctx.method)
                raise MCPError(INTERNAL_ERROR, "Internal error") from None

        return wrapper  # type: ignore[return-value]  # same signature as the wrapped handler

    return decorate
