"""One agent's running MCP server: its surface (SDK ``Server``, session manager, sessions, bus), backend, changes.

Each agent gets its own :class:`~hivegate.mcp.surface.McpSurface` (so ``serverInfo``,
capabilities and cache hints are the agent's, and a handshake-era ``Mcp-Session-Id`` opened on
one agent's path is unknown — 404 — on every other agent's path), built from its
:class:`~hivegate.mcp.handlers.AgentHandlers`. It is cheap (microseconds, a few KiB) and built
on the first request to the agent. A spec change is applied in place and announced
(:meth:`AgentRuntime.update`).

Spec: MCP 2025-11-25 basic/transports#session-management; MCP 2026-07-28
basic/utilities/subscriptions (``subscriptions/listen``).
"""

from __future__ import annotations

import logging
from typing import Any, get_args

import anyio
import anyio.abc
from mcp.server.caching import CacheHint
from mcp.server.subscriptions import PromptsListChanged, ResourcesListChanged, SubscriptionBus, ToolsListChanged

from hivegate.agents.model import AgentSpec, CacheableMethod
from hivegate.backends.base import Backend
from hivegate.backends.factory import create_backend
from hivegate.mcp.event_journal import EventJournal
from hivegate.mcp.handlers import AgentHandlers
from hivegate.mcp.pagination import CursorCodec
from hivegate.mcp.surface import McpSurface, SurfaceHandlers
from hivegate.mcp.view import AgentView
from hivegate.policy.calls import OPEN_POLICY, CallPolicy
from hivegate.settings import Settings

__all__ = ["AgentRuntime"]

logger = logging.getLogger(__name__)

_CACHEABLE: tuple[str, ...] = get_args(CacheableMethod)


async def _create_backend(spec: AgentSpec, task_group: anyio.abc.TaskGroup) -> Backend | None:
    backend = create_backend(spec)
    if backend is None:
        return None
    await backend.start(task_group)
    return backend


class AgentRuntime:
    """The live MCP server of one agent. Create with :meth:`start`; stop with :meth:`aclose`.

    Its :attr:`surface` is the agent endpoint's SDK side (server, session manager, sessions, bus):
    handshake-era sessions are bound to the agent's endpoint only.
    """

    def __init__(
        self,
        view: AgentView,
        settings: Settings,
        codec: CursorCodec,
        task_group: anyio.abc.TaskGroup,
        journal: EventJournal,
        policy: CallPolicy = OPEN_POLICY,
    ) -> None:
        self._view = view
        self._task_group = task_group
        self._default_page_size = settings.mcp.default_page_size
        self.handlers = AgentHandlers(lambda: self._view, codec, settings.mcp.default_page_size, policy)
        self.surface = McpSurface(
            view.spec.id,
            SurfaceHandlers.of(self.handlers),
            settings,
            journal,
            per_user=False,
            tool_input_schema=self.tool_input_schema,
        )
        self.surface.bus.relay_from(_backend_bus(view.backend))
        self._apply_identity(view.spec)
        self._stop = anyio.Event()
        self._stopped = anyio.Event()

    @property
    def view(self) -> AgentView:
        return self._view

    @property
    def label(self) -> str:
        """Who serves a request, for the log."""
        return f"agent {self._view.spec.id}"

    def lean_allowed(self, message: dict[str, Any], *, modern: bool) -> bool:
        """Whether a plain request may take a lean path: not when a backend server that may stream or ask
        the client serves the agent (an in-process SDK server; an upstream MCP server does not for a plain
        2026-07-28 request: :meth:`~hivegate.backends.base.Backend.serves_plainly`)."""
        backend = self._view.backend
        if backend is None or not backend.has_server:
            return True
        return modern and backend.serves_plainly(message.get("method", ""))

    def mcp_param_schema(self, name: object) -> dict[str, Any] | None:
        """The ``inputSchema`` to check ``Mcp-Param-*`` headers of a call of tool ``name`` against, or None
        when the agent's own tool annotates no argument with ``x-mcp-header`` (Spec: SEP-2243). A backend
        server's tool is checked against its listed schema, as the SDK path checks it."""
        if not isinstance(name, str):
            return None
        view = self._view
        if name in view.tool_schemas:
            return view.tool_schemas[name] if name in view.header_tools else None
        return self.tool_input_schema(name)

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
        policy: CallPolicy = OPEN_POLICY,
    ) -> AgentRuntime:
        """Build the agent's backend, view and surface, and start the surface in ``task_group``.

        ``journal`` keeps the SSE events of the agent's handshake-era sessions (shared by the process);
        ``policy`` is what each call is checked against (rate limit, attachments).
        """
        backend = await _create_backend(spec, task_group)
        view = AgentView.build(spec, backend, settings.mcp.default_page_size)
        runtime = cls(view, settings, codec, task_group, journal, policy)
        await task_group.start(runtime._run_surface)
        return runtime

    async def _run_surface(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        try:
            async with self.surface.running():
                task_status.started()
                await self._stop.wait()
        finally:
            self._stopped.set()

    async def aclose(self) -> None:
        """Stop the surface (ending its sessions) and the backend."""
        self._stop.set()
        with anyio.move_on_after(5, shield=True):
            await self._stopped.wait()
        self.surface.bus.relay_from(None)
        if self._view.backend is not None:
            await self._view.backend.aclose()

    def _apply_identity(self, spec: AgentSpec) -> None:
        server = self.surface.server
        server.name = spec.id
        server.title = spec.name
        server.version = spec.version
        server.description = spec.description or None
        server.instructions = spec.instructions
        self.surface.refresh_identity()
        server.cache_hints = {
            method: CacheHint(ttl_ms=hint.ttl_ms, scope=hint.scope)
            for method in _CACHEABLE
            for hint in (spec.cache.hint_for(method),)
        }

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
            self.surface.bus.relay_from(_backend_bus(backend))
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
        for changed, event in (
            (tools, ToolsListChanged()),
            (prompts, PromptsListChanged()),
            (resources, ResourcesListChanged()),
        ):
            if changed:
                await self.surface.announce(event)


def _backend_bus(backend: Backend | None) -> SubscriptionBus | None:
    """The backend server's own ``SubscriptionBus`` (its change events reach the agent's streams), or None."""
    return backend.subscription_bus if backend is not None else None
