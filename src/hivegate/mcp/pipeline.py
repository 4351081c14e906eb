"""The one request pipeline of every MCP endpoint (``/{agentId}/mcp`` and ``/mcp``).

An endpoint is this pipeline parameterised by an :class:`EndpointKind` — which credential the
gate admits and which :class:`~hivegate.mcp.surface.EndpointTarget` serves the request. The
steps, in order:

1. transport checks: ``Host`` / ``Origin`` (:class:`~hivegate.mcp.transport.HostPolicy`);
2. the credential gate (:meth:`EndpointKind.admit`); the principal is current from here on,
   and the body's bytes are charged to it (:mod:`hivegate.mcp.budgets`);
3. reply negotiation (:mod:`hivegate.mcp.negotiation`) and the target (:meth:`EndpointKind.target`);
4. the body (:func:`~hivegate.mcp.transport.read_mcp_post`); a 2025-03-26 session's batch is
   split and each element admitted again (step 2, its bytes already charged) and served from
   step 3 on (:mod:`hivegate.mcp.batch`);
5. era dispatch: a plain 2026-07-28 request takes the lean path (:mod:`hivegate.mcp.fastpath`);
   a handshake-era one without a session is answered one-shot, one inside an initialized
   session of the caller takes the lean legacy path (:mod:`hivegate.mcp.legacy_fastpath`);
6. anything else goes to the SDK transport, bound to the principal
   (:meth:`~hivegate.mcp.surface.McpSurface.bind`), with the handshake followed for step 5.

A :class:`~hivegate.errors.GatewayError` raised by any step is answered here, as a JSON-RPC error
body with its HTTP status (the one place for the pipeline; the handlers' errors are converted
for the SDK by :mod:`hivegate.mcp.sdk_errors`).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

from starlette.types import Receive, Scope, Send

from hivegate.auth.principal import Principal, principal_scope
from hivegate.calls.cancel import LeanCalls, cancel_on_disconnect
from hivegate.errors import BatchNotSupportedError, GatewayError, InvalidRequestError
from hivegate.mcp.batch import (
    BATCH_ELEMENT,
    BATCH_VERSION,
    ServeOne,
    element_request,
    refuse_ended_session,
    serve_batch,
)
from hivegate.mcp.budgets import Charge, McpBudgets
from hivegate.mcp.fastpath import fast_candidate, serve_fast
from hivegate.mcp.legacy_fastpath import legacy_candidate, oneshot_candidate, serve_legacy_fast, serve_oneshot
from hivegate.mcp.negotiation import adapt_send, negotiate, refuse_unstreamable
from hivegate.mcp.rendering import jsonrpc_error_response
from hivegate.mcp.surface import EndpointTarget
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

__all__ = ["EndpointKind", "McpPipeline"]

_SESSION_HEADER = "mcp-session-id"


class EndpointKind(Protocol):
    """What differs between the agent endpoints and the user-level endpoint."""

    async def admit(self, scope: Scope, pairs: list[tuple[str, str]]) -> Principal:
        """The admitted caller of the request (``pairs``: its header lines, lower-case names).

        Raises:
            GatewayError: refused (401, 403, 404 …), answered by the pipeline.
        """
        ...

    async def target(self, scope: Scope) -> EndpointTarget:
        """What serves the admitted request.

        Raises:
            GatewayError: nothing can (an agent deleted since the gate looked, 404; its backend down, 503).
        """
        ...


class _Request(NamedTuple):
    """One admitted request on its way through the steps."""

    scope: Scope
    pairs: list[tuple[str, str]]
    headers: dict[str, str]
    principal: Principal


class McpPipeline:
    """The ASGI app of one endpoint kind (see the module docstring)."""

    def __init__(self, kind: EndpointKind, budgets: McpBudgets, lean_calls: LeanCalls, settings: Settings) -> None:
        self._kind = kind
        self._budgets = budgets
        self._lean_calls = lean_calls
        self._policy = HostPolicy(settings.server.allowed_hosts, settings.server.allowed_origins)
        self._max_body_bytes = settings.server.max_body_bytes
        self._fast_path = settings.mcp.fast_path
        self._max_batch_messages = settings.mcp.max_batch_messages

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self._serve(scope, receive, send)
        except GatewayError as exc:
            request_id = exc.request_id if isinstance(exc, InvalidRequestError) else None
            await jsonrpc_error_response(exc, request_id)(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        pairs, headers = request_headers(scope)
        self._policy.check(headers)
        principal = await self._kind.admit(scope, pairs)
        request = _Request(scope, pairs, headers, principal)
        with principal_scope(principal), self._budgets.body_charge(scope, principal) as charge:
            await self._serve_admitted(request, receive, send, charge)

    async def _serve_admitted(self, request: _Request, receive: Receive, send: Send, charge: Charge | None) -> None:
        """Serve an admitted request; ``charge`` takes its body's bytes (None: a batch element, already charged)."""
        scope, headers = request.scope, request.headers
        send = adapt_send(send, mode := negotiate(scope, headers.get("accept")))
        modern = is_modern(headers)
        target = await self._kind.target(scope)
        message: Any = None
        if scope["method"] == "POST":
            post = await self._read_post(request, receive, target, modern=modern, charge=charge)
            receive, message = post.receive, post.decoded
            if isinstance(message, list):
                serve_one = self._batch_element(request, receive)
                await serve_batch(message, serve_one, send, max_messages=self._max_batch_messages)
                return
            if modern:
                refuse_unstreamable(mode, message)
            if await self._served_lean(request, target, message, receive, send, modern=modern):
                return
            if not modern and isinstance(message, dict):
                self._lean_calls.cancel(headers.get(_SESSION_HEADER), message)
        send = self._follow_handshake(request, target, message, send, modern=modern)
        target.surface.bind(scope, request.principal)
        with self._budgets.admit(scope, headers, message, request.principal, modern=modern):
            await target.surface.serve_sdk(scope, receive, send)

    async def _read_post(
        self, request: _Request, receive: Receive, target: EndpointTarget, *, modern: bool, charge: Charge | None
    ) -> McpPost:
        """The POST's body (:func:`~hivegate.mcp.transport.read_mcp_post`); batches only in a 2025-03-26 session.

        Raises:
            SessionNotFoundError: a batch naming a session that has ended (404, as a single request gets).
            GatewayError: as :func:`~hivegate.mcp.transport.read_mcp_post`.
        """
        scope, headers = request.scope, request.headers
        sessions = target.surface.sessions
        session_id = headers.get(_SESSION_HEADER)
        allow_batch = (
            BATCH_ELEMENT not in scope
            and session_id is not None
            and sessions.ready_version(session_id) == BATCH_VERSION
        )
        try:
            return await read_mcp_post(
                scope, receive, headers, self._max_body_bytes, modern=modern, allow_batch=allow_batch, charge=charge
            )
        except BatchNotSupportedError:
            refuse_ended_session(headers, modern=modern, live=sessions.live)
            raise

    async def _served_lean(
        self, request: _Request, target: EndpointTarget, message: Any, receive: Receive, send: Send, *, modern: bool
    ) -> bool:
        """Serve a checked POST on a lean path if one takes it (see the module docstring); whether it did.

        A lean ``tools/call`` is cancelled when its client disconnects, and a handshake-era one also
        by the session's ``notifications/cancelled`` (:mod:`hivegate.calls.cancel`).
        """
        headers = request.headers
        if modern:
            candidate = fast_candidate(target, headers, message) if self._fast_path else None
            if candidate is None:
                return False
            await cancel_on_disconnect(
                receive,
                lambda: serve_fast(target, candidate, request.pairs, headers, send),
                invokes=candidate["method"] == "tools/call",
            )
            return True
        if oneshot_candidate(headers, message):
            await cancel_on_disconnect(
                receive,
                lambda: serve_oneshot(target.surface.server, target.label, message, send),
                invokes=message.get("method") == "tools/call",
            )
            return True
        owner = target.surface.owner(request.principal)
        version = legacy_candidate(target, headers, message, owner) if self._fast_path else None
        if version is None:
            return False
        await self._lean_calls.serve(
            headers[_SESSION_HEADER],
            message["id"],
            receive,
            send,
            lambda send: serve_legacy_fast(target, message, version, headers, send),
            invokes=message.get("method") == "tools/call",
        )
        return True

    @staticmethod
    def _follow_handshake(request: _Request, target: EndpointTarget, message: Any, send: Send, *, modern: bool) -> Send:
        """Follow the handshake of a handshake-era request the SDK serves (for the lean legacy path)."""
        if modern:
            return send
        scope, headers = request.scope, request.headers
        sessions = target.surface.sessions
        owner = target.surface.owner(request.principal)
        session_id = headers.get(_SESSION_HEADER)
        method = message.get("method") if isinstance(message, dict) else None
        if session_id is None:
            send = without_session_header_on_error(send)
            if method == "initialize":
                send = sessions.watch_initialize(message.get("params"), send, owner)
        elif method == "notifications/initialized":
            send = sessions.watch_initialized(session_id, send)
        elif scope["method"] == "DELETE" and sessions.belongs_to(session_id, owner):
            sessions.forget(session_id)
        return send

    def _batch_element(self, request: _Request, receive: Receive) -> ServeOne:
        """Serve one element of a batch as a POST of its own, answered in JSON (:mod:`hivegate.mcp.batch`)."""

        async def serve_one(body: bytes, send: Send) -> None:
            element_scope, element_headers = element_request(request.scope, request.headers, body)
            principal = await self._kind.admit(element_scope, request.pairs)  # each element is checked again
            element = _Request(element_scope, request.pairs, element_headers, principal)
            with principal_scope(principal):
                await self._serve_admitted(element, replay_receive(body, receive), send, None)

        return serve_one
