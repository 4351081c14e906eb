"""The MCP endpoint ``/{agentId}/mcp`` (alias ``/agents/{agentId}/mcp``): checks, agent lookup, dispatch.

One route and a dict lookup serve every agent (Starlette ``Mount`` routing is linear in the
number of mounts). After the transport checks, the request goes to the agent's SDK session
manager, which serves both protocol eras on the one URL.
"""

from __future__ import annotations

import logging

from starlette.types import Receive, Scope, Send

from hivegate.errors import AgentNotFoundError, BatchNotSupportedError, GatewayError, InternalError
from hivegate.mcp.fastpath import fast_candidate, serve_fast
from hivegate.mcp.host import AgentHost
from hivegate.mcp.rendering import jsonrpc_error_response
from hivegate.mcp.transport import (
    HostPolicy,
    check_content_type,
    read_body,
    replay_receive,
    strip_header_whitespace,
)
from hivegate.settings import Settings

__all__ = ["McpEndpoint"]

logger = logging.getLogger(__name__)


class McpEndpoint:
    """ASGI app for ``/{agentId}/mcp``; reads ``agent_id`` from the route's path params."""

    def __init__(self, host: AgentHost, settings: Settings) -> None:
        self._host = host
        self._policy = HostPolicy(settings.server.allowed_hosts, settings.server.allowed_origins)
        self._max_body_bytes = settings.server.max_body_bytes
        self._fast_path = settings.mcp.fast_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self._serve(scope, receive, send)
        except GatewayError as exc:
            await jsonrpc_error_response(exc)(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope["headers"] = strip_header_whitespace(scope["headers"])
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        self._policy.check(headers)
        agent_id: str = scope["path_params"]["agent_id"]
        body: bytes | None = None
        if scope["method"] == "POST":
            check_content_type(headers)
            body = await read_body(scope, receive, self._max_body_bytes, headers)
            if body.lstrip()[:1] == b"[":
                raise BatchNotSupportedError(
                    "JSON-RPC batches are not supported: send one request per POST "
                    "(batching existed only in MCP 2025-03-26 and was removed in 2025-06-18)"
                )
            receive = replay_receive(body, receive)
        try:
            runtime = await self._host.runtime(agent_id)
        except GatewayError:
            raise
        except Exception:
            logger.exception("cannot start agent %s", agent_id)
            raise InternalError("The agent could not be started.") from None
        if runtime is None:
            raise AgentNotFoundError(agent_id)
        if body is not None and self._fast_path:
            decoded = fast_candidate(runtime, headers, body)
            if decoded is not None:
                await serve_fast(runtime, decoded, scope, receive, send)
                return
        await runtime.manager.handle_request(scope, receive, send)
