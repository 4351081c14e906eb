"""The MCP endpoint ``/{agentId}/mcp`` (alias ``/agents/{agentId}/mcp``): checks, agent lookup, dispatch.

One route and a dict lookup serve every agent (Starlette ``Mount`` routing is linear in the
number of mounts). After the transport checks, the request goes to the agent's SDK session
manager, which serves both protocol eras on the one URL.
"""

from __future__ import annotations

import logging
from typing import Any

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import Message, Receive, Scope, Send

from hivegate.auth.gate import EndpointGate
from hivegate.auth.principal import principal_scope
from hivegate.errors import (
    AgentNotFoundError,
    BatchNotSupportedError,
    GatewayError,
)
from hivegate.mcp.fastpath import fast_candidate, serve_fast
from hivegate.mcp.host import AgentHost
from hivegate.mcp.legacy_fastpath import legacy_candidate, serve_legacy_fast
from hivegate.mcp.rendering import jsonrpc_error_response
from hivegate.mcp.runtime import AgentRuntime
from hivegate.mcp.transport import (
    HostPolicy,
    accepts_json_and_sse,
    check_accept,
    check_content_type,
    check_jsonrpc_envelope,
    decode_headers,
    parse_json,
    read_body,
    replay_receive,
)
from hivegate.settings import Settings

__all__ = ["McpEndpoint"]

logger = logging.getLogger(__name__)


class McpEndpoint:
    """ASGI app for ``/{agentId}/mcp``; reads ``agent_id`` from the route's path params."""

    def __init__(self, host: AgentHost, settings: Settings, gate: EndpointGate) -> None:
        self._host = host
        self._gate = gate
        self._policy = HostPolicy(settings.server.allowed_hosts, settings.server.allowed_origins)
        self._max_body_bytes = settings.server.max_body_bytes
        self._fast_path = settings.mcp.fast_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self._serve(scope, receive, send)
        except GatewayError as exc:
            await jsonrpc_error_response(exc)(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        pairs = decode_headers(scope)
        headers: dict[str, str] = {}
        for name, value in pairs:
            # The first of repeated lines wins, as in the SDK's era routing (a repeated routing
            # header is refused with -32020 on the modern wire).
            headers.setdefault(name, value)
        self._policy.check(headers)
        agent_id: str = scope["path_params"]["agent_id"]
        principal = await self._gate.admit_agent(agent_id, self._host.spec(agent_id), scope["path"], pairs)
        with principal_scope(principal):
            await self._serve_admitted(scope, receive, send, agent_id, pairs, headers)

    async def _serve_admitted(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        agent_id: str,
        pairs: list[tuple[str, str]],
        headers: dict[str, str],
    ) -> None:
        # The SDK's routing rule: a handshake version or no version header is the legacy era.
        version = headers.get("mcp-protocol-version")
        modern = version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS
        body: bytes | None = None
        message: dict[str, Any] | None = None
        decoded: Any = None
        if scope["method"] == "POST":
            check_content_type(headers)
            body = await read_body(scope, receive, self._max_body_bytes, headers)
            if body.lstrip()[:1] == b"[":
                raise BatchNotSupportedError(
                    "JSON-RPC batches are not supported: send one request per POST "
                    "(batching existed only in MCP 2025-03-26 and was removed in 2025-06-18)"
                )
            if modern:
                check_accept(headers)
                decoded = parse_json(body)  # strict JSON: NaN / Infinity are -32700 here as on the legacy wire
            else:
                message = check_jsonrpc_envelope(body)
            receive = replay_receive(body, receive)
        runtime = await self._runtime(agent_id)
        if modern:
            if body is not None and self._fast_path:
                request = fast_candidate(runtime, headers, decoded)
                if request is not None:
                    await serve_fast(runtime, request, pairs, headers, send)
                    return
        elif message is not None:
            version = legacy_candidate(runtime, headers, message) if self._fast_path else None
            if version is not None and accepts_json_and_sse(headers.get("accept", "")):
                await serve_legacy_fast(runtime, message, version, headers, send)
                return
            send = self._watch_legacy(runtime, headers, message, send)
        elif "mcp-session-id" not in headers:
            send = _without_session_header_on_error(send)
        elif scope["method"] == "DELETE":
            runtime.legacy_sessions.forget(headers["mcp-session-id"])
        await runtime.manager.handle_request(scope, receive, send)

    @staticmethod
    def _watch_legacy(runtime: AgentRuntime, headers: dict[str, str], message: dict[str, Any], send: Send) -> Send:
        """Follow the handshake of a legacy POST that the SDK serves (for the lean legacy path)."""
        session_id = headers.get("mcp-session-id")
        method = message.get("method")
        if session_id is None:
            send = _without_session_header_on_error(send)
            if method == "initialize":
                send = runtime.legacy_sessions.watch_initialize(message.get("params"), send)
        elif method == "notifications/initialized":
            send = runtime.legacy_sessions.watch_initialized(session_id, send)
        return send

    async def _runtime(self, agent_id: str) -> AgentRuntime:
        """The agent's running server (the gate has checked existence, access and ``mcp_enabled``).

        Raises:
            AgentNotFoundError: the agent was deleted since the gate looked (404).
            AgentUnavailableError: its backend cannot be started (503).
        """
        runtime = await self._host.runtime(agent_id)
        if runtime is None:
            raise AgentNotFoundError(agent_id)
        return runtime


def _without_session_header_on_error(send: Send) -> Send:
    """Drop the ``Mcp-Session-Id`` the SDK mints on a refused opening request: no such session exists."""

    async def filtered(message: Message) -> None:
        if message["type"] == "http.response.start" and message["status"] >= 400:
            message = {**message, "headers": [(k, v) for k, v in message["headers"] if k.lower() != b"mcp-session-id"]}
        await send(message)

    return filtered
