"""One MCP endpoint's SDK side: its low-level ``Server``, session manager, handshake-era sessions, bus.

Every endpoint kind — each agent's ``/{agentId}/mcp`` and the user-level ``/mcp`` — has exactly
one :class:`McpSurface`, built from the handlers the kind supplies (:class:`SurfaceHandlers`).
The surface is the one place where:

- the SDK ``Server`` is built from handlers (both eras; the handshake-only methods when given);
- handshake-era sessions are bound to their endpoint (one session manager per surface: a
  session id of one endpoint is unknown, 404, on every other) and, where the surface is
  ``per_user``, to the user who opened them (:meth:`McpSurface.bind`);
- handlers run with the principal of the request being served, whichever task the SDK runs
  them in (a handshake-era session's tasks inherit the opener's context);
- list changes are announced, to listen streams and open handshake-era sessions' GET streams,
  of everyone or of some users (:meth:`McpSurface.announce`).

Spec: MCP 2025-11-25 basic/transports#session-management; MCP 2026-07-28
basic/utilities/subscriptions (``subscriptions/listen``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, fields
from typing import Any, Protocol

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.subscriptions import (
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ServerEvent,
    SubscriptionBus,
    ToolsListChanged,
)
from mcp_types import SetLevelRequestParams, SubscribeRequestParams, UnsubscribeRequestParams
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from hivegate.auth.principal import Principal, current_principal, principal_scope
from hivegate.mcp.event_journal import EventJournal
from hivegate.mcp.event_store import EndpointEventStore
from hivegate.mcp.legacy_sessions import BudgetedSessionManager, LegacySessions
from hivegate.mcp.sdk_bridge import refresh_server_info
from hivegate.mcp.session_context import session_scope
from hivegate.settings import Settings

__all__ = ["PRINCIPAL_KEY", "EndpointTarget", "McpSurface", "SurfaceBus", "SurfaceHandlers", "audience_key"]

logger = logging.getLogger(__name__)

PRINCIPAL_KEY = "hivegate.principal"
"""Scope key of the admitted principal (set by :meth:`McpSurface.bind`, read by the server middleware)."""
_SESSION_HEADER = "mcp-session-id"
_NOTIFY: dict[type[Any], Callable[[ServerSession], Awaitable[None]]] = {
    ToolsListChanged: ServerSession.send_tool_list_changed,
    ResourcesListChanged: ServerSession.send_resource_list_changed,
    PromptsListChanged: ServerSession.send_prompt_list_changed,
}
_SESSION_CLIENT_ID = "hivegate"

Handler = Callable[[ServerRequestContext[Any, Any], Any], Awaitable[Any]]


def audience_key(principal: Principal) -> str | None:
    """Who an announcement addressed to users reaches: the casefolded username (registry owners are usernames)."""
    return principal.username.casefold() if principal.username is not None else None


class _Caller(AuthenticatedUser):
    """The admitted principal as the SDK sees it in ``scope["user"]``.

    The SDK binds a handshake-era session to ``(client_id, issuer, subject)`` of the user that
    opened it; ``subject`` is the user id and the rest is constant, so the binding is the user.
    """

    def __init__(self, principal: Principal) -> None:
        super().__init__(AccessToken(token="", client_id=_SESSION_CLIENT_ID, scopes=[], subject=principal.user_id))


@dataclass(frozen=True, slots=True)
class SurfaceHandlers:
    """The request handlers an endpoint kind supplies (the low-level ``Server``'s ``on_*`` arguments).

    ``subscribe``, ``unsubscribe`` and ``set_logging_level`` are handshake-era only (removed in
    2026-07-28, where the SDK answers them -32601); None leaves them unregistered.
    """

    list_tools: Handler
    call_tool: Handler
    list_resources: Handler
    list_resource_templates: Handler
    read_resource: Handler
    list_prompts: Handler
    get_prompt: Handler
    completion: Handler
    subscribe: Handler | None = None
    unsubscribe: Handler | None = None
    set_logging_level: Handler | None = None

    @classmethod
    def of(cls, handlers: object) -> SurfaceHandlers:
        """The ``on_{field}`` methods of ``handlers`` (an endpoint kind's handler object); the
        handshake-only ones it lacks stay unregistered."""
        found = {f.name: getattr(handlers, f"on_{f.name}", None) for f in fields(cls)}
        return cls(**{name: handler for name, handler in found.items() if handler is not None})


class _ListChangedServer(Server[Any]):
    """An SDK server whose handshake-era sessions advertise ``listChanged`` (sent on the GET stream)."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        options = notification_options or NotificationOptions(
            prompts_changed=True, resources_changed=True, tools_changed=True
        )
        return super().create_initialization_options(options, experimental_capabilities, extensions)


class SurfaceBus:
    """Listen-stream fan-out (a ``SubscriptionBus`` for the SDK's ``ListenHandler``).

    Each stream is keyed by its opener (:func:`audience_key` of :func:`current_principal` in the
    listen request's own task, where the SDK subscribes), so an event can go to everyone or to
    some users only. A backend server's own bus can be relayed to every stream (:meth:`relay_from`).
    """

    def __init__(self) -> None:
        self._listeners: dict[object, tuple[str | None, Callable[[ServerEvent], None]]] = {}
        self._relay: Callable[[], None] | None = None

    async def publish(self, event: ServerEvent) -> None:
        """Deliver ``event`` to every stream (Spec: the SDK's ``SubscriptionBus.publish``)."""
        self.deliver(event)
        await anyio.lowlevel.checkpoint()

    def deliver(self, event: ServerEvent, users: frozenset[str] | None = None) -> None:
        """Deliver ``event`` now to the streams of ``users`` (casefolded usernames), or to all for None."""
        for user, listener in list(self._listeners.values()):
            if users is None or user in users:
                try:
                    listener(event)
                except Exception:  # fan-out boundary
                    logger.exception("listen-stream listener raised")

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        token = object()
        self._listeners[token] = (audience_key(current_principal()), listener)

        def unsubscribe() -> None:
            self._listeners.pop(token, None)

        return unsubscribe

    def relay_from(self, source: SubscriptionBus | None) -> None:
        """Relay the events of ``source`` (a backend's ``SubscriptionBus``, or None to stop) to every stream."""
        if self._relay is not None:
            self._relay()
            self._relay = None
        if source is not None:
            self._relay = source.subscribe(self.deliver)


class McpSurface:
    """The SDK side of one endpoint. Serve requests inside ``async with surface.running():``.

    Args:
        name: the server's name (``serverInfo.name``; the agent id, or ``hivegate``).
        handlers: what serves each method.
        settings: ``mcp`` limits (sessions, listen streams, SSE retry, idle timeout) and the body limit.
        journal: the process's kept SSE events.
        per_user: bind each handshake-era session to the user who opened it (else to the endpoint only).
        tool_input_schema: ``inputSchema`` by tool name, for the SDK's ``Mcp-Param-*`` validation.
        identity: further ``Server`` arguments (``title``, ``version``, ``instructions`` …).
    """

    def __init__(
        self,
        name: str,
        handlers: SurfaceHandlers,
        settings: Settings,
        journal: EventJournal,
        *,
        per_user: bool,
        tool_input_schema: Callable[[object], dict[str, Any] | None],
        **identity: Any,
    ) -> None:
        self._per_user = per_user
        self.bus = SurfaceBus()
        self.events = EndpointEventStore(journal)
        self.server: Server[Any] = self._build_server(name, handlers, settings, tool_input_schema, identity)
        self.manager = BudgetedSessionManager(
            app=self.server,
            event_store=self.events,
            retry_interval=settings.mcp.sse_retry_interval_ms,
            json_response=False,
            security_settings=None,  # hivegate checks Host/Origin before a request reaches the SDK
            session_idle_timeout=settings.mcp.session_idle_timeout_seconds,
            max_request_body_size=settings.server.max_body_bytes,
            max_sessions=settings.mcp.max_sessions_per_agent,
        )
        self.sessions = LegacySessions(self.manager, settings.mcp.session_idle_timeout_seconds)
        self.refresh_identity()

    def _build_server(
        self,
        name: str,
        h: SurfaceHandlers,
        settings: Settings,
        tool_input_schema: Callable[[object], dict[str, Any] | None],
        identity: dict[str, Any],
    ) -> Server[Any]:
        server = _ListChangedServer(
            name,
            on_list_tools=h.list_tools,
            on_call_tool=h.call_tool,
            on_list_resources=h.list_resources,
            on_list_resource_templates=h.list_resource_templates,
            on_read_resource=h.read_resource,
            on_list_prompts=h.list_prompts,
            on_get_prompt=h.get_prompt,
            on_completion=h.completion,
            on_subscriptions_listen=ListenHandler(self.bus, max_subscriptions=settings.mcp.max_listen_streams_total),
            get_tool_input_schema=tool_input_schema,
            **identity,
        )
        for method, params_type, handler in (
            ("resources/subscribe", SubscribeRequestParams, h.subscribe),
            ("resources/unsubscribe", UnsubscribeRequestParams, h.unsubscribe),
            ("logging/setLevel", SetLevelRequestParams, h.set_logging_level),
        ):
            if handler is not None:
                server.add_request_handler(method, params_type, handler)
        server.middleware.append(self._as_caller)
        server.middleware.append(self.events.track_session)
        return server

    def refresh_identity(self) -> None:
        """Make results carry the server's identity fields again (after changing ``name``, ``title`` …)."""
        refresh_server_info(self.server)

    # -- sessions ----------------------------------------------------------------------

    def owner(self, principal: Principal) -> str | None:
        """Who a handshake-era session of ``principal`` belongs to: the user id where sessions are
        per user, else None (any caller the endpoint admits may continue it)."""
        return principal.user_id if self._per_user else None

    def bind(self, scope: Scope, principal: Principal) -> None:
        """Bind the request to ``principal`` before the SDK serves it: the handlers see it, and a
        per-user surface's SDK opens or continues only that user's sessions (another user's: 404)."""
        scope[PRINCIPAL_KEY] = principal
        if self._per_user:
            scope["user"] = _Caller(principal)

    async def serve_sdk(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one bound request (:meth:`bind`) through the SDK's session manager."""
        await self.events.handle(self.manager.handle_request, scope, receive, send)

    async def _as_caller(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Serve each request as its own caller, and remember handshake-era sessions for announcements."""
        request = ctx.request
        principal = request.scope.get(PRINCIPAL_KEY) if isinstance(request, Request) else None
        if not isinstance(principal, Principal):
            return await call_next(ctx)
        assert isinstance(request, Request)
        session_id = None
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            session_id = request.headers.get(_SESSION_HEADER)
            if session_id is not None:
                self.sessions.remember(session_id, ctx.session, audience_key(principal))
        with principal_scope(principal), session_scope(session_id):
            return await call_next(ctx)

    # -- lifecycle and announcements ---------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncGenerator[McpSurface]:
        """Run the session manager; on exit every session ends and the kept events are dropped."""
        try:
            async with self.manager.run():
                yield self
        finally:
            self.bus.relay_from(None)
            self.events.close()

    async def announce(self, event: ServerEvent, users: frozenset[str] | None = None) -> None:
        """Tell listen streams and handshake-era GET streams of ``users`` (None: everyone) about ``event``.

        Resource updates go to listen streams only (handshake-era clients subscribe on the agents'
        endpoints, where the backend's own session notifies them).
        """
        self.bus.deliver(event, users)
        await anyio.lowlevel.checkpoint()
        notify = _NOTIFY.get(type(event))
        if notify is None:
            return
        for session_id, session in self.sessions.notifiable(users):
            try:
                with anyio.fail_after(2):
                    await notify(session)
            except Exception:  # the session ended or its stream is gone: forget it
                self.sessions.forget(session_id)


class EndpointTarget(Protocol):
    """What serves a request once admitted: an agent's runtime, or the user-level endpoint."""

    @property
    def surface(self) -> McpSurface:
        """The endpoint's SDK side."""
        ...

    @property
    def label(self) -> str:
        """Who serves the request, for the log."""
        ...

    def lean_allowed(self, message: dict[str, Any], *, modern: bool) -> bool:
        """Whether a plain request (already checked by the lean path's candidate test) may skip the SDK:
        its handlers will neither send on the session nor stream. ``modern``: the request is a 2026-07-28
        one (else it belongs to a handshake-era session, which a server may send requests and log
        messages to at any time)."""
        ...

    def mcp_param_schema(self, name: object) -> dict[str, Any] | None:
        """The ``inputSchema`` that ``Mcp-Param-*`` headers of a call of tool ``name`` must mirror, or None."""
        ...
