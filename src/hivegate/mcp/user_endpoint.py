"""The user-level MCP endpoint ``/mcp``: one server showing a user every agent they may use.

A request passes the same transport checks as on ``/{agentId}/mcp`` (:mod:`hivegate.mcp.transport`),
then the gate admits a user credential only (an OAuth access token issued for ``{base}/mcp``, or
an ``oag_`` key; :meth:`~hivegate.auth.gate.EndpointGate.admit_user`), and the request is served,
with that principal current, by one low-level SDK ``Server`` and one
``StreamableHTTPSessionManager`` (both protocol eras), whose handlers
(:mod:`hivegate.mcp.user_handlers`) decide from the principal what the caller sees.

Handshake-era sessions belong to the user who opened them: the SDK binds a session to the
credential identity it finds in ``scope["user"]`` at ``initialize`` and answers any other
identity exactly as for an unknown session (404); here that identity is the user id, so any of
the user's credentials may continue the session and nobody else's can. Handlers see the
principal of the request being served (not the one that opened the session).

List changes reach open handshake-era sessions (on their GET stream) and 2026-07-28
``subscriptions/listen`` streams of the users concerned only: registry changes to a user's
agents (added, removed, changed, MCP switched on or off, new owner), and the change events of
the agents' runtimes this endpoint has used (their spec updates and their backend servers' own
events, resource updates with the wrapped URI).

A 2025-03-26 session's batch is split and each element served as its own POST
(:mod:`hivegate.mcp.batch`); replies are negotiated as on the agent endpoints
(:mod:`hivegate.mcp.negotiation`).

Not here: hivegate's lean paths (every request goes through the SDK, except a one-shot request
without a session, :func:`~hivegate.mcp.legacy_fastpath.serve_oneshot`), resource templates (see
:mod:`hivegate.mcp.user_handlers`), and legacy ``resources/subscribe`` / ``logging/setLevel``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable, Collection
from contextlib import asynccontextmanager, nullcontext
from typing import Any, get_args

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.caching import CacheHint
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.session import ServerSession
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.subscriptions import (
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from hivegate import __version__
from hivegate.agents.model import CacheableMethod
from hivegate.agents.registry import AgentChange
from hivegate.auth.gate import EndpointGate
from hivegate.auth.principal import Principal, current_principal, principal_scope
from hivegate.errors import BatchNotSupportedError, GatewayError, InternalError
from hivegate.mcp.batch import (
    BATCH_ELEMENT,
    BATCH_VERSION,
    ServeOne,
    element_request,
    refuse_ended_session,
    serve_batch,
)
from hivegate.mcp.event_store import EndpointEventStore
from hivegate.mcp.host import AgentHost
from hivegate.mcp.legacy_fastpath import oneshot_candidate, serve_oneshot
from hivegate.mcp.legacy_sessions import BudgetedSessionManager, LegacySessions
from hivegate.mcp.negotiation import adapt_send, negotiate, refuse_unstreamable
from hivegate.mcp.pagination import CursorCodec
from hivegate.mcp.rendering import jsonrpc_error_response
from hivegate.mcp.runtime import AgentRuntime, ListChangedServer
from hivegate.mcp.sdk_bridge import live_session_ids
from hivegate.mcp.tools import MESSAGE_TOOL_SCHEMA
from hivegate.mcp.transport import (
    HostPolicy,
    is_modern,
    read_mcp_post,
    replay_receive,
    request_headers,
    without_session_header_on_error,
)
from hivegate.mcp.user_handlers import OwnedAgents, UserHandlers, wrap_resource_uri
from hivegate.settings import Settings

__all__ = ["USER_SERVER_NAME", "UserEndpoint"]

logger = logging.getLogger(__name__)

USER_SERVER_NAME = "hivegate"
INSTRUCTIONS = (
    "This server gathers the agents you may use. Each agent is one tool, named by the agent's id: "
    "send it a `message` (and `context_id` to continue a conversation). The agents' resources and "
    "prompts are listed too, named `{agent}.{name}`; resource URIs are "
    "`hivegate://agents/{agent}/resource?uri=<the agent's URI, percent-encoded>`."
)
_CACHEABLE: tuple[str, ...] = get_args(CacheableMethod)
_PRIVATE_NOW = CacheHint(ttl_ms=0, scope="private")
"""What a user sees depends on who they are and changes as agents do: never shared, never fresh."""
_SESSION_HEADER = "mcp-session-id"
_EVENT_BACKLOG = 1024
_LIST_EVENTS: tuple[ServerEvent, ...] = (ToolsListChanged(), ResourcesListChanged(), PromptsListChanged())
_NOTIFY: dict[type[Any], Callable[[ServerSession], Any]] = {
    ToolsListChanged: ServerSession.send_tool_list_changed,
    ResourcesListChanged: ServerSession.send_resource_list_changed,
    PromptsListChanged: ServerSession.send_prompt_list_changed,
}


class _Caller(AuthenticatedUser):
    """The admitted principal as the SDK sees it in ``scope["user"]``.

    The SDK binds a handshake-era session to ``(client_id, issuer, subject)`` of the user that
    opened it; ``subject`` is the user id and the rest is constant, so the binding is the user.
    """

    def __init__(self, principal: Principal) -> None:
        super().__init__(AccessToken(token="", client_id=USER_SERVER_NAME, scopes=[], subject=principal.user_id))
        self.principal = principal


def _principal_of(request: Any) -> Principal | None:
    user = request.scope.get("user") if isinstance(request, Request) else None
    return user.principal if isinstance(user, _Caller) else None


def _user_key(username: str | None) -> str | None:
    return username.casefold() if username is not None else None


class _UserBus:
    """Listen-stream fan-out where each stream hears only the events of the user who opened it.

    A ``SubscriptionBus`` for the SDK's ``ListenHandler``, which subscribes from the listen
    request's own task: the caller is :func:`current_principal` there.
    """

    def __init__(self) -> None:
        self._listeners: dict[object, tuple[str | None, Callable[[ServerEvent], None]]] = {}

    async def publish(self, event: ServerEvent) -> None:
        """Deliver ``event`` to every stream (the protocol's method; this endpoint uses :meth:`deliver`)."""
        for _, listener in list(self._listeners.values()):
            self._call(listener, event)

    def deliver(self, users: frozenset[str], event: ServerEvent) -> None:
        """Deliver ``event`` to the streams of ``users`` (casefolded usernames)."""
        for user, listener in list(self._listeners.values()):
            if user in users:
                self._call(listener, event)

    @staticmethod
    def _call(listener: Callable[[ServerEvent], None], event: ServerEvent) -> None:
        try:
            listener(event)
        except Exception:  # fan-out boundary
            logger.exception("listen-stream listener raised")

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        token = object()
        self._listeners[token] = (_user_key(current_principal().username), listener)

        def unsubscribe() -> None:
            self._listeners.pop(token, None)

        return unsubscribe


class _LegacySessions:
    """Open handshake-era sessions by user, to announce list changes on their GET streams."""

    def __init__(self, manager: StreamableHTTPSessionManager) -> None:
        self._manager = manager
        self._sessions: dict[str, tuple[str | None, ServerSession]] = {}

    def _live(self) -> Collection[str]:
        return live_session_ids(self._manager)

    def remember(self, session_id: str, user: str | None, session: ServerSession) -> None:
        if session_id not in self._sessions:
            live = self._live()
            if len(self._sessions) > 2 * len(live) + 64:  # drop expired sessions: the table stays bounded
                self._sessions = {k: v for k, v in self._sessions.items() if k in live}
        self._sessions[session_id] = (user, session)

    def of(self, users: frozenset[str]) -> list[tuple[str, ServerSession]]:
        live = self._live()
        return [(sid, session) for sid, (user, session) in self._sessions.items() if user in users and sid in live]

    def forget(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)


class UserEndpoint:
    """ASGI app for ``/mcp``. Serve requests inside ``async with endpoint.running():``."""

    def __init__(self, host: AgentHost, settings: Settings, gate: EndpointGate) -> None:
        self._host = host
        self._gate = gate
        self._policy = HostPolicy(settings.server.allowed_hosts, settings.server.allowed_origins)
        self._max_body_bytes = settings.server.max_body_bytes
        self._agents = OwnedAgents()
        self._bus = _UserBus()
        self._relays: dict[str, tuple[AgentRuntime, Callable[[], None]]] = {}
        self._events: MemoryObjectSendStream[tuple[frozenset[str], ServerEvent]] | None = None
        codec = CursorCodec(settings.security.cursor_key.get_secret_value().encode())
        self.handlers = UserHandlers(host, self._agents, codec, settings.mcp.default_page_size, self._relay)
        self._max_listen_streams = settings.mcp.max_listen_streams_total
        self.events = EndpointEventStore(host.events)
        self.server = self._build_server()
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
        self._legacy = _LegacySessions(self.manager)
        self._versions = LegacySessions(self.manager, settings.mcp.session_idle_timeout_seconds)
        """The negotiated version of each session (2025-03-26 sessions may send batches)."""
        self._max_batch_messages = settings.mcp.max_batch_messages

    def _build_server(self) -> Server[Any]:
        h = self.handlers
        server = ListChangedServer(
            USER_SERVER_NAME,
            version=__version__,
            title="hivegate",
            description="The agents you may use, gathered on one MCP server.",
            instructions=INSTRUCTIONS,
            # Every tool listed here is a message tool: no x-mcp-header, so no Mcp-Param-* to check.
            get_tool_input_schema=lambda name: MESSAGE_TOOL_SCHEMA,
            on_list_tools=h.on_list_tools,
            on_call_tool=h.on_call_tool,
            on_list_resources=h.on_list_resources,
            on_list_resource_templates=h.on_list_resource_templates,
            on_read_resource=h.on_read_resource,
            on_list_prompts=h.on_list_prompts,
            on_get_prompt=h.on_get_prompt,
            on_completion=h.on_completion,
            on_subscriptions_listen=ListenHandler(self._bus, max_subscriptions=self._max_listen_streams),
        )
        server.cache_hints = {method: _PRIVATE_NOW for method in _CACHEABLE}
        server.middleware.append(self._as_caller)
        server.middleware.append(self.events.track_session)
        return server

    # -- lifecycle ---------------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncGenerator[UserEndpoint]:
        """Run the session manager and follow the registry; on exit every session ends."""
        registry = self._host.registry
        self._agents.load(registry.all())
        unsubscribe = registry.subscribe(self._on_agent_change)
        send, receive = anyio.create_memory_object_stream[tuple[frozenset[str], ServerEvent]](_EVENT_BACKLOG)
        self._events = send
        try:
            async with self.manager.run(), anyio.create_task_group() as tg:
                tg.start_soon(self._fan_out, receive)
                try:
                    yield self
                finally:
                    tg.cancel_scope.cancel()
        finally:
            unsubscribe()
            self._events = None
            send.close()
            for _, stop in self._relays.values():
                stop()
            self._relays.clear()
            self.events.close()

    # -- requests ----------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self._serve(scope, receive, send)
        except GatewayError as exc:
            await jsonrpc_error_response(exc)(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        pairs, headers = request_headers(scope)
        self._policy.check(headers)
        principal = await self._gate.admit_user(scope["path"], pairs)
        if principal.user_id is None:  # never for a user credential; sessions are bound to this id
            raise InternalError("the credential names no user")
        # A batch element's body was charged as part of its batch's (:mod:`hivegate.mcp.batch`).
        charge = None if BATCH_ELEMENT in scope else self._host.budgets.body_charge(scope, principal)
        with principal_scope(principal), charge or nullcontext():
            modern = is_modern(headers)
            mode = negotiate(scope, headers.get("accept"))
            send = adapt_send(send, mode)
            message: Any = None
            if scope["method"] == "POST":
                allow_batch = BATCH_ELEMENT not in scope and self._in_batch_session(headers)
                try:
                    post = await read_mcp_post(
                        scope,
                        receive,
                        headers,
                        self._max_body_bytes,
                        modern=modern,
                        allow_batch=allow_batch,
                        charge=charge,
                    )
                except BatchNotSupportedError:
                    refuse_ended_session(headers, modern=modern, live=self._versions.live)
                    raise
                receive, message = post.receive, post.decoded
                if isinstance(message, list):
                    serve_one = self._batch_element(scope, receive, headers)
                    await serve_batch(message, serve_one, send, max_messages=self._max_batch_messages)
                    return
                if modern:
                    refuse_unstreamable(mode, message)
                elif oneshot_candidate(headers, message):
                    await serve_oneshot(self.server, "/mcp", message, send)
                    return
                else:
                    send = self._follow_handshake(headers, message, send)
            if not modern and _SESSION_HEADER not in headers:
                send = without_session_header_on_error(send)
            scope["user"] = _Caller(principal)
            with self._host.budgets.admit(scope, headers, message, principal, modern=modern):
                await self.events.handle(self.manager.handle_request, scope, receive, send)

    def _in_batch_session(self, headers: dict[str, str]) -> bool:
        session_id = headers.get(_SESSION_HEADER)
        return session_id is not None and self._versions.ready_version(session_id) == BATCH_VERSION

    def _follow_handshake(self, headers: dict[str, str], message: dict[str, Any], send: Send) -> Send:
        """Record the version a session negotiates, once the SDK accepts its handshake."""
        session_id = headers.get(_SESSION_HEADER)
        if session_id is None and message.get("method") == "initialize":
            return self._versions.watch_initialize(message.get("params"), send)
        if session_id is not None and message.get("method") == "notifications/initialized":
            return self._versions.watch_initialized(session_id, send)
        return send

    def _batch_element(self, scope: Scope, receive: Receive, headers: dict[str, str]) -> ServeOne:
        """Serve one element of a 2025-03-26 batch as a POST of its own (:mod:`hivegate.mcp.batch`)."""

        async def serve_one(body: bytes, send: Send) -> None:
            element_scope, _ = element_request(scope, headers, body)
            await self._serve(element_scope, replay_receive(body, receive), send)

        return serve_one

    async def _as_caller(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Serve each request as its own caller (a handshake-era session's tasks inherit the opener's
        context), and remember handshake-era sessions for list-change announcements."""
        principal = _principal_of(ctx.request)
        if principal is None:
            return await call_next(ctx)
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            assert isinstance(ctx.request, Request)  # _principal_of found one
            session_id = ctx.request.headers.get(_SESSION_HEADER)
            if session_id is not None:
                self._legacy.remember(session_id, _user_key(principal.username), ctx.session)
        with principal_scope(principal):
            return await call_next(ctx)

    # -- change announcements ----------------------------------------------------------

    def _announce(self, users: frozenset[str], event: ServerEvent) -> None:
        if self._events is None or not users:
            return
        try:
            self._events.send_nowait((users, event))
        except anyio.WouldBlock:
            logger.warning("user endpoint: change backlog full; dropping a %s", type(event).__name__)

    def _on_agent_change(self, change: AgentChange) -> None:
        """A registry listener: the owners before and after may see different lists now."""
        self._agents.apply(change)
        if change.after is None:
            relay = self._relays.pop(change.agent_id, None)
            if relay is not None:
                relay[1]()
        owners = frozenset(s.owner.casefold() for s in (change.before, change.after) if s is not None)
        for event in _LIST_EVENTS:
            self._announce(owners, event)

    def _relay(self, runtime: AgentRuntime) -> None:
        """Forward ``runtime``'s change events to its owner's sessions (once per runtime)."""
        agent_id = runtime.view.spec.id
        current = self._relays.get(agent_id)
        if current is not None and current[0] is runtime:
            return
        if current is not None:
            current[1]()

        def forward(event: ServerEvent) -> None:
            owner = frozenset({runtime.view.spec.owner.casefold()})
            if isinstance(event, ResourceUpdated):
                event = ResourceUpdated(uri=wrap_resource_uri(agent_id, event.uri))
            self._announce(owner, event)

        self._relays[agent_id] = (runtime, runtime.bus.subscribe(forward))

    async def _fan_out(self, receive: anyio.abc.ObjectReceiveStream[tuple[frozenset[str], ServerEvent]]) -> None:
        async with receive:
            async for users, event in receive:
                self._bus.deliver(users, event)
                notify = _NOTIFY.get(type(event))
                if notify is None:
                    continue  # resource updates: handshake-era clients subscribe on the agents' endpoints
                for session_id, session in self._legacy.of(users):
                    try:
                        with anyio.fail_after(2):
                            await notify(session)
                    except Exception:  # the session ended or its stream is gone: forget it
                        self._legacy.forget(session_id)
