"""One agent's running MCP server: its low-level SDK ``Server``, session manager, backend and change fan-out.

Each agent gets its own ``Server`` (so ``serverInfo``, capabilities and cache hints are the
agent's) and its own ``StreamableHTTPSessionManager`` (so a handshake-era ``Mcp-Session-Id``
opened on one agent's path is unknown — 404 — on every other agent's path). Both are cheap
(microseconds, about 2 KiB) and built on the first request to the agent.

Spec: MCP 2025-11-25 basic/transports#session-management; MCP 2026-07-28
basic/utilities/subscriptions (``subscriptions/listen``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, get_args

import anyio
import anyio.abc
from mcp.server.caching import CacheHint
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ServerEvent,
    ToolsListChanged,
)
from mcp_types import SetLevelRequestParams, SubscribeRequestParams, UnsubscribeRequestParams
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from hivegate.agents.model import AgentSpec, CacheableMethod
from hivegate.backends.base import Backend
from hivegate.backends.python import create_python_backend
from hivegate.mcp.event_journal import EventJournal
from hivegate.mcp.event_store import EndpointEventStore
from hivegate.mcp.handlers import AgentHandlers
from hivegate.mcp.legacy_sessions import BudgetedSessionManager, LegacySessions
from hivegate.mcp.pagination import CursorCodec
from hivegate.mcp.sdk_bridge import deliver_now, refresh_server_info
from hivegate.mcp.view import AgentView
from hivegate.settings import Settings

__all__ = ["AgentRuntime", "ListChangedServer"]

logger = logging.getLogger(__name__)

_CACHEABLE: tuple[str, ...] = get_args(CacheableMethod)
_SESSION_HEADER = "mcp-session-id"


class ListChangedServer(Server[Any]):
    """An SDK server whose handshake-era sessions advertise ``listChanged`` (sent on the GET stream):
    the agent servers and the user-level server."""

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


class _AgentBus(InMemorySubscriptionBus):
    """The agent's listen-stream fan-out; also relays the events of a backend server's own bus."""

    def __init__(self) -> None:
        super().__init__()
        self._relay: Callable[[], None] | None = None

    def relay_from(self, backend: Backend | None) -> None:
        if self._relay is not None:
            self._relay()
            self._relay = None
        source = backend.subscription_bus if backend is not None else None
        if source is not None:
            self._relay = source.subscribe(self._deliver_now)

    def _deliver_now(self, event: ServerEvent) -> None:
        deliver_now(self, event)


async def _create_backend(spec: AgentSpec, task_group: anyio.abc.TaskGroup) -> Backend | None:
    if spec.backend is None:
        return None
    backend = create_python_backend(spec)
    await backend.start(task_group)
    return backend


class AgentRuntime:
    """The live MCP server of one agent. Create with :meth:`start`; stop with :meth:`aclose`."""

    def __init__(
        self,
        view: AgentView,
        settings: Settings,
        codec: CursorCodec,
        task_group: anyio.abc.TaskGroup,
        journal: EventJournal,
    ) -> None:
        self._view = view
        self._task_group = task_group
        self._default_page_size = settings.mcp.default_page_size
        self._max_listen_streams = settings.mcp.max_listen_streams_total
        self.bus = _AgentBus()
        self.bus.relay_from(view.backend)
        self.handlers = AgentHandlers(lambda: self._view, codec, settings.mcp.default_page_size)
        self.events = EndpointEventStore(journal)
        """Serve every request to :attr:`manager` through ``events.handle`` (binds SSE events to sessions)."""
        self.server = self._build_server()
        self._apply_identity(view.spec)
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
        self.legacy_sessions = LegacySessions(self.manager, settings.mcp.session_idle_timeout_seconds)
        self._stop = anyio.Event()
        self._stopped = anyio.Event()

    @property
    def view(self) -> AgentView:
        return self._view

    @property
    def server_info(self) -> dict[str, Any]:
        """The agent's ``serverInfo`` as a wire dict (shared: callers must not mutate it)."""
        return self._server_info

    def tool_input_schema(self, name: object) -> dict[str, Any] | None:
        """The ``inputSchema`` of tool ``name`` (the agent's own, else the backend server's), or None.

        Serves ``Mcp-Param-*`` validation on both paths (Spec: SEP-2243) without a tools/list per call.
        """
        if not isinstance(name, str):
            return None
        view = self._view
        own = view.tool_schemas.get(name)
        if own is not None or view.backend is None:
            return own
        schema = view.backend.tool_input_schema(name)
        return dict(schema) if schema is not None else None

    @classmethod
    async def start(
        cls,
        spec: AgentSpec,
        settings: Settings,
        codec: CursorCodec,
        task_group: anyio.abc.TaskGroup,
        journal: EventJournal,
    ) -> AgentRuntime:
        """Build the agent's backend, view, server and session manager, and start the manager in ``task_group``.

        ``journal`` keeps the SSE events of the agent's handshake-era sessions (shared by the process).
        """
        backend = await _create_backend(spec, task_group)
        view = AgentView.build(spec, backend, settings.mcp.default_page_size)
        runtime = cls(view, settings, codec, task_group, journal)
        await task_group.start(runtime._run_manager)
        return runtime

    async def _run_manager(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        try:
            async with self.manager.run():
                task_status.started()
                await self._stop.wait()
        finally:
            self._stopped.set()

    async def aclose(self) -> None:
        """Stop the session manager (ending its sessions) and the backend."""
        self._stop.set()
        with anyio.move_on_after(5, shield=True):
            await self._stopped.wait()
        self.events.close()
        self.bus.relay_from(None)
        if self._view.backend is not None:
            await self._view.backend.aclose()

    def _build_server(self) -> Server[Any]:
        h = self.handlers
        server = ListChangedServer(
            self._view.spec.id,
            on_list_tools=h.on_list_tools,
            on_call_tool=h.on_call_tool,
            on_list_resources=h.on_list_resources,
            on_list_resource_templates=h.on_list_resource_templates,
            on_read_resource=h.on_read_resource,
            on_list_prompts=h.on_list_prompts,
            on_get_prompt=h.on_get_prompt,
            on_completion=h.on_completion,
            on_subscriptions_listen=ListenHandler(self.bus, max_subscriptions=self._max_listen_streams),
            get_tool_input_schema=self.tool_input_schema,
        )
        # Handshake-era only: the modern wire answers these with -32601 (they were removed in 2026-07-28).
        server.add_request_handler("resources/subscribe", SubscribeRequestParams, h.on_subscribe)
        server.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, h.on_unsubscribe)
        server.add_request_handler("logging/setLevel", SetLevelRequestParams, h.on_set_logging_level)
        server.middleware.append(self._track_legacy_session)
        server.middleware.append(self.events.track_session)
        return server

    def _apply_identity(self, spec: AgentSpec) -> None:
        server = self.server
        server.name = spec.id
        server.title = spec.name
        server.version = spec.version
        server.description = spec.description or None
        server.instructions = spec.instructions
        self._server_info = refresh_server_info(server)
        server.cache_hints = {
            method: CacheHint(ttl_ms=hint.ttl_ms, scope=hint.scope)
            for method in _CACHEABLE
            for hint in (spec.cache.hint_for(method),)
        }

    async def _track_legacy_session(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Remember handshake-era sessions so list changes can be announced on their GET streams."""
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS and ctx.request is not None:
            session_id = ctx.request.headers.get(_SESSION_HEADER)
            if session_id is not None:
                self.legacy_sessions.remember(session_id, ctx.session)
        return await call_next(ctx)

    async def update(self, spec: AgentSpec) -> None:
        """Serve ``spec`` from now on; announce what changed to listen streams and legacy sessions."""
        old = self._view
        backend = old.backend
        if spec.backend != old.spec.backend or spec.base_dir != old.spec.base_dir:
            backend = await _create_backend(spec, self._task_group)
        new = AgentView.build(spec, backend, self._default_page_size)
        self._view = new
        self._apply_identity(spec)
        if backend is not old.backend:
            self.bus.relay_from(backend)
            if old.backend is not None:
                await old.backend.aclose()
        await self._announce(old, new)

    async def _announce(self, old: AgentView, new: AgentView) -> None:
        backend_changed = old.backend is not new.backend
        tools = backend_changed or old.own_tools != new.own_tools
        prompts = backend_changed or old.prompt_list != new.prompt_list
        resources = backend_changed or (old.spec.resources, old.spec.resource_templates) != (
            new.spec.resources,
            new.spec.resource_templates,
        )
        for changed, event, notify in (
            (tools, ToolsListChanged(), ServerSession.send_tool_list_changed),
            (prompts, PromptsListChanged(), ServerSession.send_prompt_list_changed),
            (resources, ResourcesListChanged(), ServerSession.send_resource_list_changed),
        ):
            if not changed:
                continue
            await self.bus.publish(event)
            for session_id, session in self.legacy_sessions.notifiable():
                try:
                    with anyio.fail_after(2):
                        await notify(session)
                except Exception:  # the session ended or its stream is gone: forget it
                    self.legacy_sessions.forget(session_id)
