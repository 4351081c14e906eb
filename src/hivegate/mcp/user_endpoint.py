"""The user-level MCP endpoint ``/mcp``: one server showing a user every agent they may use.

A request takes the same pipeline as on ``/{agentId}/mcp`` (:mod:`hivegate.mcp.pipeline`:
transport checks, lean paths of both eras, batches, the SDK transport); here the gate admits a
user credential only (an OAuth access token issued for ``{base}/mcp``, or an ``oag_`` key;
:meth:`~hivegate.auth.gate.EndpointGate.admit_user`), and the request is served, with that
principal current, by one surface (:class:`~hivegate.mcp.surface.McpSurface`: one low-level SDK
``Server`` and one session manager, both eras), whose handlers (:mod:`hivegate.mcp.user_handlers`)
decide from the principal what the caller sees.

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

The lean paths take ``tools/call`` of an agent whose runtime is running and has no SDK server
backend (never ``discover_agents``, which the SDK path serves), ``tools/list``, ``ping`` and
``server/discover`` (:meth:`UserEndpoint.lean_allowed`);
everything else goes through the SDK.

Not here: resource templates (see :mod:`hivegate.mcp.user_handlers`), and legacy
``resources/subscribe`` / ``logging/setLevel``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from typing import Any, get_args

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server.caching import CacheHint
from mcp.server.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
)
from starlette.types import Receive, Scope, Send

from hivegate import __version__
from hivegate.a2a.discovery import AgentDiscovery
from hivegate.agents.model import CacheableMethod
from hivegate.agents.registry import AgentChange
from hivegate.auth.gate import EndpointGate
from hivegate.auth.principal import Principal
from hivegate.errors import InternalError
from hivegate.mcp.host import AgentHost
from hivegate.mcp.pagination import CursorCodec
from hivegate.mcp.pipeline import McpPipeline
from hivegate.mcp.runtime import AgentRuntime
from hivegate.mcp.surface import McpSurface, SurfaceHandlers
from hivegate.mcp.tools import MESSAGE_TOOL_SCHEMA
from hivegate.mcp.user_handlers import (
    DISCOVER_TOOL,
    DISCOVER_TOOL_SCHEMA,
    OwnedAgents,
    UserHandlers,
    wrap_resource_uri,
)
from hivegate.settings import Settings

__all__ = ["USER_SERVER_NAME", "UserEndpoint"]

logger = logging.getLogger(__name__)

USER_SERVER_NAME = "hivegate"
INSTRUCTIONS = (
    "This server gathers the agents you may use. Each agent is one tool, named by the agent's id: "
    "send it a `message` (and `context_id` to continue a conversation). `discover_agents` finds agents "
    "(yours and public ones) and returns their A2A cards. The agents' resources and "
    "prompts are listed too, named `{agent}.{name}`; resource URIs are "
    "`hivegate://agents/{agent}/resource?uri=<the agent's URI, percent-encoded>`."
)
_CACHEABLE: tuple[str, ...] = get_args(CacheableMethod)
_PRIVATE_NOW = CacheHint(ttl_ms=0, scope="private")
"""What a user sees depends on who they are and changes as agents do: never shared, never fresh."""
_EVENT_BACKLOG = 1024
_LIST_EVENTS: tuple[ServerEvent, ...] = (ToolsListChanged(), ResourcesListChanged(), PromptsListChanged())
_LEAN_METHODS = frozenset({"tools/list", "ping", "server/discover"})
"""Methods whose user handlers consult no agent backend (``tools/call`` is checked per agent)."""


class UserEndpoint:
    """ASGI app for ``/mcp``. Serve requests inside ``async with endpoint.running():``.

    It is the user kind of the pipeline (:class:`~hivegate.mcp.pipeline.EndpointKind`: user
    credentials only, one surface for every user) and that surface's target
    (:class:`~hivegate.mcp.surface.EndpointTarget`).
    """

    def __init__(
        self, host: AgentHost, settings: Settings, gate: EndpointGate, discovery: AgentDiscovery | None = None
    ) -> None:
        self._host = host
        self._gate = gate
        self._agents = OwnedAgents()
        self._relays: dict[str, tuple[AgentRuntime, Callable[[], None]]] = {}
        self._events: MemoryObjectSendStream[tuple[frozenset[str], ServerEvent]] | None = None
        codec = CursorCodec(settings.security.cursor_key.get_secret_value().encode())
        self.handlers = UserHandlers(
            host, self._agents, codec, settings.mcp.default_page_size, self._relay, discovery=discovery
        )
        self.surface = McpSurface(
            USER_SERVER_NAME,
            SurfaceHandlers.of(self.handlers),
            settings,
            host.events,
            per_user=True,
            # Every tool listed here is a message tool or discover_agents: no x-mcp-header, no Mcp-Param-* to check.
            tool_input_schema=lambda name: DISCOVER_TOOL_SCHEMA if name == DISCOVER_TOOL else MESSAGE_TOOL_SCHEMA,
            version=__version__,
            title="hivegate",
            description="The agents you may use, gathered on one MCP server.",
            instructions=INSTRUCTIONS,
        )
        self.surface.server.cache_hints = {method: _PRIVATE_NOW for method in _CACHEABLE}
        self._pipeline = McpPipeline(self, host.budgets, host.lean_calls, settings)

    # -- the endpoint kind and target --------------------------------------------------

    label = "/mcp"

    async def admit(self, scope: Scope, pairs: list[tuple[str, str]]) -> Principal:
        """The caller, admitted with a user credential (:meth:`~hivegate.auth.gate.EndpointGate.admit_user`).

        Raises:
            InternalError: the credential names no user (never for a user credential; sessions are bound to it).
            GatewayError: as :meth:`~hivegate.auth.gate.EndpointGate.admit_user`.
        """
        principal = await self._gate.admit_user(scope["path"], pairs)
        if principal.user_id is None:
            raise InternalError("the credential names no user")
        return principal

    async def target(self, scope: Scope) -> UserEndpoint:
        return self

    def lean_allowed(self, message: dict[str, Any], *, modern: bool) -> bool:
        """Whether the user handlers of ``message`` may skip the SDK: they must reach no SDK server backend.

        ``tools/call`` of an agent whose runtime is running without such a backend (an agent not
        started yet goes through the SDK once, which starts it); the methods of :data:`_LEAN_METHODS`.
        """
        method = message.get("method")
        if method != "tools/call":
            return method in _LEAN_METHODS
        params = message.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        if name == DISCOVER_TOOL:
            return False  # served by the SDK path (its handler, not an agent's)
        runtime = self._host.cached(name) if isinstance(name, str) else None
        return runtime is not None and not runtime.view.serves_backend

    def mcp_param_schema(self, name: object) -> dict[str, Any] | None:
        """None: the message tools annotate no argument with ``x-mcp-header``."""
        return None

    # -- lifecycle ---------------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncGenerator[UserEndpoint]:
        """Run the surface and follow the registry; on exit every session ends."""
        registry = self._host.registry
        self._agents.load(registry.all())
        unsubscribe = registry.subscribe(self._on_agent_change)
        send, receive = anyio.create_memory_object_stream[tuple[frozenset[str], ServerEvent]](_EVENT_BACKLOG)
        self._events = send
        try:
            async with self.surface.running(), anyio.create_task_group() as tg:
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

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._pipeline(scope, receive, send)

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

        self._relays[agent_id] = (runtime, runtime.surface.bus.subscribe(forward))

    async def _fan_out(self, receive: anyio.abc.ObjectReceiveStream[tuple[frozenset[str], ServerEvent]]) -> None:
        async with receive:
            async for users, event in receive:
                await self.surface.announce(event, users)
