"""The MCP endpoint ``/{agentId}/mcp`` (alias ``/agents/{agentId}/mcp``): checks, agent lookup, dispatch.

One route and a dict lookup serve every agent (Starlette ``Mount`` routing is linear in the
number of mounts). After the transport checks and the reply negotiation
(:mod:`hivegate.mcp.negotiation`), a request is served by a lean path (:mod:`hivegate.mcp.fastpath`,
:mod:`hivegate.mcp.legacy_fastpath`, including one-shot requests without a session) or by the
agent's SDK session manager, which serves both protocol eras on the one URL; a 2025-03-26
session's batch is split into such requests (:mod:`hivegate.mcp.batch`).
"""

from __future__ import annotations

import logging
import re
from typing import Any

from starlette.types import Receive, Scope, Send

from hivegate.agents.model import AGENT_ID_PATTERN
from hivegate.auth.gate import EndpointGate
from hivegate.auth.principal import current_principal, principal_scope
from hivegate.calls.cancel import cancel_on_disconnect
from hivegate.errors import AgentNotFoundError, BatchNotSupportedError, GatewayError
from hivegate.mcp.batch import (
    BATCH_ELEMENT,
    BATCH_VERSION,
    ServeOne,
    element_request,
    refuse_ended_session,
    serve_batch,
)
from hivegate.mcp.budgets import Charge
from hivegate.mcp.fastpath import fast_candidate, serve_fast
from hivegate.mcp.host import AgentHost
from hivegate.mcp.legacy_fastpath import legacy_candidate, oneshot_candidate, serve_legacy_fast, serve_oneshot
from hivegate.mcp.negotiation import adapt_send, negotiate, refuse_unstreamable
from hivegate.mcp.rendering import jsonrpc_error_response
from hivegate.mcp.runtime import AgentRuntime
from hivegate.mcp.transport import (
    HostPolicy,
    McpPost,
    is_modern,
    read_mcp_post,
    replay_receive,
    request_headers,
    without_session_header_on_error,
)
from hivegate.settings import Settings

__all__ = ["McpEndpoint"]

logger = logging.getLogger(__name__)

_AGENT_ID = re.compile(AGENT_ID_PATTERN)


def _in_batch_session(runtime: AgentRuntime, headers: dict[str, str]) -> bool:
    """Whether the request belongs to an initialized session negotiated at 2025-03-26 (batches allowed)."""
    session_id = headers.get("mcp-session-id")
    return session_id is not None and runtime.legacy_sessions.ready_version(session_id) == BATCH_VERSION


class McpEndpoint:
    """ASGI app for ``/{agentId}/mcp``; reads ``agent_id`` from the route's path params."""

    def __init__(self, host: AgentHost, settings: Settings, gate: EndpointGate) -> None:
        self._host = host
        self._gate = gate
        self._policy = HostPolicy(settings.server.allowed_hosts, settings.server.allowed_origins)
        self._max_body_bytes = settings.server.max_body_bytes
        self._fast_path = settings.mcp.fast_path
        self._max_batch_messages = settings.mcp.max_batch_messages

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self._serve(scope, receive, send)
        except GatewayError as exc:
            await jsonrpc_error_response(exc)(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        pairs, headers = request_headers(scope)
        self._policy.check(headers)
        agent_id: str = scope["path_params"]["agent_id"]
        if _AGENT_ID.fullmatch(agent_id) is None:
            # No agent can have this id, so a 404 leaks nothing; and the id never reaches a header.
            raise AgentNotFoundError(agent_id[:64])
        principal = await self._gate.admit_agent(agent_id, self._host.spec(agent_id), scope["path"], pairs)
        with principal_scope(principal), self._host.budgets.body_charge(scope, principal) as charge:
            await self._serve_admitted(scope, receive, send, agent_id, pairs, headers, charge)

    async def _serve_admitted(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        agent_id: str,
        pairs: list[tuple[str, str]],
        headers: dict[str, str],
        charge: Charge | None = None,
    ) -> None:
        """Serve an admitted request; ``charge`` takes its body's bytes (None: a batch element, already charged)."""
        mode = negotiate(scope, headers.get("accept"))
        send = adapt_send(send, mode)
        modern = is_modern(headers)
        runtime = await self._runtime(agent_id)
        body: bytes | None = None
        message: dict[str, Any] | None = None
        decoded: Any = None
        if scope["method"] == "POST":
            post = await self._read_post(scope, receive, headers, runtime, modern=modern, charge=charge)
            body, receive = post.body, post.receive
            if isinstance(post.decoded, list):
                serve_one = self._batch_element(scope, receive, agent_id, pairs, headers)
                await serve_batch(post.decoded, serve_one, send, max_messages=self._max_batch_messages)
                return
            if modern:
                decoded = post.decoded
                refuse_unstreamable(mode, decoded)
            else:
                message = post.decoded
        if modern:
            if body is not None and self._fast_path:
                request = fast_candidate(runtime, headers, decoded)
                if request is not None:
                    await cancel_on_disconnect(
                        receive,
                        lambda: serve_fast(runtime, request, pairs, headers, send),
                        invokes=request["method"] == "tools/call",
                    )
                    return
        elif message is not None:
            if oneshot_candidate(headers, message):
                await cancel_on_disconnect(
                    receive,
                    lambda: serve_oneshot(runtime.server, agent_id, message, send),
                    invokes=message.get("method") == "tools/call",
                )
                return
            version = legacy_candidate(runtime, headers, message) if self._fast_path else None
            if version is not None:
                await self._host.lean_calls.serve(
                    headers["mcp-session-id"],
                    message["id"],
                    receive,
                    send,
                    lambda send: serve_legacy_fast(runtime, message, version, headers, send),
                    invokes=message.get("method") == "tools/call",
                )
                return
            self._host.lean_calls.cancel(headers.get("mcp-session-id"), message)
            send = self._watch_legacy(runtime, headers, message, send)
        elif "mcp-session-id" not in headers:
            send = without_session_header_on_error(send)
        elif scope["method"] == "DELETE":
            runtime.legacy_sessions.forget(headers["mcp-session-id"])
        with self._host.budgets.admit(
            scope, headers, decoded if modern else message, current_principal(), modern=modern
        ):
            await runtime.events.handle(runtime.manager.handle_request, scope, receive, send)

    async def _read_post(
        self,
        scope: Scope,
        receive: Receive,
        headers: dict[str, str],
        runtime: AgentRuntime,
        *,
        modern: bool,
        charge: Charge | None,
    ) -> McpPost:
        """The POST's body (:func:`~hivegate.mcp.transport.read_mcp_post`); batches only in a 2025-03-26 session.

        Raises:
            SessionNotFoundError: a batch naming a session that has ended (404, as a single request gets).
            GatewayError: as :func:`~hivegate.mcp.transport.read_mcp_post`.
        """
        allow_batch = BATCH_ELEMENT not in scope and _in_batch_session(runtime, headers)
        try:
            return await read_mcp_post(
                scope, receive, headers, self._max_body_bytes, modern=modern, allow_batch=allow_batch, charge=charge
            )
        except BatchNotSupportedError:
            refuse_ended_session(headers, modern=modern, live=runtime.legacy_sessions.live)
            raise

    def _batch_element(
        self, scope: Scope, receive: Receive, agent_id: str, pairs: list[tuple[str, str]], headers: dict[str, str]
    ) -> ServeOne:
        """Serve one element of a batch as a POST of its own, answered in JSON (:mod:`hivegate.mcp.batch`)."""

        async def serve_one(body: bytes, send: Send) -> None:
            element_scope, element_headers = element_request(scope, headers, body)
            await self._serve_admitted(
                element_scope, replay_receive(body, receive), send, agent_id, pairs, element_headers
            )

        return serve_one

    @staticmethod
    def _watch_legacy(runtime: AgentRuntime, headers: dict[str, str], message: dict[str, Any], send: Send) -> Send:
        """Follow the handshake of a legacy POST that the SDK serves (for the lean legacy path)."""
        session_id = headers.get("mcp-session-id")
        method = message.get("method")
        if session_id is None:
            send = without_session_header_on_error(send)
            if method == "initialize":
                send = runtime.legacy_sessions.watch_initialize(message.get("params"), send)
        elif method == "notifications/initialized":
            send = runtime.legacy_sessions.watch_initialized(session_id, send)
        return send

    async def _runtime(self, agent_id: str) -> AgentRuntime:
        """The agent's running server (the gate has checked existence, access and ``mcp_enabled``).

        Raises:
            AgentNotFoundError: the agent was deleted since the gate looked (404).
            AgentServiceUnavailableError: its backend cannot be started (503).
        """
        runtime = await self._host.runtime(agent_id)
        if runtime is None:
            raise AgentNotFoundError(agent_id)
        return runtime
